"""Exclusive placement helpers shared by the pod reconciler and the pod webhooks (docs/behaviour/jobset.md
§3).

Pods are found through two field indexes on the cache: ``podJobKey`` (pods of one Job) and
``podName`` (a leader by its name without the random suffix).
"""

from __future__ import annotations

from typing import Any

from manager.cache import ByObject
from manager.cache.cache import Cache
from manager.cache.transform import project
from manager.client.errors import NotFound
from manager.meta import gvk
from manager.meta.object import Json as Object
from manager.meta.object import annotations_of, controller_uid, labels_of, meta_of, name_of
from trainer.api import jobset_constants as c

__all__ = [
    "NODE_CACHE",
    "PLACEMENT_POD_CACHE",
    "POD_JOB_KEY",
    "POD_NAME_KEY",
    "PlacementError",
    "cache_placement_reads",
    "gen_leader_pod_name",
    "is_leader_pod",
    "leader_pod_for_follower",
    "pod_job_key_index",
    "pod_name_index",
    "topology_from_pod",
    "validate_same_owner",
]
POD_JOB_KEY = "podJobKey"
POD_NAME_KEY = "podName"

NODE_CACHE = ByObject(
    transform=project(
        {
            "apiVersion": True,
            "kind": True,
            "metadata": {"name": True, "uid": True, "resourceVersion": True, "labels": True},
        }
    )
)
"""Placement reads a Node for its topology label only (``topology_from_pod``, v0.12.0's
``leader_topology``): the cache keeps each Node's name and labels, not its status (most of its
size: KWOK's are 8 KB in memory, a kubelet's with its image list more) that every heartbeat
rewrites. Divergence J-17."""


PLACEMENT_POD_CACHE = ByObject(
    label_selectors=[c.JobSetNameKey],
    transform=project(
        {
            "apiVersion": True,
            "kind": True,
            "metadata": {
                "name": True,
                "namespace": True,
                "uid": True,
                "resourceVersion": True,
                "labels": True,
                "annotations": True,
                "ownerReferences": True,
                "deletionTimestamp": True,
            },
            "spec": {"nodeName": True},
        }
    ),
    compact=True,
)
"""A JobSet's Pod as the Pod webhooks read a leader: its name, labels, annotations, owner, and
node (``leader_pod_for_follower``, ``validate_same_owner``, ``leader_topology``). The webhook
process caches Pods so (divergence J-17); the manager's Pod controllers read them whole."""


async def cache_placement_reads(cache: Any) -> None:
    """What placement reads, cached: Pods by leader name (``POD_NAME_KEY``) and Nodes' labels.

    Both the Pod controller's process and the Pod webhooks' (a webhook process of its own,
    ``trainer.webhook_process``) call it before their cache starts."""
    await cache.index_field(gvk.POD, POD_NAME_KEY, pod_name_index)
    if isinstance(cache, Cache):  # before the informer exists: its transform is chosen then
        cache.options.by_object.setdefault(gvk.NODE, NODE_CACHE)
    await cache.get_informer(gvk.NODE)  # the leader's Node is read from the cache, as upstream


class PlacementError(Exception):
    """An exclusive-placement check failed; the text is what upstream reports."""


def pod_job_key_index(pod: Object) -> list[str]:
    if c.ExclusiveKey not in annotations_of(pod):
        return []
    key = labels_of(pod).get(c.JobKey)
    return [] if key is None else [key]


def pod_name_index(pod: Object) -> list[str]:
    """``js-rjob-0-0-xyz`` -> ``js-rjob-0-0``: only names with at least 5 ``-`` parts."""
    if c.ExclusiveKey not in annotations_of(pod):
        return []
    name = name_of(pod)
    if len(name.split("-")) < 5:
        return []
    return [name.rsplit("-", 1)[0]]


def is_leader_pod(pod: Object) -> bool:
    return annotations_of(pod).get(c.JobCompletionIndexAnnotation) == "0"


def gen_leader_pod_name(pod: Object) -> str:
    labels = labels_of(pod)
    parts = []
    for key in (c.JobSetNameKey, c.ReplicatedJobNameKey, c.JobIndexKey):
        if key not in labels:
            raise PlacementError(f"pod missing label: {key}")
        parts.append(labels[key])
    return f"{parts[0]}-{parts[1]}-{parts[2]}-0"


def validate_same_owner(follower: Object, leader: Object) -> None:
    """A leader left over from before a restart belongs to another Job: refuse it."""
    follower_uid = controller_uid(follower)
    if follower_uid is None:
        raise PlacementError("follower pod has no owner reference")
    leader_uid = controller_uid(leader)
    if leader_uid is None:
        raise PlacementError(f'leader pod "{name_of(leader)}" has no owner reference')
    if follower_uid != leader_uid:
        raise PlacementError(
            f"follower pod owner UID ({follower_uid}) != leader pod owner UID ({leader_uid})"
        )


async def leader_pod_for_follower(reader: Any, pod: Object, namespace: str) -> Object:
    leader_name = gen_leader_pod_name(pod)
    pods = await reader.list(gvk.POD, namespace=namespace, field_selector={POD_NAME_KEY: leader_name})
    live = [p for p in pods if not meta_of(p).get("deletionTimestamp")]
    if len(live) != 1:
        raise PlacementError(
            f"expected 1 leader pod ({leader_name}), but got {len(live)}. this is an expected, transient error"
        )
    validate_same_owner(pod, live[0])
    result: Object = live[0]
    return result


async def topology_from_pod(reader: Any, pod: Object, topology_key: str) -> str:
    """The topology label of the pod's node; a missing Node gives "" (upstream quirk, docs/behaviour/jobset.md
    §3.2)."""
    node_name = str((pod.get("spec") or {}).get("nodeName") or "")
    try:
        node = await reader.get(gvk.NODE, node_name)
    except NotFound:
        return ""
    labels = labels_of(node)
    if topology_key not in labels:
        raise PlacementError(f"node does not have topology label: {topology_key}")
    return str(labels[topology_key])
