"""Upstream's integration-test wrappers (docs/behaviour/trainer.md §10 preamble) as plain dicts."""

from __future__ import annotations

import copy
from typing import Any

Json = dict[str, Any]

API = "trainer.kubeflow.org/v1alpha1"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
RES4 = {"requests": {"cpu": "1", "memory": "4Gi"}}
INITIALIZER_VOLUME = {"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer"}}
MOUNTS = {
    "dataset-initializer": [{"name": "initializer", "mountPath": "/workspace/dataset"}],
    "model-initializer": [{"name": "initializer", "mountPath": "/workspace/model"}],
    "node": [
        {"name": "initializer", "mountPath": "/workspace/dataset"},
        {"name": "initializer", "mountPath": "/workspace/model"},
    ],
}
ANCESTORS = {
    "dataset-initializer": "dataset-initializer",
    "model-initializer": "model-initializer",
    "node": "trainer",
}


def rjob(name: str, *, labels: bool = True, container: Json | None = None) -> Json:
    """One wrapper replicated job: its container (named like the job) mounts ``initializer``."""
    pod_meta: Json = {}
    job: Json = {
        "name": name,
        "template": {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [{"name": name, **(container or {}), "volumeMounts": MOUNTS[name]}],
                        "volumes": [dict(INITIALIZER_VOLUME)],
                    }
                }
            }
        },
    }
    if labels:
        pod_meta = {"labels": {ANCESTOR: ANCESTORS[name]}}
        job["template"] = {"metadata": pod_meta, **job["template"]}
    return job


def wrapper_rjobs(*, labels: bool = True, container: Json | None = None) -> list[Json]:
    return [
        rjob(n, labels=labels, container=container)
        for n in ("dataset-initializer", "model-initializer", "node")
    ]


def runtime(
    name: str,
    namespace: str | None,
    *,
    rjobs: list[Json] | None = None,
    ml_policy: Json | None = None,
    pod_group_policy: Json | None = None,
    labels: dict[str, str] | None = None,
) -> Json:
    """A TrainingRuntime, or a ClusterTrainingRuntime when ``namespace`` is None."""
    meta: Json = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = labels
    spec: Json = {"template": {"spec": {"replicatedJobs": copy.deepcopy(rjobs or wrapper_rjobs())}}}
    if ml_policy is not None:
        spec["mlPolicy"] = ml_policy
    if pod_group_policy is not None:
        spec["podGroupPolicy"] = pod_group_policy
    kind = "TrainingRuntime" if namespace is not None else "ClusterTrainingRuntime"
    return {"apiVersion": API, "kind": kind, "metadata": meta, "spec": spec}


def trainjob(
    name: str, namespace: str, runtime_name: str, *, kind: str = "TrainingRuntime", **spec: Any
) -> Json:
    return {
        "apiVersion": API,
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runtimeRef": {"name": runtime_name, "apiGroup": "trainer.kubeflow.org", "kind": kind},
            **spec,
        },
    }


def containers_of(jobset: Json, rjob_name: str) -> list[Json]:
    for job in jobset["spec"]["replicatedJobs"]:
        if job["name"] == rjob_name:
            containers: list[Json] = job["template"]["spec"]["template"]["spec"]["containers"]
            return containers
    raise AssertionError(f"no replicated job {rjob_name}")


def rjob_of(jobset: Json, rjob_name: str) -> Json:
    for job in jobset["spec"]["replicatedJobs"]:
        if job["name"] == rjob_name:
            return dict(job)
    raise AssertionError(f"no replicated job {rjob_name}")
