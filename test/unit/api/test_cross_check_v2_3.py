"""Cross-check the v2.3 models against ``kubeflow-trainer-api`` 2.3.0, upstream's Python models.

What ``kubeflow`` 0.5.0's ``TrainerClient`` builds its TrainJobs with. The test extra pins 2.1.0
(``test_cross_check.py``), so 2.3.0 never enters ``.venv``: its wheel (pure Python, needs only
pydantic) is fetched once with ``pip download`` into the cache and imported from the wheel file
in a child interpreter, where it shadows the installed 2.1.0. The child reports the JSON field
tree of each upstream kind and what upstream's models serialize for sample objects; this side
checks that every such field exists in our generated CRDs and typed models, and that the objects
load into our models and dump back unchanged.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from trainer.api import crdgen
from trainer.api.base import KindModel, Model
from trainer.api.v2_3 import kinds as v2_3
from trainer.api.v2_3.jobset_v1alpha2 import JobSet
from trainer.api.v2_3.trainer_v1alpha1 import ClusterTrainingRuntime, TrainingRuntime, TrainJob

VERSION = "2.3.0"
WHEEL = f"kubeflow_trainer_api-{VERSION}-py3-none-any.whl"
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
PAIRS: dict[str, type[KindModel]] = {
    "TrainerV1alpha1TrainJob": TrainJob,
    "TrainerV1alpha1TrainingRuntime": TrainingRuntime,
    "TrainerV1alpha1ClusterTrainingRuntime": ClusterTrainingRuntime,
    "JobsetV1alpha2JobSet": JobSet,
}


def wheel() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainer-py" / "pypi"
    path = base / WHEEL
    if not path.exists():
        base.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                f"kubeflow-trainer-api=={VERSION}",
                "--no-deps",
                "-d",
                str(base),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        if proc.returncode != 0 or not path.exists():
            pytest.fail(f"pip download kubeflow-trainer-api=={VERSION} failed:\n{proc.stdout}{proc.stderr}")
    return path


CHILD = textwrap.dedent(
    """
    import datetime, json, sys, types, typing
    from typing import Union, get_args, get_origin

    from pydantic import BaseModel

    import kubeflow_trainer_api
    import kubeflow_trainer_api.models as m

    assert kubeflow_trainer_api.__file__.startswith(sys.argv[1]), kubeflow_trainer_api.__file__
    SCALARS = {"IoK8sApimachineryPkgApiResourceQuantity", "IoK8sApimachineryPkgUtilIntstrIntOrString"}

    def models_in(tp):
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return [] if tp.__name__ in SCALARS else [tp]
        if get_origin(tp) in (Union, types.UnionType, list, dict, typing.Annotated):
            return [x for arg in get_args(tp) for x in models_in(arg)]
        return []

    def tree(cls, seen):
        if cls.__name__ == "IoK8sApimachineryPkgApisMetaV1ObjectMeta" or cls in seen:
            return {}
        out = {}
        for name, info in cls.model_fields.items():
            subs = models_in(info.annotation)
            out[info.alias or name] = tree(subs[0], seen | {cls}) if subs else None
        return out

    def rfc3339(value):
        if isinstance(value, datetime.datetime):
            return value.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        raise TypeError(type(value))

    request = json.load(sys.stdin)
    trees = {name: tree(getattr(m, name), frozenset()) for name in request["kinds"]}
    sent = [json.loads(json.dumps(getattr(m, cls).from_dict(obj).to_dict(), default=rfc3339))
            for cls, obj in request["objects"]]
    print(json.dumps({"trees": trees, "sent": sent}))
    """
)

TIME = "2026-01-02T03:04:05Z"
JOBSET_SPEC: dict[str, Any] = {
    "replicatedJobs": [
        {
            "name": "node",
            "groupName": "default",
            "replicas": 1,
            "dependsOn": [{"name": "model-initializer", "status": "Complete"}],
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "node",
                                    "image": "pytorch/pytorch",
                                    "volumeMounts": [{"name": "cache", "mountPath": "/cache"}],
                                }
                            ]
                        }
                    }
                },
            },
        }
    ],
    "failurePolicy": {
        "maxRestarts": 3,
        "restartStrategy": "InPlaceRestart",
        "rules": [{"name": "r0", "action": "RestartJob", "onJobFailureReasons": ["PodFailurePolicy"]}],
    },
    "volumeClaimPolicies": [
        {
            "templates": [
                {
                    "metadata": {"name": "cache"},
                    "spec": {
                        "accessModes": ["ReadWriteMany"],
                        "resources": {"requests": {"storage": "10Gi"}},
                    },
                }
            ],
            "retentionPolicy": {"whenDeleted": "Retain"},
        }
    ],
    "suspend": False,
    "ttlSecondsAfterFinished": 60,
}
TRAIN_JOB: dict[str, Any] = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "llm", "namespace": "team"},
    "spec": {
        "runtimeRef": {
            "name": "torch-distributed",
            "kind": "ClusterTrainingRuntime",
            "apiGroup": "trainer.kubeflow.org",
        },
        "initializer": {
            "dataset": {"storageUri": "hf://tatsu-lab/alpaca", "env": [{"name": "T", "value": "x"}]}
        },
        "trainer": {
            "image": "pytorch/pytorch:2.7.0",
            "command": ["torchrun", "train.py"],
            "numNodes": 2,
            "numProcPerNode": 4,
            "resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}},
        },
        "runtimePatches": [
            {
                "manager": "trainer.kubeflow.org/kubeflow-sdk",
                "time": TIME,
                "trainingRuntimeSpec": {
                    "template": {
                        "metadata": {"labels": {"team": "ml"}},
                        "spec": {
                            "replicatedJobs": [
                                {
                                    "name": "node",
                                    "template": {
                                        "metadata": {"annotations": {"a": "b"}},
                                        "spec": {
                                            "template": {
                                                "metadata": {"labels": {"x": "y"}},
                                                "spec": {
                                                    "serviceAccountName": "sa",
                                                    "nodeSelector": {"pool": "gpu"},
                                                    "tolerations": [{"key": "gpu", "operator": "Exists"}],
                                                    "volumes": [
                                                        {
                                                            "name": "d",
                                                            "persistentVolumeClaim": {"claimName": "d"},
                                                        }
                                                    ],
                                                    "containers": [
                                                        {
                                                            "name": "node",
                                                            "env": [{"name": "A", "value": "1"}],
                                                            "volumeMounts": [
                                                                {"name": "d", "mountPath": "/d"}
                                                            ],
                                                            "securityContext": {"runAsNonRoot": True},
                                                        }
                                                    ],
                                                    "initContainers": [{"name": "init"}],
                                                    "imagePullSecrets": [{"name": "registry"}],
                                                    "schedulingGates": [{"name": "gate"}],
                                                    "securityContext": {"fsGroup": 1000},
                                                    "terminationGracePeriodSeconds": 30,
                                                },
                                            }
                                        },
                                    },
                                }
                            ]
                        },
                    }
                },
            }
        ],
        "activeDeadlineSeconds": 3600,
        "suspend": True,
        "managedBy": "trainer.kubeflow.org/trainjob-controller",
    },
    "status": {
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "DeadlineExceeded",
                "message": "TrainJob exceeded its active deadline",
                "lastTransitionTime": TIME,
            }
        ],
        "jobsStatus": [
            {"name": "node", "ready": 0, "succeeded": 0, "failed": 1, "active": 0, "suspended": 0}
        ],
        "trainerStatus": {
            "progressPercentage": 40,
            "estimatedRemainingSeconds": 600,
            "metrics": [{"name": "loss", "value": "0.5"}],
            "lastUpdatedTime": TIME,
        },
    },
}
OBJECTS: list[tuple[str, dict[str, Any]]] = [
    ("TrainerV1alpha1TrainJob", TRAIN_JOB),
    (
        "TrainerV1alpha1TrainingRuntime",
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainingRuntime",
            "metadata": {"name": "torch"},
            "spec": {
                "mlPolicy": {
                    "numNodes": 2,
                    "torch": {
                        "envInjection": {"targets": [{"jobName": "node", "containerNames": ["sidecar"]}]}
                    },
                },
                "podGroupPolicy": {"coscheduling": {"scheduleTimeoutSeconds": 100}},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": JOBSET_SPEC},
            },
        },
    ),
    (
        "TrainerV1alpha1ClusterTrainingRuntime",
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "ClusterTrainingRuntime",
            "metadata": {"name": "flux"},
            "spec": {
                "mlPolicy": {"numNodes": 1, "flux": {"numProcPerNode": 2}},
                "template": {"spec": JOBSET_SPEC},
            },
        },
    ),
    (
        "JobsetV1alpha2JobSet",
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "js"},
            "spec": JOBSET_SPEC,
            "status": {
                "restarts": 1,
                "replicatedJobsStatus": [
                    {
                        "name": "node",
                        "ready": 1,
                        "succeeded": 0,
                        "failed": 0,
                        "active": 1,
                        "suspended": 0,
                        "jobRestarts": [2],
                        "jobRestartsCountTowardsMax": [1],
                    }
                ],
                "previousInPlaceRestartAttempt": 0,
                "currentInPlaceRestartAttempt": 1,
            },
        },
    ),
]


@functools.cache
def upstream() -> dict[str, Any]:
    path = wheel()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)],
        input=json.dumps({"kinds": list(PAIRS), "objects": OBJECTS}),
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(path)},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def _step(schema: dict[str, Any]) -> dict[str, Any]:
    while schema.get("type") in ("array", "object") and "properties" not in schema:
        if "items" in schema:
            schema = schema["items"]
        elif isinstance(schema.get("additionalProperties"), dict):
            schema = schema["additionalProperties"]
        else:
            break
    return schema


def missing_in_schema(tree: dict[str, Any], schema: dict[str, Any], path: str) -> list[str]:
    known = schema.get("properties", {})
    missing = []
    for name, sub in tree.items():
        if name not in known:
            missing.append(f"{path}.{name}")
        elif sub:
            missing.extend(missing_in_schema(sub, _step(known[name]), f"{path}.{name}"))
    return missing


def missing_in_models(tree: dict[str, Any], model: type[BaseModel], path: str) -> list[str]:
    """The same walk against our typed models, down to where they pass core types through."""
    by_json = {(info.alias or name): info for name, info in model.model_fields.items()}
    missing = []
    for name, sub in tree.items():
        if name in ("apiVersion", "kind") and issubclass(model, KindModel):
            continue
        if name not in by_json:
            missing.append(f"{path}.{name}")
            continue
        ours = [m for m in _models_in(by_json[name].annotation) if issubclass(m, Model)]
        if sub and ours and ours[0].__name__ != "ObjectMeta":
            missing.extend(missing_in_models(sub, ours[0], f"{path}.{name}"))
    return missing


def _models_in(tp: Any) -> list[type[BaseModel]]:
    import typing

    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for arg in typing.get_args(tp) for m in _models_in(arg)]


@pytest.mark.parametrize("theirs", list(PAIRS))
def test_every_upstream_field_exists_with_the_same_json_name(theirs: str) -> None:
    ours = PAIRS[theirs]
    tree = upstream()["trees"][theirs]
    schema = yaml.load(crdgen.render(ours, v2_3.OPENAPI_SNAPSHOT), Loader=LOADER)
    root = schema["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert missing_in_models(tree, ours, ours.kind) == []
    assert missing_in_schema(tree, root, ours.kind) == []


def test_the_walk_notices_a_missing_field() -> None:
    tree = {"spec": {"runtimePatches": {"manager": None}, "podTemplateOverrides": {"targetJobs": None}}}
    assert missing_in_models(tree, TrainJob, "TrainJob") == ["TrainJob.spec.podTemplateOverrides"]


@pytest.mark.parametrize(("index", "theirs"), list(enumerate(name for name, _ in OBJECTS)))
def test_upstream_serialized_objects_load_and_round_trip(index: int, theirs: str) -> None:
    obj = OBJECTS[index][1]
    sent = upstream()["sent"][index]
    assert sent == obj  # upstream's models kept every field: the comparison below means something
    loaded = PAIRS[theirs].from_dict(sent)
    assert loaded.to_dict() == sent
