"""Field indexes of the runtime framework (docs/behaviour/trainer.md §2.2): pure functions plus their exact
names.

Why plain callables: the cache exposes ``await index_field(gvk, name, fn)``, ``fn`` returning
the object's values (an empty list for none); the runtime reconcilers list TrainJobs by runtime
and the gang-scheduling watches list runtimes by RuntimeClass through these names, so the
names are contracts and the functions must never raise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer.api import trainer_constants as tc

__all__ = [
    "CLUSTER_TRAINING_RUNTIME_RUNTIME_CLASS_KEY",
    "TRAINING_RUNTIME_RUNTIME_CLASS_KEY",
    "TRAINJOB_CLUSTER_RUNTIME_REF_KEY",
    "TRAINJOB_RUNTIME_REF_KEY",
    "index_cluster_training_runtime_runtime_class",
    "index_training_runtime_runtime_class",
    "index_trainjob_cluster_training_runtime",
    "index_trainjob_training_runtime",
]

TRAINJOB_RUNTIME_REF_KEY = ".spec.runtimeRef.kind=trainingRuntime"
TRAINJOB_CLUSTER_RUNTIME_REF_KEY = ".spec.runtimeRef.kind=clusterTrainingRuntime"
TRAINING_RUNTIME_RUNTIME_CLASS_KEY = (
    ".trainingRuntimeSpec.jobSetTemplateSpec.replicatedJobs.podTemplateSpec.runtimeClassName"
)
CLUSTER_TRAINING_RUNTIME_RUNTIME_CLASS_KEY = (
    ".clusterTrainingRuntimeSpec.jobSetTemplateSpec.replicatedJobs.podTemplateSpec.runtimeClassName"
)


def _is_kind(obj: Any, kind: str) -> bool:
    """A dict of that kind; list items may come without ``kind``, the cache only hands us its own."""
    if not isinstance(obj, Mapping):
        return False
    return bool(obj.get("kind", kind) == kind and obj.get("apiVersion", tc.API_VERSION) == tc.API_VERSION)


def _runtime_ref_name(obj: Any, kind: str) -> list[str]:
    if not _is_kind(obj, tc.TrainJobKind):
        return []
    ref = (obj.get("spec") or {}).get("runtimeRef") or {}
    if ref.get("apiGroup") == tc.GROUP and ref.get("kind") == kind and isinstance(ref.get("name"), str):
        return [ref["name"]]
    return []


def index_trainjob_training_runtime(obj: Any) -> list[str]:
    """``[runtimeRef.name]`` of a TrainJob that references a TrainingRuntime, else none."""
    return _runtime_ref_name(obj, tc.TrainingRuntimeKind)


def index_trainjob_cluster_training_runtime(obj: Any) -> list[str]:
    """``[runtimeRef.name]`` of a TrainJob that references a ClusterTrainingRuntime, else none."""
    return _runtime_ref_name(obj, tc.ClusterTrainingRuntimeKind)


def _runtime_classes(obj: Any, kind: str) -> list[str]:
    if not _is_kind(obj, kind):
        return []
    template = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    names: list[str] = []
    for rjob in template.get("replicatedJobs") or ():
        pod = ((((rjob or {}).get("template") or {}).get("spec") or {}).get("template") or {}).get(
            "spec"
        ) or {}
        name = pod.get("runtimeClassName")
        if isinstance(name, str):
            names.append(name)
    return names


def index_training_runtime_runtime_class(obj: Any) -> list[str]:
    """Every ``runtimeClassName`` of a TrainingRuntime's pod templates, in order, duplicates kept."""
    return _runtime_classes(obj, tc.TrainingRuntimeKind)


def index_cluster_training_runtime_runtime_class(obj: Any) -> list[str]:
    """Every ``runtimeClassName`` of a ClusterTrainingRuntime's pod templates."""
    return _runtime_classes(obj, tc.ClusterTrainingRuntimeKind)
