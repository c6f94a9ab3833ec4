"""CoScheduling plugin (docs/behaviour/trainer.md §2.11): scheduler-plugins PodGroup and the pod-group label.

Why: gang scheduling needs every pod of the TrainJob labelled with one PodGroup whose
``minMember`` and ``minResources`` cover all pods, so the scheduler admits all or none.
"""

from __future__ import annotations

from typing import Any

from manager.client.errors import NotFound
from trainer.api import scheduling_constants as sc
from trainer.api.resources import ResourceQuantities, add_resources, render_resources, scale_resources
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.runtime.info import Info
from trainer.runtime.objects import (
    LIMITRANGE_GVK,
    PODGROUP_GVK,
    RUNTIMECLASS_GVK,
    name_of,
    namespace_of,
    owner_reference,
)
from trainer.runtime.plugins.base import PluginContext, Watch
from trainer.runtime.plugins.watches import (
    by_controller_owner,
    suspended_trainjobs_in_namespace,
    suspended_trainjobs_using_runtime_class,
)

Json = dict[str, Any]

__all__ = ["CoScheduling", "gang_min_member", "gang_min_resources"]

_CHANGES = frozenset({"create", "update", "delete"})


def gang_min_member(info: Info) -> int:
    """Every pod of every PodSet."""
    return sum(pod_set.count_or_one() for pod_set in info.template_spec.pod_sets)


def gang_min_resources(info: Info) -> ResourceQuantities:
    """Requests of one pod times its PodSet's count, summed exactly over PodSets."""
    total: ResourceQuantities = {}
    for pod_set in info.template_spec.pod_sets:
        add_resources(total, scale_resources(pod_set.single_pod_requests, pod_set.count_or_one()))
    return total


def gang_watches(pod_group_gvk: Any, message: str) -> list[Watch]:
    """Owned PodGroups, LimitRanges and RuntimeClasses, gated on the PodGroup CRD."""
    return [
        Watch(pod_group_gvk, by_controller_owner, requires_crd=pod_group_gvk, missing_crd_message=message),
        Watch(
            LIMITRANGE_GVK,
            suspended_trainjobs_in_namespace,
            events=_CHANGES,
            map_old_on_update=False,
            requires_crd=pod_group_gvk,
            missing_crd_message=message,
        ),
        Watch(
            RUNTIMECLASS_GVK,
            suspended_trainjobs_using_runtime_class,
            events=_CHANGES,
            map_old_on_update=False,
            requires_crd=pod_group_gvk,
            missing_crd_message=message,
        ),
    ]


class CoScheduling:
    name = "CoScheduling"

    def __init__(self, context: PluginContext) -> None:
        self._reader = context.reader

    def enforce_pod_group_policy(self, info: Info | None, trainjob: TrainJob | None) -> None:
        """Label every pod with the TrainJob's PodGroup."""
        if info is None or trainjob is None:
            return
        policy = info.runtime_policy.pod_group_policy
        if policy is None or policy.coscheduling is None:
            return
        info.scheduler.pod_labels[sc.PodGroupLabel] = name_of(trainjob)

    async def build(self, info: Info | None, trainjob: TrainJob | None) -> list[Json]:
        """The PodGroup, only while absent or while the TrainJob is suspended."""
        if info is None or trainjob is None or trainjob.spec is None:
            return []
        policy = info.runtime_policy.pod_group_policy
        if policy is None or policy.coscheduling is None:
            return []
        try:
            await self._reader.get(PODGROUP_GVK, name_of(trainjob), namespace_of(trainjob))
            exists = True
        except NotFound:
            exists = False
        if exists and not trainjob.spec.suspend:
            return []
        return [
            {
                "apiVersion": sc.API_VERSION,
                "kind": sc.PodGroupKind,
                "metadata": {
                    "name": name_of(trainjob),
                    "namespace": namespace_of(trainjob),
                    "ownerReferences": [owner_reference(trainjob)],
                },
                "spec": {
                    "minMember": gang_min_member(info),
                    "minResources": render_resources(gang_min_resources(info)),
                    "scheduleTimeoutSeconds": policy.coscheduling.schedule_timeout_seconds,
                },
            }
        ]

    def watches(self) -> list[Watch]:
        return gang_watches(PODGROUP_GVK, "PodGroup CRDs must be installed in advance")
