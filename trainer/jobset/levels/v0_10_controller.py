"""JobSet v0.10.1's own steps of the JobSet and Pod reconcilers (docs/behaviour/jobset.md)."""

from __future__ import annotations

from manager.client.errors import Invalid
from manager.events import Recorder
from manager.meta.object import Json as Object
from manager.meta.object import name_of
from trainer.jobset.conditions import ConditionOpts, RestartEnd
from trainer.jobset.levels.controller import (
    FailurePolicyError,
    InPlaceRestartOutcome,
    JobRestart,
    JobSetPods,
    Recorders,
)
from trainer.jobset.objects import jobset_controller_ref

__all__ = ["STEPS"]


class _Steps:
    """ControllerSteps of JobSet v0.10.1."""

    def event_recorder(self, recorders: Recorders, component: str) -> Recorder:
        """core/v1 Events (``mgr.GetEventRecorderFor``)."""
        return recorders.event_recorder(component)

    def job_owner_index(self, job: Object) -> list[str]:
        """The JobSet's name (quirk: a Job of an earlier JobSet of that name is listed too)."""
        ref = jobset_controller_ref(job)
        return [] if ref is None else [str(ref.get("name") or "")]

    def job_owner_key(self, js: Object) -> str:
        return name_of(js)

    def restart_condition(self, rule: Object | None, message: str) -> ConditionOpts | None:
        return None  # a restart is told by its event only

    def restart_end_condition(self, end: RestartEnd) -> ConditionOpts | None:
        return None

    def same_status_condition(self, current: Object, new: Object) -> Object | None:
        return None  # same type and status: the condition is kept as it is (§2.13)

    def announces_job_creation_failure(self, causes: list[Exception]) -> bool:
        # Upstream only logs it. A Job template the API server refuses as invalid cannot
        # succeed on a retry, so we say so on the JobSet (docs/divergences.md J-11).
        return any(isinstance(cause, Invalid) for cause in causes)

    def add_volumes(self, job: Object, js: Object) -> None:
        return None  # there are no volumeClaimPolicies in v0.10.1

    def volume_claims(self, js: Object) -> list[list[Object]]:
        return []

    # v0.10.1 has no feature gates: no RestartJob, InPlaceRestart or ElasticJobSet

    def previous_job_attempt(self, js: Object, job: Object) -> bool:
        return False

    def job_restart_keys(self, js: Object, rjob_name: str, job_index: int) -> dict[str, str]:
        return {}

    def replicated_job_status_fields(self, js: Object, rjob_name: str) -> Object:
        return {}

    def restarts_count_towards_max(self, js: Object) -> int:
        return int((js.get("status") or {}).get("restartsCountTowardsMax") or 0)

    def restart_job(self, js: Object, failed_job: Object, action: str) -> JobRestart | None:
        raise FailurePolicyError(
            f"failed to find a corresponding action for the FailurePolicyRuleAction {action}"
        )

    def jobset_pods(self) -> JobSetPods | None:
        return None

    def restarts_in_place(self, js: Object) -> bool:
        return False

    def in_place_restart(self, js: Object, pods: list[Object]) -> InPlaceRestartOutcome:
        return InPlaceRestartOutcome.UNCHANGED

    def job_scaling_patches(self, js: Object, active_jobs: list[Object]) -> list[tuple[Object, Object]]:
        return []

    def leader_job_pods(self, leader: Object, pods: list[Object]) -> list[Object]:
        return pods  # every pod with the leader's job-key


STEPS = _Steps()
