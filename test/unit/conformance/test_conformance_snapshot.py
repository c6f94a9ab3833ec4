"""The conformance runner compares Trainer v2.3.0's runtime snapshot ConfigMaps by the document
in their ``runtime`` key: YAML layout and quoting, and the runtime's volatile metadata, are not
behaviour (trainer/conformance/normalize.py)."""

from __future__ import annotations

from typing import Any

from trainer.conformance.normalize import Normaliser


def snapshot(runtime_yaml: str, name: str = "job-runtime-snapshot") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "c-ns", "uid": "u", "resourceVersion": "1"},
        "data": {"runtime": runtime_yaml},
    }


GO = """apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  creationTimestamp: "2026-01-02T03:04:05Z"
  generation: 1
  managedFields:
  - apiVersion: trainer.kubeflow.org/v1alpha1
    manager: kubectl
  name: torch-distributed
  resourceVersion: "42"
  uid: 0b5f3a8e-1111-2222-3333-444455556666
spec:
  mlPolicy:
    numNodes: 1
"""
OURS = """apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  creationTimestamp: '2026-05-06T07:08:09Z'
  generation: 1
  name: torch-distributed
  resourceVersion: '7'
  uid: 9d9d9d9d-aaaa-bbbb-cccc-ddddeeeeffff
spec:
  mlPolicy: {numNodes: 1}
"""


def test_snapshots_of_the_same_runtime_compare_equal_whatever_the_layout() -> None:
    go = Normaliser("c-ns").objects("ConfigMap", [snapshot(GO)])
    ours = Normaliser("c-ns").objects("ConfigMap", [snapshot(OURS)])
    assert go == ours
    assert go["ConfigMap/job-runtime-snapshot"]["data"]["runtime"] == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"generation": 1, "name": "torch-distributed"},
        "spec": {"mlPolicy": {"numNodes": 1}},
    }


def test_a_different_runtime_still_differs() -> None:
    other = OURS.replace("numNodes: 1", "numNodes: 2")
    go = Normaliser("c-ns").objects("ConfigMap", [snapshot(GO)])
    ours = Normaliser("c-ns").objects("ConfigMap", [snapshot(other)])
    assert go != ours


def test_other_configmaps_and_unparsable_snapshots_are_compared_as_text() -> None:
    plain = Normaliser("c-ns").objects("ConfigMap", [snapshot(GO, name="job-mpi-hostfile")])
    assert plain["ConfigMap/job-mpi-hostfile"]["data"]["runtime"].startswith("apiVersion:")
    bad = Normaliser("c-ns").objects("ConfigMap", [snapshot("a: [", name="x-runtime-snapshot")])
    assert bad["ConfigMap/x-runtime-snapshot"]["data"]["runtime"] == "a: ["
