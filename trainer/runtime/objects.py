"""Small facts about TrainJobs shared by plugins: owner references, runtime-ref kinds, GVKs.

Why here: every generated object carries the same controller owner reference, and the
runtime-ref tests (docs/behaviour/trainer.md §10, J1-J4) pin the two predicates.
"""

from __future__ import annotations

from typing import Any

from manager.scheme import GroupVersionKind
from trainer.api import jobset_constants as jc
from trainer.api import scheduling_constants as sc
from trainer.api import trainer_constants as tc
from trainer.api.trainer_v1alpha1 import RuntimeRef, TrainJob

Json = dict[str, Any]

__all__ = [
    "CLUSTER_TRAINING_RUNTIME_GVK",
    "CONFIGMAP_GVK",
    "JOBSET_GVK",
    "LIMITRANGE_GVK",
    "PODGROUP_GVK",
    "PRIORITYCLASS_GVK",
    "RUNTIMECLASS_GVK",
    "SECRET_GVK",
    "TRAINING_RUNTIME_GVK",
    "TRAINJOB_GVK",
    "VOLCANO_PODGROUP_GVK",
    "is_cluster_training_runtime",
    "is_training_runtime",
    "name_of",
    "namespace_of",
    "owner_reference",
]

TRAINJOB_GVK = GroupVersionKind(tc.GROUP, tc.VERSION, tc.TrainJobKind)
TRAINING_RUNTIME_GVK = GroupVersionKind(tc.GROUP, tc.VERSION, tc.TrainingRuntimeKind)
CLUSTER_TRAINING_RUNTIME_GVK = GroupVersionKind(tc.GROUP, tc.VERSION, tc.ClusterTrainingRuntimeKind)
JOBSET_GVK = GroupVersionKind(jc.GROUP, jc.VERSION, jc.KIND)
PODGROUP_GVK = GroupVersionKind(sc.GROUP, sc.VERSION, sc.PodGroupKind)
VOLCANO_PODGROUP_GVK = GroupVersionKind("scheduling.volcano.sh", "v1beta1", "PodGroup")
CONFIGMAP_GVK = GroupVersionKind("", "v1", "ConfigMap")
SECRET_GVK = GroupVersionKind("", "v1", "Secret")
LIMITRANGE_GVK = GroupVersionKind("", "v1", "LimitRange")
RUNTIMECLASS_GVK = GroupVersionKind("node.k8s.io", "v1", "RuntimeClass")
PRIORITYCLASS_GVK = GroupVersionKind("scheduling.k8s.io", "v1", "PriorityClass")


def name_of(trainjob: TrainJob) -> str:
    return (trainjob.metadata.name if trainjob.metadata else None) or ""


def namespace_of(trainjob: TrainJob) -> str:
    return (trainjob.metadata.namespace if trainjob.metadata else None) or ""


def owner_reference(trainjob: TrainJob) -> Json:
    """The controller owner reference every object generated for ``trainjob`` carries."""
    return {
        "apiVersion": tc.API_VERSION,
        "kind": tc.TrainJobKind,
        "name": name_of(trainjob),
        "uid": (trainjob.metadata.uid if trainjob.metadata else None) or "",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def is_training_runtime(ref: RuntimeRef) -> bool:
    """The ref names a namespaced TrainingRuntime of our group."""
    return ref.api_group == tc.GROUP and ref.kind == tc.TrainingRuntimeKind


def is_cluster_training_runtime(ref: RuntimeRef) -> bool:
    """The ref names a ClusterTrainingRuntime of our group."""
    return ref.api_group == tc.GROUP and ref.kind == tc.ClusterTrainingRuntimeKind
