"""The watch mappers shared by plugins: owned objects, LimitRanges and RuntimeClasses.

Why data plus async mappers: the TrainJob controller (built elsewhere) only needs to know
which kinds to watch and, for an event's object, which TrainJob keys to enqueue.
"""

from __future__ import annotations

from typing import Any

from manager.client.interfaces import Reader
from manager.scheme import ObjectKey
from trainer.api import trainer_constants as tc
from trainer.runtime import indexes
from trainer.runtime.objects import CLUSTER_TRAINING_RUNTIME_GVK, TRAINING_RUNTIME_GVK, TRAINJOB_GVK

Json = dict[str, Any]

__all__ = [
    "by_controller_owner",
    "suspended_trainjobs_in_namespace",
    "suspended_trainjobs_using_runtime_class",
]


async def by_controller_owner(reader: Reader, obj: Json) -> list[ObjectKey]:
    """The TrainJob that is the object's controller owner (same namespace), if any."""
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or ():
        if not ref.get("controller"):
            continue
        group = str(ref.get("apiVersion", "")).rpartition("/")[0]
        if group == tc.GROUP and ref.get("kind") == tc.TrainJobKind:
            return [ObjectKey(meta.get("namespace") or "", ref.get("name", ""))]
    return []


def _suspended(trainjob: Json) -> bool:
    return bool((trainjob.get("spec") or {}).get("suspend"))


def _key(trainjob: Json) -> ObjectKey:
    meta = trainjob.get("metadata") or {}
    return ObjectKey(meta.get("namespace") or "", meta.get("name") or "")


async def suspended_trainjobs_in_namespace(reader: Reader, obj: Json) -> list[ObjectKey]:
    """A LimitRange changed: requeue the suspended TrainJobs of its namespace (PodGroups may resize)."""
    namespace = (obj.get("metadata") or {}).get("namespace") or ""
    trainjobs = await reader.list(TRAINJOB_GVK, namespace=namespace)
    return [_key(tj) for tj in trainjobs if _suspended(tj)]


async def suspended_trainjobs_using_runtime_class(reader: Reader, obj: Json) -> list[ObjectKey]:
    """A RuntimeClass changed: requeue suspended TrainJobs whose runtime uses it.

    Upstream matches TrainJobs to runtimes by runtime *name* only (any namespace) and drops
    only consecutive duplicates; we keep that contract but drop every duplicate key, which
    enqueues the same set.
    """
    name = (obj.get("metadata") or {}).get("name") or ""
    keys: list[ObjectKey] = []
    for runtime_gvk, runtime_index, trainjob_index in (
        (TRAINING_RUNTIME_GVK, indexes.TRAINING_RUNTIME_RUNTIME_CLASS_KEY, indexes.TRAINJOB_RUNTIME_REF_KEY),
        (
            CLUSTER_TRAINING_RUNTIME_GVK,
            indexes.CLUSTER_TRAINING_RUNTIME_RUNTIME_CLASS_KEY,
            indexes.TRAINJOB_CLUSTER_RUNTIME_REF_KEY,
        ),
    ):
        for runtime in await reader.list(runtime_gvk, field_selector={runtime_index: name}):
            runtime_name = (runtime.get("metadata") or {}).get("name") or ""
            for trainjob in await reader.list(TRAINJOB_GVK, field_selector={trainjob_index: runtime_name}):
                key = _key(trainjob)
                if _suspended(trainjob) and key not in keys:
                    keys.append(key)
    return keys
