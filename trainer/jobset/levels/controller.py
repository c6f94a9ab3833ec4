"""The JobSet and Pod reconcilers' steps that differ between JobSet releases (``JobSetLevel``)."""

from __future__ import annotations

from typing import Protocol

from manager.events import Recorder, Recorders
from manager.meta.object import Json as Object
from trainer.jobset.conditions import ConditionOpts, RestartEnd

__all__ = ["ControllerSteps", "Recorders"]


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

    # -- exclusive placement ------------------------------------------------------------------

    def leader_job_pods(self, leader: Object, pods: list[Object]) -> list[Object]:
        """Of the pods with the leader's ``job-key``, those the Pod reconciler checks (raises
        ``trainer.jobset.placement.PlacementError`` when it cannot tell)."""
        ...
