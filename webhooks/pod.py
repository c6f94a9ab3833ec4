"""Pod admission webhooks for exclusive placement (docs/behaviour/jobset.md §3.2, §3.3; what JobSet
v0.12.0 does differently -- the priority label on every JobSet pod, no patch for an untouched pod,
a missing leader Node -- is a step of the level's ``AdmissionSteps``, docs/behaviour/jobset-v0.12.md §2).

The mutating webhook pins a follower pod to its leader's topology domain through a
nodeSelector and gives leaders the affinity terms that keep one Job per domain; the validating
webhook rejects followers created before their leader is scheduled (the Job controller retries,
so the rejection is transient). Reads go through the manager's cache (pods by the ``podName``
index, nodes by name).
"""

from __future__ import annotations

import logging
from typing import Any

from manager.meta.object import Json as Object
from manager.meta.object import annotations_of, labels_of, namespace_of
from manager.webhook import Denied, Handler, validating_handler
from trainer.api import jobset_constants as c
from trainer.jobset.levels import v0_10_admission
from trainer.jobset.levels.admission import AdmissionSteps
from trainer.jobset.placement import PlacementError, is_leader_pod, leader_pod_for_follower
from webhooks import typed

_V0_10: AdmissionSteps = v0_10_admission.STEPS

log = logging.getLogger(__name__)

MUTATE_PATH = "/mutate--v1-pod"
VALIDATE_PATH = "/validate--v1-pod"


def set_leader_affinities(pod: Object) -> None:
    """One required pod-affinity and one anti-affinity term, appended to what the pod has."""
    topology_key = annotations_of(pod)[c.ExclusiveKey]
    job_key = labels_of(pod).get(c.JobKey, "")
    priority = labels_of(pod).get(c.PriorityKey, "")
    affinity = pod.setdefault("spec", {}).setdefault("affinity", {})
    pod_affinity = affinity.setdefault("podAffinity", {})
    anti_affinity = affinity.setdefault("podAntiAffinity", {})
    pod_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(
        {
            "labelSelector": {"matchExpressions": [{"key": c.JobKey, "operator": "In", "values": [job_key]}]},
            "topologyKey": topology_key,
            "namespaceSelector": {},
        }
    )
    anti_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(
        {
            "labelSelector": {
                "matchExpressions": [
                    {"key": c.JobKey, "operator": "Exists"},
                    {"key": c.JobKey, "operator": "NotIn", "values": [job_key]},
                    {"key": c.PriorityKey, "operator": "In", "values": [priority]},
                ]
            },
            "topologyKey": topology_key,
            "namespaceSelector": {},
        }
    )


class PodDefaulter:
    def __init__(self, reader: Any, steps: AdmissionSteps = _V0_10) -> None:
        self.reader = reader
        self.steps = steps

    async def default(self, pod: Object) -> None:
        if not self.steps.pod_labelled_with_priority(pod):
            return
        priority = (pod.get("spec") or {}).get("priority")
        if priority is not None:
            pod.setdefault("metadata", {}).setdefault("labels", {})[c.PriorityKey] = str(priority)
        if c.ExclusiveKey not in annotations_of(pod):
            return
        if is_leader_pod(pod):
            set_leader_affinities(pod)
            return
        await self.set_node_selector_for_follower(pod)

    async def set_node_selector_for_follower(self, pod: Object) -> None:
        try:
            leader = await leader_pod_for_follower(self.reader, pod, namespace_of(pod))
        except PlacementError as err:
            log.info("no leader for follower pod, the validating webhook decides: %s", err)
            return
        if not (leader.get("spec") or {}).get("nodeName"):
            return
        topology_key = annotations_of(pod)[c.ExclusiveKey]
        try:
            value = await self.steps.leader_topology(self.reader, leader, topology_key)
        except PlacementError as err:
            raise Denied(str(err)) from err
        pod.setdefault("spec", {}).setdefault("nodeSelector", {})[topology_key] = value


class PodValidator:
    def __init__(self, reader: Any) -> None:
        self.reader = reader

    async def validate_create(self, pod: Object) -> list[str] | None:
        annotations = annotations_of(pod)
        if c.JobSetNameKey not in annotations or c.NodeSelectorStrategyKey in annotations:
            return None
        if c.ExclusiveKey not in annotations or is_leader_pod(pod):
            return None
        topology_key = annotations[c.ExclusiveKey]
        selector = (pod.get("spec") or {}).get("nodeSelector")
        if selector is None:
            raise Denied("follower pod node selector not set")
        if topology_key not in selector:
            raise Denied(
                f"follower pod node selector for topology domain not found. missing selector: {topology_key}"
            )
        try:
            leader = await leader_pod_for_follower(self.reader, pod, namespace_of(pod))
        except PlacementError as err:
            raise Denied(str(err)) from err
        if not (leader.get("spec") or {}).get("nodeName"):
            raise Denied(
                "leader pod not yet scheduled, not creating follower pod. this is an expected, transient error"
            )
        return None

    async def validate_update(self, old: Object, new: Object) -> list[str] | None:
        return None

    async def validate_delete(self, pod: Object) -> list[str] | None:
        return None


def mutating_handler(client: Any, steps: AdmissionSteps = _V0_10) -> Handler:
    """The pod defaulter behind Go's typed decode and re-encode of a corev1.Pod."""
    return steps.defaulting_handler(
        PodDefaulter(client, steps),
        decode=typed.decoder("v1", "Pod", typed_view=True, types_file=steps.go_types),
        encode=typed.encoder("v1", "Pod", types_file=steps.go_types),
    )


def validation_handler(client: Any, steps: AdmissionSteps = _V0_10) -> Handler:
    return validating_handler(
        PodValidator(client), decode=typed.decoder("v1", "Pod", types_file=steps.go_types)
    )
