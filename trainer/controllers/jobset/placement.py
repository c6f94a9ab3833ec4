"""Exclusive placement helpers shared by the pod reconciler and the pod webhooks (docs/behaviour/jobset.md
§3).

Pods are found through two field indexes on the cache: ``podJobKey`` (pods of one Job) and
``podName`` (a leader by its name without the random suffix).
"""

from __future__ import annotations

from typing import Any

from manager.client.errors import NotFound
from manager.scheme import GroupVersionKind
from trainer.api import jobset_constants as c
from trainer.controllers.jobset.jobs import annotations_of, labels_of, meta, name_of

Object = dict[str, Any]
POD_GVK = GroupVersionKind("", "v1", "Pod")
NODE_GVK = GroupVersionKind("", "v1", "Node")
POD_JOB_KEY = "podJobKey"
POD_NAME_KEY = "podName"


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


def _controller_uid(pod: Object) -> str | None:
    for ref in meta(pod).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid") or "")
    return None


def validate_same_owner(follower: Object, leader: Object) -> None:
    """A leader left over from before a restart belongs to another Job: refuse it."""
    follower_uid = _controller_uid(follower)
    if follower_uid is None:
        raise PlacementError("follower pod has no owner reference")
    leader_uid = _controller_uid(leader)
    if leader_uid is None:
        raise PlacementError(f'leader pod "{name_of(leader)}" has no owner reference')
    if follower_uid != leader_uid:
        raise PlacementError(
            f"follower pod owner UID ({follower_uid}) != leader pod owner UID ({leader_uid})"
        )


async def leader_pod_for_follower(reader: Any, pod: Object, namespace: str) -> Object:
    leader_name = gen_leader_pod_name(pod)
    pods = await reader.list(POD_GVK, namespace=namespace, field_selector={POD_NAME_KEY: leader_name})
    live = [p for p in pods if not meta(p).get("deletionTimestamp")]
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
        node = await reader.get(NODE_GVK, node_name)
    except NotFound:
        return ""
    labels = labels_of(node)
    if topology_key not in labels:
        raise PlacementError(f"node does not have topology label: {topology_key}")
    return str(labels[topology_key])
