"""Cross-check against ``kubeflow-trainer-api`` 2.1.0, the upstream Python models of this API.

Independently generated (OpenAPI Generator from upstream's Go types), so agreement means our
JSON names and nesting are right: every field it knows exists in our models or, for embedded
core types, in the schema we derive from Kubernetes; and what it serializes loads into our
models and dumps back unchanged.
"""

from __future__ import annotations

import datetime
import functools
import json
import types
import typing
from typing import Any, Union, get_args, get_origin

import kubeflow_trainer_api.models as upstream
import pytest
import yaml
from pydantic import BaseModel

from trainer.api import crdgen
from trainer.api.base import KindModel, Model
from trainer.api.jobset_v1alpha2 import JobSet
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainingRuntime, TrainJob

PAIRS: list[tuple[type[BaseModel], type[KindModel]]] = [
    (upstream.TrainerV1alpha1TrainJob, TrainJob),
    (upstream.TrainerV1alpha1TrainingRuntime, TrainingRuntime),
    (upstream.TrainerV1alpha1ClusterTrainingRuntime, ClusterTrainingRuntime),
    (upstream.JobsetV1alpha2JobSet, JobSet),
]


# Upstream's generator wraps these scalars in "oneOf" model classes; on the wire they are scalars.
SCALAR_WRAPPERS = {"IoK8sApimachineryPkgApiResourceQuantity", "IoK8sApimachineryPkgUtilIntstrIntOrString"}


def _models_in(tp: Any) -> list[type[BaseModel]]:
    """Model classes inside Optional/List/Dict/Annotated of an upstream annotation."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [] if tp.__name__ in SCALAR_WRAPPERS else [tp]
    origin = get_origin(tp)
    if origin in (Union, types.UnionType, list, dict, typing.Annotated):
        return [m for arg in get_args(tp) for m in _models_in(arg)]
    return []


def _step(schema: dict[str, Any]) -> dict[str, Any]:
    """From a property schema to the object schema its values use."""
    while schema.get("type") in ("array", "object") and "properties" not in schema:
        if "items" in schema:
            schema = schema["items"]
        elif isinstance(schema.get("additionalProperties"), dict):
            schema = schema["additionalProperties"]
        else:
            break
    return schema


def missing_fields(theirs: type[BaseModel], schema: dict[str, Any], path: str) -> list[str]:
    """Fields upstream's model knows that our generated schema lacks, by JSON path."""
    if theirs.__name__ == "IoK8sApimachineryPkgApisMetaV1ObjectMeta":
        return []  # CRDs keep only part of ObjectMeta (and none at the root), exactly like upstream's
    known = schema.get("properties", {})
    missing: list[str] = []
    for name, info in theirs.model_fields.items():
        json_name = info.alias or name
        if json_name not in known:
            missing.append(f"{path}.{json_name}")
            continue
        for sub in _models_in(info.annotation):
            missing.extend(missing_fields(sub, _step(known[json_name]), f"{path}.{json_name}"))
    return missing


@functools.cache
def generated_schema(kind: type[KindModel]) -> dict[str, Any]:
    text = crdgen.render(kind)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return dict(yaml.load(text, Loader=loader)["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def typed_missing(theirs: type[BaseModel], ours: type[BaseModel], path: str) -> list[str]:
    """The same walk against our typed models, down to where ours passes core types through."""
    if theirs.__name__ == "IoK8sApimachineryPkgApisMetaV1ObjectMeta":
        return []
    by_json = {(info.alias or name): info for name, info in ours.model_fields.items()}
    missing: list[str] = []
    for name, info in theirs.model_fields.items():
        json_name = info.alias or name
        if json_name in ("apiVersion", "kind") and issubclass(ours, KindModel):
            continue  # class attributes on our side, always serialized
        if json_name not in by_json:
            missing.append(f"{path}.{json_name}")
            continue
        ours_sub = [m for m in _models_in_ours(by_json[json_name]) if issubclass(m, Model)]
        for sub in _models_in(info.annotation):
            if ours_sub:
                missing.extend(typed_missing(sub, ours_sub[0], f"{path}.{json_name}"))
    return missing


def _models_in_ours(info: Any) -> list[type[BaseModel]]:
    return _models_in(info.annotation)


@pytest.mark.parametrize(("theirs", "ours"), PAIRS, ids=lambda p: getattr(p, "__name__", ""))
def test_every_upstream_field_exists_with_the_same_json_name(
    theirs: type[BaseModel], ours: type[KindModel]
) -> None:
    assert typed_missing(theirs, ours, ours.kind) == []
    assert missing_fields(theirs, generated_schema(ours), ours.kind) == []


def test_the_walk_notices_a_missing_field() -> None:
    class Probe(BaseModel):
        spec: upstream.TrainerV1alpha1TrainJobSpec | None = None

    schema = {"properties": {"spec": {"type": "object", "properties": {"runtimeRef": {"properties": {}}}}}}
    missing = missing_fields(Probe, schema, "X")
    assert "X.spec.managedBy" in missing and "X.spec.runtimeRef.name" in missing


TRAIN_JOB = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "llm", "namespace": "team", "labels": {"a": "b"}},
    "spec": {
        "runtimeRef": {
            "name": "torch-distributed",
            "kind": "ClusterTrainingRuntime",
            "apiGroup": "trainer.kubeflow.org",
        },
        "initializer": {
            "dataset": {"storageUri": "hf://tatsu-lab/alpaca", "env": [{"name": "TOKEN", "value": "x"}]},
            "model": {"storageUri": "hf://meta-llama/Llama-3.2-1B", "secretRef": {"name": "hf"}},
        },
        "trainer": {
            "image": "pytorch/pytorch:2.5.0",
            "command": ["torchrun", "train.py"],
            "args": ["--epochs", "3"],
            "numNodes": 2,
            "numProcPerNode": "auto",
            "resourcesPerNode": {
                "limits": {"nvidia.com/gpu": "4"},
                "requests": {"cpu": "8", "memory": "64Gi"},
            },
            "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
        },
        "labels": {"team": "ml"},
        "annotations": {"note": "x"},
        "suspend": True,
        "managedBy": "trainer.kubeflow.org/trainjob-controller",
        "podTemplateOverrides": [
            {
                "targetJobs": [{"name": "node"}],
                "metadata": {"labels": {"x": "y"}},
                "spec": {
                    "serviceAccountName": "sa",
                    "nodeSelector": {"pool": "gpu"},
                    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
                    "containers": [
                        {
                            "name": "node",
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                            "env": [{"name": "A", "value": "1"}],
                        }
                    ],
                    "initContainers": [{"name": "init"}],
                    "schedulingGates": [{"name": "gate"}],
                    "imagePullSecrets": [{"name": "registry"}],
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                                ]
                            }
                        }
                    },
                },
            }
        ],
    },
    "status": {
        "conditions": [
            {
                "type": "Complete",
                "status": "True",
                "reason": "AllJobsCompleted",
                "message": "jobset completed successfully",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
            }
        ],
        "jobsStatus": [
            {"name": "node", "ready": 0, "succeeded": 2, "failed": 0, "active": 0, "suspended": 0}
        ],
    },
}

JOBSET_SPEC = {
    "replicatedJobs": [
        {
            "name": "node",
            "groupName": "default",
            "replicas": 1,
            "dependsOn": [{"name": "model-initializer", "status": "Complete"}],
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                "spec": {
                    "parallelism": 2,
                    "completionMode": "Indexed",
                    "template": {
                        "spec": {
                            "restartPolicy": "OnFailure",
                            "containers": [
                                {
                                    "name": "node",
                                    "image": "pytorch/pytorch",
                                    "ports": [{"containerPort": 29500, "protocol": "TCP"}],
                                    "resources": {"requests": {"cpu": "500m"}},
                                }
                            ],
                        }
                    },
                },
            },
        }
    ],
    "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True, "subdomain": "s"},
    "successPolicy": {"operator": "All", "targetReplicatedJobs": ["node"]},
    "failurePolicy": {
        "maxRestarts": 3,
        "restartStrategy": "Recreate",
        "rules": [{"name": "r0", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}],
    },
    "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
    "coordinator": {"replicatedJob": "node", "jobIndex": 0, "podIndex": 0},
    "suspend": False,
    "ttlSecondsAfterFinished": 60,
}

RUNTIME_SPEC = {
    "mlPolicy": {"numNodes": 2, "torch": {"numProcPerNode": 4}},
    "podGroupPolicy": {"coscheduling": {"scheduleTimeoutSeconds": 100}},
    "template": {"metadata": {"labels": {"a": "b"}}, "spec": JOBSET_SPEC},
}

OBJECTS = [
    (upstream.TrainerV1alpha1TrainJob, TrainJob, TRAIN_JOB),
    (
        upstream.TrainerV1alpha1TrainingRuntime,
        TrainingRuntime,
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainingRuntime",
            "metadata": {"name": "t"},
            "spec": RUNTIME_SPEC,
        },
    ),
    (
        upstream.TrainerV1alpha1ClusterTrainingRuntime,
        ClusterTrainingRuntime,
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "ClusterTrainingRuntime",
            "metadata": {"name": "mpi"},
            "spec": {
                "mlPolicy": {
                    "numNodes": 1,
                    "mpi": {
                        "numProcPerNode": 2,
                        "mpiImplementation": "OpenMPI",
                        "sshAuthMountPath": "/root/.ssh",
                        "runLauncherAsNode": True,
                    },
                },
                "podGroupPolicy": {"volcano": {"networkTopology": {"mode": "soft", "highestTierAllowed": 2}}},
                "template": {"spec": JOBSET_SPEC},
            },
        },
    ),
    (
        upstream.JobsetV1alpha2JobSet,
        JobSet,
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "js"},
            "spec": JOBSET_SPEC,
            "status": {
                "restarts": 1,
                "terminalState": "Completed",
                "replicatedJobsStatus": [
                    {"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}
                ],
            },
        },
    ),
]


def _rfc3339(value: Any) -> str:
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    raise TypeError(type(value))


def serialize(model: Any) -> dict[str, Any]:
    """What upstream's SDK sends: ``to_dict()``, times as RFC 3339 (as the Kubernetes client does)."""
    return dict(json.loads(json.dumps(model.to_dict(), default=_rfc3339)))


@pytest.mark.parametrize(("theirs", "ours", "obj"), OBJECTS, ids=[o[1].kind for o in OBJECTS])
def test_upstream_serialized_objects_load_and_round_trip(
    theirs: Any, ours: type[KindModel], obj: dict[str, Any]
) -> None:
    built = theirs.from_dict(json.loads(json.dumps(obj)))
    sent = serialize(built)
    assert sent == obj  # upstream's model kept every field: the comparison below is meaningful
    loaded = ours.from_dict(sent)
    assert loaded.to_dict() == sent
    # And the other way: what we dump, upstream's models read back to the same object.
    assert serialize(theirs.from_dict(loaded.to_dict())) == sent
