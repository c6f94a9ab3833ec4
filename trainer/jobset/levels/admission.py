"""The JobSet and Pod webhooks' steps that differ between JobSet releases (``JobSetLevel``).

The handlers (``webhooks/jobset.py``, ``webhooks/pod.py``) run the checks both releases share
and call these steps where the releases part: the Go types the objects are decoded into, what
the defaulting handler answers for an unchanged object, the release's own defaults and checks,
and how a refusal is answered (v0.10.1: 403 with the bare message; v0.12.0: 422
``apierrors.NewInvalid``). Each release module (``v0_10_admission.py``, ``v0_12_admission.py``)
implements all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from manager.meta.field import FieldError
from manager.meta.object import Json as Object
from manager.webhook import CustomDefaulter, Denied, Handler
from manager.webhook.custom import Decode, Encode

__all__ = ["AdmissionSteps", "Problem"]

Problem = FieldError | str
"""One error of a Go validation: a ``field.Error``, or a plain error's text (``fmt.Errorf``)."""


class AdmissionSteps(Protocol):
    """The JobSet release's own steps of the JobSet and Pod webhooks
    (docs/behaviour/jobset.md §1.7-1.9, §3.2-3.3; v0.12.0: docs/behaviour/jobset-v0.12.md §2)."""

    @property
    def go_types(self) -> str:
        """The ``trainer.api.gocodec`` types file of the release's binary: the JobSet and Pod
        structs the webhooks decode into and re-encode."""
        ...

    async def watch(self, cache: Any) -> None:
        """Start the informers of what the release's webhooks read from the manager's cache
        (controller-runtime starts one on a kind's first read)."""
        ...

    def defaulting_handler(
        self, defaulter: CustomDefaulter[Object], *, decode: Decode[Object], encode: Encode[Object]
    ) -> Handler:
        """The defaulting handler of the release's controller-runtime (what an unchanged object gets)."""
        ...

    def default_jobset(self, js: Object) -> None:
        """The release's own JobSet defaults, after the shared ones."""
        ...

    def restart_strategy_problems(self, js: Object) -> list[Problem]:
        """Create checks of ``failurePolicy.restartStrategy``, before every other check."""
        ...

    def failure_action_problems(self, js: Object) -> tuple[list[Problem], bool]:
        """Create checks of the failure rules' actions, before the rules' own checks, and
        whether the failure-policy checks go on after them."""
        ...

    def replicated_job_problems(self, js: Object, index: int, rjob: Object) -> list[Problem]:
        """Create checks of one replicated job after the shared ones (``index``: its place in
        ``spec.replicatedJobs``)."""
        ...

    def coordinator_problems(self, js: Object) -> list[Problem]:
        """Create checks of ``spec.coordinator`` after the shared ones (only when it is set)."""
        ...

    async def volume_claim_problems(self, js: Object, reader: Any) -> list[Problem]:
        """Create checks of ``spec.volumeClaimPolicies``, last (``reader`` reads existing PVCs)."""
        ...

    def create_denial(self, js: Object, problems: Sequence[Problem]) -> Denied:
        """The answer to a JobSet that fails the create checks."""
        ...

    def kueue_pairs(
        self, old_rjobs: list[Object], new_rjobs: list[Object]
    ) -> list[tuple[Object, Object]] | None:
        """(new, old) replicated jobs whose Kueue-mutable pod fields the update check takes from
        the old object while suspended; None: the replicated jobs count as changed."""
        ...

    def scaling_problems(self, old: Object, new: Object, new_rjobs: list[Object]) -> list[FieldError]:
        """Update checks of changed ``parallelism``/``completions``, before the immutability
        check; the replicated jobs they judge get the old values in ``new_rjobs`` (the copy that
        check compares). None of them without the release's scaling."""
        ...

    def update_denial(self, js: Object, problems: Sequence[FieldError]) -> Denied:
        """The answer to a JobSet update that fails the update checks."""
        ...

    def pod_labelled_with_priority(self, pod: Object) -> bool:
        """Whether the Pod defaulter handles this pod: it sets the priority label and, for an
        exclusive-placement pod, the affinities or the leader's nodeSelector."""
        ...

    async def leader_topology(self, reader: Any, leader: Object, topology_key: str) -> str:
        """The topology value of the leader pod's node (a ``PlacementError`` or an ``ApiError`` denies)."""
        ...
