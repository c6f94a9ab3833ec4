"""JobSet v0.10.1's own steps of the JobSet and Pod webhooks (level v2.1; docs/behaviour/jobset.md
§1.7-1.9, §3.2-3.3).

v0.10.1 is built with controller-runtime v0.22 (a defaulted object is always answered with the
typed round trip's patch) and k8s.io/api v0.34 (``gocodec.TYPES_FILE``); its webhooks refuse with
403 and the bare message, and know no volume claim policies, restart actions or new restart
strategy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from manager.meta.field import FieldError, aggregate
from manager.meta.object import Json as Object
from manager.meta.object import annotations_of
from manager.webhook import CustomDefaulter, Denied, Handler, defaulting_handler
from manager.webhook.custom import Decode, Encode
from trainer.api import gocodec
from trainer.api import jobset_constants as c
from trainer.jobset.levels.admission import Problem
from trainer.jobset.placement import topology_from_pod

__all__ = ["STEPS"]


class _Steps:
    """AdmissionSteps of JobSet v0.10.1."""

    @property
    def go_types(self) -> str:
        return gocodec.TYPES_FILE

    async def watch(self, cache: Any) -> None:
        """Nothing beyond the controllers' informers (Pods, Nodes)."""
        return None

    def defaulting_handler(
        self, defaulter: CustomDefaulter[Object], *, decode: Decode[Object], encode: Encode[Object]
    ) -> Handler:
        return defaulting_handler(defaulter, decode=decode, encode=encode)

    def default_jobset(self, js: Object) -> None:
        return None

    def restart_strategy_problems(self, js: Object) -> list[Problem]:
        return []

    def failure_action_problems(self, js: Object) -> tuple[list[Problem], bool]:
        return [], True

    def replicated_job_problems(self, js: Object, index: int, rjob: Object) -> list[Problem]:
        return []

    def coordinator_problems(self, js: Object) -> list[Problem]:
        return []

    async def volume_claim_problems(self, js: Object, reader: Any) -> list[Problem]:
        return []

    def create_denial(self, js: Object, problems: Sequence[Problem]) -> Denied:
        """``errors.Join``: one line per error, 403."""
        return Denied("\n".join(str(p) for p in problems))

    def kueue_pairs(
        self, old_rjobs: list[Object], new_rjobs: list[Object]
    ) -> list[tuple[Object, Object]] | None:
        """By index. PORT NOTE: with more replicated jobs than before Go indexes past the old
        list and panics; we answer "field is immutable"."""
        if len(new_rjobs) > len(old_rjobs):
            return None
        return list(zip(new_rjobs, old_rjobs, strict=False))

    def scaling_problems(self, old: Object, new: Object, new_rjobs: list[Object]) -> list[FieldError]:
        return []  # parallelism and completions are immutable like the rest of the replicated jobs

    def update_denial(self, js: Object, problems: Sequence[FieldError]) -> Denied:
        """``ErrorList.ToAggregate()``, 403."""
        return Denied(aggregate(problems))

    def pod_labelled_with_priority(self, pod: Object) -> bool:
        """Only exclusive-placement pods of the affinity strategy."""
        annotations = annotations_of(pod)
        return c.ExclusiveKey in annotations and c.NodeSelectorStrategyKey not in annotations

    async def leader_topology(self, reader: Any, leader: Object, topology_key: str) -> str:
        """A Node that is not found gives "" (``client.IgnoreNotFound``)."""
        return await topology_from_pod(reader, leader, topology_key)


STEPS = _Steps()
