"""The JobSet and Pod reconcilers' steps that differ between JobSet releases (``JobSetLevel``)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from manager.events import Recorder, Recorders
from manager.meta.object import Json as Object
from manager.scheme import ObjectKey
from trainer.jobset.conditions import ConditionOpts, RestartEnd

__all__ = [
    "ControllerSteps",
    "FailurePolicyError",
    "InPlaceRestartOutcome",
    "JobRestart",
    "JobSetPods",
    "Recorders",
]


class FailurePolicyError(Exception):
    """A failure-policy action that cannot be applied: the reconcile fails with this text."""


class JobRestart(NamedTuple):
    """A Job recreated by a failure-policy action (RestartJob): the Warning to queue."""

    reason: str
    message: str


class InPlaceRestartOutcome(enum.Enum):
    """What the in-place restart step made of a JobSet's pods."""

    UNCHANGED = "unchanged"
    UPDATED = "updated"
    """The status's in-place restart attempts changed."""
    EXCEEDED_MAX_RESTARTS = "exceeded max restarts"
    """The JobSet fails with ``ReachedMaxRestarts``."""


@dataclass(frozen=True)
class JobSetPods:
    """How the JobSet controller finds a JobSet's pods: a field index of the Pod cache and the
    JobSets a pod's events reconcile."""

    index: str
    """The index's name."""
    index_value: Callable[[Object], list[str]]
    """A pod's values in the index."""
    key: Callable[[Object], str]
    """The index value of a JobSet's pods."""
    jobsets_of: Callable[[Object], Iterable[ObjectKey]]
    """The JobSets a pod's event reconciles."""


class ControllerSteps(Protocol):
    """The JobSet release's own steps of the JobSet and Pod reconcilers
    (docs/behaviour/jobset.md; v0.12.0: docs/behaviour/jobset-v0.12.md §1)."""

    # -- wiring -------------------------------------------------------------------------------

    def event_recorder(self, recorders: Recorders, component: str) -> Recorder:
        """The recorder of the controller named ``component`` (core/v1 or events.k8s.io/v1)."""
        ...

    def job_owner_index(self, job: Object) -> list[str]:
        """The ``.metadata.controller`` index value of a child Job (its JobSet's name or uid)."""
        ...

    def job_owner_key(self, js: Object) -> str:
        """The ``.metadata.controller`` value a JobSet's Jobs are listed by."""
        ...

    # -- conditions ---------------------------------------------------------------------------

    def restart_condition(self, rule: Object | None, message: str) -> ConditionOpts | None:
        """The condition a restart sets (``rule``: the failure-policy rule that restarts, None
        for the default action); None: the release sets none."""
        ...

    def restart_end_condition(self, end: RestartEnd) -> ConditionOpts | None:
        """The condition that says a restart is over for ``end``; None: the release has none."""
        ...

    def same_status_condition(self, current: Object, new: Object) -> Object | None:
        """What replaces ``current`` when ``new`` has its type and status (None: nothing)."""
        ...

    # -- child Jobs and their claims ----------------------------------------------------------

    def announces_job_creation_failure(self, causes: list[Exception]) -> bool:
        """Whether a failed Job creation (the API errors ``causes``) is a ``JobCreationFailed``
        Warning on the JobSet."""
        ...

    def add_volumes(self, job: Object, js: Object) -> None:
        """Add to a child Job being constructed the volumes of the JobSet's claims it mounts."""
        ...

    def volume_claims(self, js: Object) -> list[list[Object]]:
        """The PVCs the JobSet needs, per volume-claim policy (none: the release has none)."""
        ...

    # -- failure policy: Jobs restarted one by one (v0.12.0's RestartJob gate) -----------------

    def previous_job_attempt(self, js: Object, job: Object) -> bool:
        """Whether a Job of the JobSet's current restart is of an earlier attempt of its own
        (then it is deleted and made again, as the Jobs of an earlier JobSet restart are);
        raises ``FailurePolicyError`` for a Job whose labels cannot tell."""
        ...

    def job_restart_keys(self, js: Object, rjob_name: str, job_index: int) -> dict[str, str]:
        """The labels (and the same annotations) a new Job of this index carries beyond the
        shared ones."""
        ...

    def replicated_job_status_fields(self, js: Object, rjob_name: str) -> Object:
        """The fields a recomputed ``replicatedJobsStatus`` entry keeps from the current one."""
        ...

    def restarts_count_towards_max(self, js: Object) -> int:
        """The restarts RestartJobSet compares with ``maxRestarts``."""
        ...

    def restart_job(self, js: Object, failed_job: Object, action: str) -> JobRestart | None:
        """Apply a failure-policy action that recreates one Job (``RestartJob``,
        ``RestartJobAndIgnoreMaxRestarts``) to the JobSet's status: the Warning to queue, or
        None when the JobSet reached ``maxRestarts`` (it fails); raises ``FailurePolicyError``
        where the release cannot apply it."""
        ...

    # -- in-place restarts (v0.12.0's InPlaceRestart gate) ------------------------------------

    def jobset_pods(self) -> JobSetPods | None:
        """The Pod index and watch of the JobSet controller; None: it watches no pods."""
        ...

    def restarts_in_place(self, js: Object) -> bool:
        """Whether the pass ends with the in-place restart step for this JobSet."""
        ...

    def in_place_restart(self, js: Object, pods: list[Object]) -> InPlaceRestartOutcome:
        """The in-place restart step over the JobSet's pods (it writes the status's attempts)."""
        ...

    # -- scaling (v0.12.0's ElasticJobSet gate) -----------------------------------------------

    def job_scaling_patches(self, js: Object, active_jobs: list[Object]) -> list[tuple[Object, Object]]:
        """(Job, merge patch) for the active Jobs whose ``parallelism``/``completions`` follow
        their template; empty: none."""
        ...

    # -- exclusive placement ------------------------------------------------------------------

    def leader_job_pods(self, leader: Object, pods: list[Object]) -> list[Object]:
        """Of the pods with the leader's ``job-key``, those the Pod reconciler checks (raises
        ``trainer.jobset.placement.PlacementError`` when it cannot tell)."""
        ...
