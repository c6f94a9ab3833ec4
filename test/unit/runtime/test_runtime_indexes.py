"""Field indexes and runtime-ref helpers (docs/behaviour/trainer.md §10 H and J, §2.2)."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_fixtures import rjob, training_runtime, trainjob

from trainer.api.trainer_v1alpha1 import RuntimeRef
from trainer.runtime import indexes
from trainer.runtime.objects import is_cluster_training_runtime, is_training_runtime
from trainer.runtime.registry import runtime_key

Json = dict[str, Any]


def ref(group: str | None, kind: str | None) -> Json:
    tj = trainjob(runtime="runtime")
    out: Json = {"name": "runtime"}
    if group is not None:
        out["apiGroup"] = group
    if kind is not None:
        out["kind"] = kind
    tj["spec"]["runtimeRef"] = out
    return tj


def test_index_names_are_upstream_strings() -> None:
    assert indexes.TRAINJOB_RUNTIME_REF_KEY == ".spec.runtimeRef.kind=trainingRuntime"
    assert indexes.TRAINJOB_CLUSTER_RUNTIME_REF_KEY == ".spec.runtimeRef.kind=clusterTrainingRuntime"
    assert indexes.TRAINING_RUNTIME_RUNTIME_CLASS_KEY == (
        ".trainingRuntimeSpec.jobSetTemplateSpec.replicatedJobs.podTemplateSpec.runtimeClassName"
    )
    assert indexes.CLUSTER_TRAINING_RUNTIME_RUNTIME_CLASS_KEY == (
        ".clusterTrainingRuntimeSpec.jobSetTemplateSpec.replicatedJobs.podTemplateSpec.runtimeClassName"
    )


@pytest.mark.parametrize(
    ("index", "kind"),
    [
        (indexes.index_trainjob_training_runtime, "TrainingRuntime"),  # spec: trainer H1 H2 H3 H4 H5 H6 H7
        (
            indexes.index_trainjob_cluster_training_runtime,
            "ClusterTrainingRuntime",
        ),  # spec: trainer H8 H9 H10 H11 H12 H13 H14
    ],
)
def test_h1_to_h14_trainjob_runtime_ref_indexes(index: Any, kind: str) -> None:
    assert index(training_runtime()) == []
    assert index(ref("trainer.kubeflow.org", kind)) == ["runtime"]
    assert index(ref("trainer.kubeflow", kind)) == []
    assert index(ref("trainer.kubeflow.org", "TrainingRun")) == []
    assert index(ref(None, kind)) == []
    assert index(ref("trainer.kubeflow.org", None)) == []
    assert index(ref(None, None)) == []


def runtime_with_classes(classes: list[str | None] | None, cluster: bool) -> Json:
    rjobs = []
    for i, name in enumerate(classes or []):
        rjobs.append(rjob(f"job{i}", None, [], pod_extra={"runtimeClassName": name} if name else None))
    return training_runtime(rjobs=rjobs, cluster=cluster)


@pytest.mark.parametrize(
    ("index", "cluster"),
    [
        (indexes.index_training_runtime_runtime_class, False),  # spec: trainer H15 H16 H17 H18 H19 H20
        (indexes.index_cluster_training_runtime_runtime_class, True),  # spec: trainer H21 H22 H23 H24 H25 H26
    ],
)
def test_h15_to_h26_runtime_class_indexes(index: Any, cluster: bool) -> None:
    assert index(trainjob()) == []
    assert index(runtime_with_classes(None, cluster)) == []
    assert index(runtime_with_classes([None, None], cluster)) == []
    assert index(runtime_with_classes(["containerd", "containerd"], cluster)) == ["containerd", "containerd"]
    assert index(runtime_with_classes(["containerd"], cluster)) == ["containerd"]
    assert index(runtime_with_classes(["containerd", None], cluster)) == ["containerd"]
    assert index(runtime_with_classes(["containerd"], not cluster)) == []


def test_j1_to_j4_runtime_ref_kinds() -> None:
    # spec: trainer J1 J2 J3 J4
    tr = RuntimeRef(name="x", api_group="trainer.kubeflow.org", kind="TrainingRuntime")
    ctr = RuntimeRef(name="x", api_group="trainer.kubeflow.org", kind="ClusterTrainingRuntime")
    assert is_training_runtime(tr) and not is_training_runtime(ctr)
    assert is_cluster_training_runtime(ctr) and not is_cluster_training_runtime(tr)


def test_runtime_key() -> None:
    assert (
        runtime_key("trainer.kubeflow.org", "ClusterTrainingRuntime")
        == "ClusterTrainingRuntime.trainer.kubeflow.org"
    )
    assert runtime_key(None, "Foo") == "Foo"
    assert runtime_key("example.com", "Foo") == "Foo.example.com"
