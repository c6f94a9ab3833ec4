"""JobSet v0.12.0's own steps of the JobSet and Pod reconcilers (docs/behaviour/jobset-v0.12.md §1).

The steps of the release's feature gates (``trainer.features``: ``RestartJob``,
``InPlaceRestart``, ``ElasticJobSet``, all off by default) read the gate and, when it is on,
call the module named after it (``v0_12_restart_job``, ``v0_12_in_place_restart``,
``v0_12_elastic``); when it is off they do what v0.12.0 does with the gate off.
"""

from __future__ import annotations

import logging

from manager.events import Recorder
from manager.meta.object import Json as Object
from manager.meta.object import meta_of, name_of
from trainer import features
from trainer.api import jobset_constants as c
from trainer.api.v2_3 import jobset_constants as c23
from trainer.jobset import volume_claims
from trainer.jobset.conditions import ConditionOpts, RestartEnd
from trainer.jobset.levels import v0_12_elastic as elastic
from trainer.jobset.levels import v0_12_in_place_restart as in_place
from trainer.jobset.levels import v0_12_restart_job as restart_job
from trainer.jobset.levels.controller import (
    FailurePolicyError,
    InPlaceRestartOutcome,
    JobRestart,
    JobSetPods,
    Recorders,
)
from trainer.jobset.objects import controller_of, jobset_controller_ref
from trainer.jobset.placement import PlacementError

__all__ = ["EVENT_ACTION", "STEPS"]
log = logging.getLogger(__name__)

EVENT_ACTION = "Reconciling"
"""The one ``action`` both v0.12.0 reconcilers write on their events.k8s.io Events."""

# What each end of a restart writes on RestartingJobSet (False), as v0.12.0's call sites do.
_RESTART_ENDS = {
    RestartEnd.JOBS_READY: (c23.RestartingJobSetReasonJobsReady, c23.RestartingJobSetReasonJobsReadyMessage),
    RestartEnd.COMPLETED: (c23.RestartingJobSetReasonJobSetCompleted, c.AllJobsCompletedMessage),
    RestartEnd.FAILED: (
        c23.RestartingJobSetReasonJobSetFailed,
        c23.RestartingJobSetReasonJobSetFailedMessage,
    ),
    RestartEnd.SUSPENDED: (c23.RestartingJobSetReasonJobSetSuspended, c.JobSetSuspendedMessage),
}


class _Steps:
    """ControllerSteps of JobSet v0.12.0."""

    def event_recorder(self, recorders: Recorders, component: str) -> Recorder:
        """events.k8s.io/v1 Events (``mgr.GetEventRecorder``), action ``Reconciling``."""
        return recorders.events_recorder(component, EVENT_ACTION)

    def job_owner_index(self, job: Object) -> list[str]:
        """The JobSet's uid: a new JobSet never lists the Jobs an earlier one of its name left."""
        ref = jobset_controller_ref(job)
        return [] if ref is None else [str(ref.get("uid") or "")]

    def job_owner_key(self, js: Object) -> str:
        return str(meta_of(js).get("uid") or "")

    def restart_condition(self, rule: Object | None, message: str) -> ConditionOpts | None:
        """``RestartingJobSet`` True, named after the rule that restarts (or the default action)."""
        if rule is None:
            reason = c23.RestartingJobSetReasonDefaultFailurePolicy
        else:
            reason = c23.RestartingJobSetReasonFailurePolicyFormat % str(rule.get("name") or "")
        return ConditionOpts(c23.JobSetRestarting, "True", reason, message, "Warning")

    def restart_end_condition(self, end: RestartEnd) -> ConditionOpts | None:
        """``RestartingJobSet`` False; it only changes an existing condition (False is never
        added), so a JobSet that never restarted shows none."""
        reason, message = _RESTART_ENDS[end]
        return ConditionOpts(c23.JobSetRestarting, "False", reason, message, "Normal")

    def same_status_condition(self, current: Object, new: Object) -> Object | None:
        """A new reason or message replaces the condition; its transition time stays."""
        if new.get("reason") == current.get("reason") and new.get("message") == current.get("message"):
            return None
        return {
            **new,
            "lastTransitionTime": current.get("lastTransitionTime") or new.get("lastTransitionTime"),
        }

    def announces_job_creation_failure(self, causes: list[Exception]) -> bool:
        return True  # every failed creation is a JobCreationFailed Warning, at once

    def add_volumes(self, job: Object, js: Object) -> None:
        volume_claims.add_volumes(job, js)

    def volume_claims(self, js: Object) -> list[list[Object]]:
        return volume_claims.volume_claims(js)

    # -- RestartJob -----------------------------------------------------------------------------

    def previous_job_attempt(self, js: Object, job: Object) -> bool:
        if not features.enabled(features.RestartJob):
            return False
        return restart_job.previous_job_attempt(js, job)

    def job_restart_keys(self, js: Object, rjob_name: str, job_index: int) -> dict[str, str]:
        if not features.enabled(features.RestartJob):
            return {}
        return restart_job.job_restart_keys(js, rjob_name, job_index)

    def replicated_job_status_fields(self, js: Object, rjob_name: str) -> Object:
        """The Jobs' restart counts (only while the gate is on: with it off they are dropped)."""
        if not features.enabled(features.RestartJob):
            return {}
        return restart_job.replicated_job_status_fields(js, rjob_name)

    def restarts_count_towards_max(self, js: Object) -> int:
        """With the gate on, the Jobs' own restarts count towards ``maxRestarts`` too."""
        if features.enabled(features.RestartJob):
            return restart_job.total_restarts_count_towards_max(js)
        return int((js.get("status") or {}).get("restartsCountTowardsMax") or 0)

    def restart_job(self, js: Object, failed_job: Object, action: str) -> JobRestart | None:
        if not features.enabled(features.RestartJob):
            raise FailurePolicyError(
                f"{action} failure policy action cannot be used when the feature gate RestartJob is disabled"
            )
        return restart_job.record_job_restart(js, failed_job, action)

    # -- InPlaceRestart -------------------------------------------------------------------------

    def jobset_pods(self) -> JobSetPods | None:
        """The Pod index ``podsIndexByJobSet`` and a watch of the JobSets' pods, gate on."""
        return in_place.JOBSET_PODS if features.enabled(features.InPlaceRestart) else None

    def restarts_in_place(self, js: Object) -> bool:
        if not in_place.uses_in_place_restart(js):
            return False
        if not features.enabled(features.InPlaceRestart):
            log.info(
                "in-place restart strategy cannot be used when the feature gate is disabled",
                extra={"featureGate": features.InPlaceRestart},
            )
            return False
        return True

    def in_place_restart(self, js: Object, pods: list[Object]) -> InPlaceRestartOutcome:
        return in_place.reconcile(js, pods)

    # -- ElasticJobSet --------------------------------------------------------------------------

    def job_scaling_patches(self, js: Object, active_jobs: list[Object]) -> list[tuple[Object, Object]]:
        if not features.enabled(features.ElasticJobSet):
            return []
        return elastic.scaling_patches(js, active_jobs)

    def leader_job_pods(self, leader: Object, pods: list[Object]) -> list[Object]:
        """Only the pods of the leader's own Job (its controller's uid): a pod of an earlier Job
        of that name is not checked."""
        owner = controller_of(leader)
        if owner is None:
            raise PlacementError(f'leader pod "{name_of(leader)}" has no controller owner')
        kept = []
        for pod in pods:
            ref = controller_of(pod)
            if ref is not None and ref.get("uid") == owner.get("uid"):
                kept.append(pod)
            else:
                log.info(
                    "WARNING: Pod with matching job-key but not the owner reference",
                    extra={"pod": name_of(pod), "owner": ref},
                )
        return kept


STEPS = _Steps()
