"""Volcano plugin (docs/behaviour/trainer.md §2.12): Volcano PodGroup, group-name annotation, queue and
priority checks.

Why: Volcano gangs pods by the ``scheduling.k8s.io/group-name`` annotation and admits the
PodGroup into a queue with a priority class, so both are validated before the TrainJob runs.
"""

from __future__ import annotations

from typing import Any

from manager.client.errors import NotFound, RequestError
from trainer.api.resources import render_resources
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.runtime.errors import FieldError, RuntimeFailure
from trainer.runtime.info import Info
from trainer.runtime.objects import (
    PRIORITYCLASS_GVK,
    VOLCANO_PODGROUP_GVK,
    name_of,
    namespace_of,
    owner_reference,
)
from trainer.runtime.plugins.base import PluginContext, Watch
from trainer.runtime.plugins.coscheduling import gang_min_member, gang_min_resources, gang_watches

Json = dict[str, Any]

__all__ = ["GROUP_NAME_ANNOTATION", "QUEUE_NAME_ANNOTATION", "Volcano"]

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
SYSTEM_PRIORITY_CLASSES = ("system-cluster-critical", "system-node-critical")


def _priority_class_names(info: Info) -> list[str]:
    names = []
    for rjob in (info.template_spec.obj_apply or {}).get("replicatedJobs") or ():
        pod = ((((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")) or {}
        if pod.get("priorityClassName"):
            names.append(pod["priorityClassName"])
    return names


class Volcano:
    name = "Volcano"

    def __init__(self, context: PluginContext) -> None:
        self._reader = context.reader

    @staticmethod
    def _enabled(info: Info | None) -> bool:
        policy = info.runtime_policy.pod_group_policy if info is not None else None
        return policy is not None and policy.volcano is not None

    def enforce_pod_group_policy(self, info: Info | None, trainjob: TrainJob | None) -> None:
        """Annotate every pod with the TrainJob's Volcano group."""
        if info is None or trainjob is None or not self._enabled(info):
            return
        if info.scheduler.pod_annotations is None:
            info.scheduler.pod_annotations = {}
        info.scheduler.pod_annotations[GROUP_NAME_ANNOTATION] = name_of(trainjob)

    async def validate(
        self, info: Info | None, old: TrainJob | None, new: TrainJob
    ) -> tuple[list[str], list[FieldError]]:
        """Non-empty queue name; every named PriorityClass exists (stops at a system class)."""
        errors: list[FieldError] = []
        if info is None or not self._enabled(info):
            return [], errors
        if info.annotations.get(QUEUE_NAME_ANNOTATION, None) == "":
            errors.append(
                FieldError.invalid(
                    f"spec.annotations[{QUEUE_NAME_ANNOTATION}]", "", "Volcano queue name must not be empty"
                )
            )
        for name in _priority_class_names(info):
            if name in SYSTEM_PRIORITY_CLASSES:
                return [], errors
            try:
                await self._reader.get(PRIORITYCLASS_GVK, name, "")
            except RequestError as err:
                errors.append(
                    FieldError.invalid(
                        "spec.templateSpec.priorityClassName",
                        name,
                        f'PriorityClass "{name}" doesn\'t exist: {err}',
                    )
                )
        return [], errors

    async def build(self, info: Info | None, trainjob: TrainJob | None) -> list[Json]:
        """The Volcano PodGroup, only while absent or while the TrainJob is suspended."""
        if info is None or trainjob is None or trainjob.spec is None or not self._enabled(info):
            return []
        policy = info.runtime_policy.pod_group_policy
        assert policy is not None and policy.volcano is not None
        try:
            await self._reader.get(VOLCANO_PODGROUP_GVK, name_of(trainjob), namespace_of(trainjob))
            exists = True
        except NotFound:
            exists = False
        except RequestError as err:
            raise RuntimeFailure(str(err)) from err  # upstream returns the read error as it is
        if exists and not trainjob.spec.suspend:
            return []
        spec: Json = {
            "minMember": gang_min_member(info),
            "minResources": render_resources(gang_min_resources(info)),
        }
        if QUEUE_NAME_ANNOTATION in info.annotations:
            spec["queue"] = info.annotations[QUEUE_NAME_ANNOTATION]
        priority_classes = _priority_class_names(info)
        if priority_classes:
            spec["priorityClassName"] = priority_classes[-1]
        topology = policy.volcano.network_topology
        if topology is not None:
            spec["networkTopology"] = {
                "mode": topology.mode,
                "highestTierAllowed": topology.highest_tier_allowed,
            }
        return [
            {
                "apiVersion": VOLCANO_PODGROUP_GVK.api_version,
                "kind": VOLCANO_PODGROUP_GVK.kind,
                "metadata": {
                    "name": name_of(trainjob),
                    "namespace": namespace_of(trainjob),
                    "ownerReferences": [owner_reference(trainjob)],
                },
                "spec": spec,
            }
        ]

    def watches(self) -> list[Watch]:
        return gang_watches(VOLCANO_PODGROUP_GVK, "PodGroup CRDs must be installed in advance")
