"""The pod reconciler for exclusive placement (docs/behaviour/jobset.md §3.4).

It checks that every follower of a scheduled leader selects the leader's topology domain.
Upstream's validation never answers "invalid" without an error, so the follower-deletion path
is unreachable there: a mismatch is logged and retried. We keep that: ``delete_follower_pods``
exists and is tested, but ``reconcile`` never calls it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from manager import ReconcileError, Request, Result
from manager.client.errors import NotFound
from manager.controller.predicate import Predicate, new_predicate_funcs
from manager.meta.gvk import POD as POD_GVK
from manager.meta.object import Json as Object
from manager.meta.object import annotations_of, labels_of, name_of
from manager.meta.object import meta_of as meta
from trainer.api import jobset_constants as c
from trainer.controllers.jobset.reconciler import run_bounded
from trainer.jobset.levels.controller import ControllerSteps
from trainer.jobset.levels.v0_10_controller import STEPS as V0_10_STEPS
from trainer.jobset.placement import POD_JOB_KEY, PlacementError, is_leader_pod, topology_from_pod

log = logging.getLogger(__name__)


def leader_pod_predicate() -> Predicate:
    """Only scheduled, live leader pods with exclusive placement reach the reconciler."""

    def keep(pod: Object) -> bool:
        return (
            is_leader_pod(pod)
            and bool((pod.get("spec") or {}).get("nodeName"))
            and c.ExclusiveKey in annotations_of(pod)
            and not meta(pod).get("deletionTimestamp")
        )

    return new_predicate_funcs(keep)


async def validate_pod_placements(reader: Any, leader: Object, pods: list[Object]) -> bool:
    """True when all followers select the leader's topology; otherwise a ``PlacementError``."""
    topology_key = annotations_of(leader).get(c.ExclusiveKey, "")
    leader_topology = await topology_from_pod(reader, leader, topology_key)
    for pod in pods:
        if is_leader_pod(pod):
            continue
        selector = (pod.get("spec") or {}).get("nodeSelector")
        if selector is None:
            raise PlacementError(f"pod {name_of(pod)} nodeSelector is nil")
        if topology_key not in selector:
            raise PlacementError(f"pod {name_of(pod)} nodeSelector is missing key: {topology_key}")
        if selector[topology_key] != leader_topology:
            raise PlacementError(
                f'follower topology "{selector[topology_key]}" != leader topology "{leader_topology}"'
            )
    return True


def _disruption_condition() -> Object:
    return {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": c.ExclusivePlacementViolationReason,
        "message": c.ExclusivePlacementViolationMessage,
    }


def add_disruption_condition(pod: Object) -> bool:
    """Set DisruptionTarget=True; False when it already was (no status write needed)."""
    conditions: list[Object] = list((pod.get("status") or {}).get("conditions") or [])
    wanted = _disruption_condition()
    for i, cond in enumerate(conditions):
        if cond.get("type") == wanted["type"]:
            if cond.get("status") == wanted["status"]:
                return False
            conditions[i] = wanted
            break
    else:
        conditions.append(wanted)
    pod.setdefault("status", {})["conditions"] = conditions
    return True


async def delete_follower_pods(client: Any, pods: list[Object]) -> None:
    """Mark each follower with DisruptionTarget and delete it (unreachable from ``reconcile``)."""

    def evict(pod: Object) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            if add_disruption_condition(pod):
                await client.status.update(pod)
            with contextlib.suppress(NotFound):
                await client.delete(pod, propagation_policy="Background")

        return call

    errors = await run_bounded(evict(p) for p in pods if not is_leader_pod(p))
    if errors:
        raise errors[0]


class PodReconciler:
    def __init__(self, client: Any, steps: ControllerSteps = V0_10_STEPS) -> None:
        self.client = client
        self.steps = steps

    async def reconcile(self, req: Request) -> Result | None:
        try:
            leader: Object = await self.client.get(POD_GVK, req.name, req.namespace)
        except NotFound:
            return None
        job_key = labels_of(leader).get(c.JobKey)
        if job_key is None:
            raise ReconcileError(f'job key label not found on leader pod: "{name_of(leader)}"')
        pods = await self.client.list(POD_GVK, namespace=req.namespace, field_selector={POD_JOB_KEY: job_key})
        try:
            pods = self.steps.leader_job_pods(leader, pods)
            await validate_pod_placements(self.client, leader, pods)
        except PlacementError as err:
            raise ReconcileError(str(err)) from err
        return None
