"""Hypothesis strategies for admission fuzzing: AdmissionReviews for every webhook path of an API level.

Objects start from valid objects of the level (``FuzzLevel.bases``: TrainJobs, TrainingRuntimes,
ClusterTrainingRuntimes, JobSets and Pods) and are then left valid, made near-valid (a value of
the right type but out of range or badly named, a key dropped, an unknown key added) or hostile
(any JSON at any depth in place of a value: wrong types, nulls, huge strings, deep nesting,
unicode and NUL bytes). UPDATEs carry an old object built the same way; a share of reviews have
a hostile envelope too.

Two levels (docs/levels.md), each a ``FuzzLevel`` in ``LEVELS``:

* ``v2.1``: Trainer v2.1.0's TrainJob (``podTemplateOverrides``, ``spec.labels``,
  ``numProcPerNode: auto``) on the shipped ``torch-distributed`` of ``config/runtimes``, JobSet
  v0.10.1's JobSet; the seven paths of controller-runtime v0.22's managers.
* ``v2.3``: Trainer v2.3.0's TrainJob (``runtimePatches`` of several managers with JobSet, Job,
  Pod and container patches, ``activeDeadlineSeconds``, an integer ``numProcPerNode``,
  ``initializer``, ``status.trainerStatus``) on each of v2.3.0's shipped runtimes
  (``config/overlays/v2.3/runtimes``) and two more (``FUZZ_RUNTIMES_V2_3``: torch
  ``envInjection`` and Flux); runtimes with the torch, MPI, JAX, XGBoost and Flux policies; JobSet
  v0.12.0's JobSet (``volumeClaimPolicies``); the eight paths of controller-runtime v0.24's
  managers, the TrainJob defaulter among them.

``check_answer`` is what every answer must satisfy, as controller-runtime answers: HTTP 200 with
an AdmissionReview whose response echoes the uid, never code 500, a denial's message names the
field (or is one of the Go webhooks' own field-less sentences) and the reason, and its code is
one the Go webhook of that path and level can give (``FuzzLevel.refusals``).

Importable by its module name from every test (``test/`` is on ``sys.path``).
"""

from __future__ import annotations

import base64
import copy
import functools
import http.client
import json
import os
import re
import ssl
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from manager.webhook.jsonpatch import apply as apply_patch  # RFC 6902, as the API server applies a patch

ROOT = Path(__file__).resolve().parents[1]
Json = Any
GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
TRAINER_API = f"{GROUP}/{VERSION}"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
NAMESPACE = "fuzz"

TRAINJOB_VALIDATE_PATH = "/validate-trainer-kubeflow-org-v1alpha1-trainjob"
TRAINJOB_DEFAULT_PATH = "/mutate-trainer-kubeflow-org-v1alpha1-trainjob"
TRAINING_RUNTIME_PATH = "/validate-trainer-kubeflow-org-v1alpha1-trainingruntime"
CLUSTER_TRAINING_RUNTIME_PATH = "/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime"
JOBSET_MUTATE_PATH = "/mutate-jobset-x-k8s-io-v1alpha2-jobset"
JOBSET_VALIDATE_PATH = "/validate-jobset-x-k8s-io-v1alpha2-jobset"
POD_MUTATE_PATH = "/mutate--v1-pod"
POD_VALIDATE_PATH = "/validate--v1-pod"
JOBSET_PATHS = frozenset({JOBSET_MUTATE_PATH, JOBSET_VALIDATE_PATH, POD_MUTATE_PATH, POD_VALIDATE_PATH})

# path -> (group, version, kind, resource)
Paths = Mapping[str, tuple[str, str, str, str]]
V2_1_PATHS: Paths = {
    TRAINJOB_VALIDATE_PATH: (GROUP, VERSION, "TrainJob", "trainjobs"),
    TRAINING_RUNTIME_PATH: (GROUP, VERSION, "TrainingRuntime", "trainingruntimes"),
    CLUSTER_TRAINING_RUNTIME_PATH: (GROUP, VERSION, "ClusterTrainingRuntime", "clustertrainingruntimes"),
    JOBSET_MUTATE_PATH: ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"),
    JOBSET_VALIDATE_PATH: ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"),
    POD_MUTATE_PATH: ("", "v1", "Pod", "pods"),
    POD_VALIDATE_PATH: ("", "v1", "Pod", "pods"),
}
V2_3_PATHS: Paths = {**V2_1_PATHS, TRAINJOB_DEFAULT_PATH: (GROUP, VERSION, "TrainJob", "trainjobs")}

# Denials of the Go webhooks that name their subject in words rather than as a field path
# (jobset's JobSet and pod webhooks): their text is upstream's, accepted as it is.
FIELDLESS_DENIALS = (
    "follower pod",
    "leader pod",
    "pod missing label",
    "failure policy rule name",
    "in failure policy",
    "rule names are not unique",
    "replicatedJob",
    "coordinator",
    "DependsOn",
    "unsupported runtime",
    "quantities must match",  # resource.Quantity's own UnmarshalJSON error
    "intstr",
    "parsing time",
)
_FIELD = re.compile(
    r"(Go struct field|\b(spec|metadata|status|apiVersion|kind)\b|\.[a-zA-Z]+(\[\d+\])?:|"
    r"cannot unmarshal|json: |couldn't get version/kind|unknown operation|there is no content|"
    r"request entity is too large|contentType=|request body is empty|unable to decode|"
    r"unexpected GroupVersion string|Object 'apiVersion' is missing)"
)
# Python's own words (pydantic's, the interpreter's) leaking into a denial: never a Go webhook's.
_PYTHON_TEXT = re.compile(
    r"Field required|Value error, |Input should be|validation errors? for |Extra inputs are not permitted|"
    r"NoneType|object has no attribute|not subscriptable|unhashable type|KeyError|TypeError|ValueError|"
    r"AttributeError|IndexError|RecursionError"
)
_GO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


def _load(path: Path) -> Json:
    return yaml.safe_load(path.read_text())


def job_template(name: str = "node", image: str = "busybox:1.36", **container: Any) -> Json:
    return {
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": name,
                            "image": image,
                            "command": ["sh", "-c", "exit 0"],
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                            "env": [{"name": "A", "value": "1"}],
                            **container,
                        }
                    ],
                }
            },
        }
    }


def _runtimes(kind: str, specs: Collection[Json], namespace: str) -> list[Json]:
    """A runtime of ``kind`` (name ``fz``) for each spec."""
    metadata: Json = (
        {"name": "fz"} if kind == "ClusterTrainingRuntime" else {"name": "fz", "namespace": namespace}
    )
    return [
        {"apiVersion": TRAINER_API, "kind": kind, "metadata": dict(metadata), "spec": copy.deepcopy(spec)}
        for spec in specs
    ]


def _jobset(namespace: str, **spec: Any) -> Json:
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {"name": "fz", "namespace": namespace},
        "spec": {
            "suspend": True,
            "network": {"enableDNSHostnames": True},
            "successPolicy": {"operator": "All"},
            "failurePolicy": {"maxRestarts": 1, "rules": [{"action": "FailJobSet"}]},
            "replicatedJobs": [
                {"name": "leader", "replicas": 1, "template": job_template("leader")},
                {"name": "workers", "replicas": 2, "template": job_template("worker")},
            ],
            **spec,
        },
    }


def _pod(namespace: str) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "fz-workers-0-1-abcde",
            "namespace": namespace,
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": "fz",
                "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                "jobset.sigs.k8s.io/job-index": "0",
                "jobset.sigs.k8s.io/job-key": "0123456789abcdef",
            },
            "annotations": {
                "jobset.sigs.k8s.io/jobset-name": "fz",
                "alpha.jobset.sigs.k8s.io/exclusive-topology": "topology.kubernetes.io/zone",
                "batch.kubernetes.io/job-completion-index": "1",
            },
        },
        "spec": {
            "restartPolicy": "Never",
            "priority": 0,
            "containers": [{"name": "w", "image": "busybox:1.36", "resources": {"limits": {"cpu": "1"}}}],
        },
    }


# --- level v2.1 ----------------------------------------------------------------------------------


def _v2_1_runtimes() -> list[Json]:
    return [_load(ROOT / "config" / "runtimes" / "torch-distributed.yaml")]


def _v2_1_bases(namespace: str) -> dict[str, list[Json]]:
    runtime_spec = _v2_1_runtimes()[0]["spec"]
    trainjob = {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": {"name": "fz", "namespace": namespace, "labels": {"app": "fuzz"}},
        "spec": {
            "runtimeRef": {"name": "torch-distributed", "apiGroup": GROUP, "kind": "ClusterTrainingRuntime"},
            "suspend": True,
            "trainer": {
                "numNodes": 2,
                "image": "pytorch/pytorch:2.7.1",
                "command": ["torchrun", "train.py"],
                "args": ["--epochs", "1"],
                "env": [{"name": "LR", "value": "0.1"}],
                "resourcesPerNode": {"limits": {"cpu": "1", "memory": "1Gi"}},
                "numProcPerNode": "auto",
            },
            "labels": {"team": "a"},
            "podTemplateOverrides": [
                {"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"kubernetes.io/os": "linux"}}}
            ],
        },
    }
    return {
        "TrainJob": [trainjob],
        "TrainingRuntime": _runtimes("TrainingRuntime", [runtime_spec], namespace),
        "ClusterTrainingRuntime": _runtimes("ClusterTrainingRuntime", [runtime_spec], namespace),
        "JobSet": [_jobset(namespace)],
        "Pod": [_pod(namespace)],
    }


# --- level v2.3 ----------------------------------------------------------------------------------

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
LAST_WRITTEN = "2026-01-02T03:04:05Z"


def _rjob(name: str, containers: list[Json], ancestor: str | None = None, **pod: Any) -> Json:
    template: Json = {"spec": {"template": {"spec": {"containers": containers, **pod}}}}
    if ancestor is not None:
        template["metadata"] = {"labels": {ANCESTOR: ancestor}}
    return {"name": name, "template": template}


# Two ClusterTrainingRuntimes beside v2.3.0's shipped ones, for what those do not use: torch
# ``envInjection`` into a sidecar, an init container and another job's container, and Flux.
FUZZ_RUNTIMES_V2_3: tuple[Json, ...] = (
    {
        "apiVersion": TRAINER_API,
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "fz-torch-inject", "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {
            "mlPolicy": {
                "numNodes": 1,
                "torch": {
                    "envInjection": {
                        "targets": [
                            {"jobName": "node", "containerNames": ["monitor", "preflight"]},
                            {"jobName": "aux", "containerNames": ["helper"]},
                        ]
                    }
                },
            },
            "template": {
                "spec": {
                    "replicatedJobs": [
                        _rjob(
                            "node",
                            [
                                {"name": "node", "image": "busybox:1.36"},
                                {"name": "monitor", "image": "busybox:1.36"},
                            ],
                            "trainer",
                            initContainers=[{"name": "preflight", "image": "busybox:1.36"}],
                        ),
                        _rjob("aux", [{"name": "helper", "image": "busybox:1.36"}]),
                    ]
                }
            },
        },
    },
    {
        "apiVersion": TRAINER_API,
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "fz-flux", "labels": {"trainer.kubeflow.org/framework": "flux"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "flux": {"numProcPerNode": 1}},
            "template": {
                "spec": {
                    "replicatedJobs": [_rjob("node", [{"name": "node", "image": "busybox:1.36"}], "trainer")]
                }
            },
        },
    },
)


@functools.cache
def _v2_3_runtimes() -> tuple[Json, ...]:
    shipped = sorted((ROOT / "config" / "overlays" / "v2.3" / "runtimes").glob("*.yaml"))
    return (*(_load(p) for p in shipped if p.name != "kustomization.yaml"), *FUZZ_RUNTIMES_V2_3)


def _patch(manager: str, pod_spec: Json, *, time: str | None = None, **template: Any) -> Json:
    """A ``runtimePatches`` entry of ``manager`` patching the ``node`` job's pods with ``pod_spec``."""
    node = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"fuzz.example.com/job": "node"}},
            "spec": {
                "template": {"metadata": {"annotations": {"fuzz.example.com/pod": "y"}}, "spec": pod_spec}
            },
        },
    }
    patch: Json = {
        "manager": manager,
        "trainingRuntimeSpec": {"template": {**template, "spec": {"replicatedJobs": [node]}}},
    }
    if time is not None:
        patch["time"] = time
    return patch


def _v2_3_trainjob(namespace: str, runtime: str, trainer: Json, **spec: Any) -> Json:
    user_patch = _patch(
        "fuzz.example.com/patcher",
        {
            "serviceAccountName": "default",
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "fuzz.example.com/pool", "operator": "Exists", "effect": "NoSchedule"}],
            "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}],
            "imagePullSecrets": [{"name": "regcred"}],
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000},
            "containers": [
                {
                    "name": "node",
                    "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                    "securityContext": {"allowPrivilegeEscalation": False},
                }
            ],
        },
        metadata={"labels": {"team": "a"}, "annotations": {"fuzz.example.com/note": "x"}},
    )
    kueue_patch = _patch(
        "kueue.x-k8s.io/manager",
        {
            "nodeSelector": {"cloud.example.com/flavor": "on-demand"},
            "tolerations": [{"key": "cloud.example.com/flavor", "operator": "Equal", "value": "on-demand"}],
        },
        time=LAST_WRITTEN,
    )
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": {"name": "fz", "namespace": namespace, "labels": {"app": "fuzz"}},
        "spec": {
            "runtimeRef": {"name": runtime, "apiGroup": GROUP, "kind": "ClusterTrainingRuntime"},
            "suspend": True,
            "activeDeadlineSeconds": 3600,
            "trainer": trainer,
            "runtimePatches": [user_patch, kueue_patch],
            **spec,
        },
        "status": {
            "trainerStatus": {
                "progressPercentage": 40,
                "estimatedRemainingSeconds": 120,
                "metrics": [{"name": "loss", "value": "0.25"}],
                "lastUpdatedTime": LAST_WRITTEN,
            }
        },
    }


def _v2_3_trainjobs(namespace: str) -> list[Json]:
    resources = {"limits": {"cpu": "1", "memory": "1Gi"}}
    torch = {
        "numNodes": 2,
        "image": "pytorch/pytorch:2.7.1",
        "command": ["torchrun", "train.py"],
        "args": ["--epochs", "1"],
        "env": [{"name": "LR", "value": "0.1"}],
        "resourcesPerNode": resources,
        "numProcPerNode": 2,
    }
    return [
        _v2_3_trainjob(namespace, "torch-distributed", torch),
        _v2_3_trainjob(namespace, "fz-torch-inject", {**torch, "numProcPerNode": 4}),
        _v2_3_trainjob(
            namespace,
            "deepspeed-distributed",
            {"numNodes": 2, "numProcPerNode": 2, "command": ["python", "train.py"]},
        ),
        _v2_3_trainjob(
            namespace,
            "jax-distributed",
            {"numNodes": 2, "command": ["python", "train.py"], "resourcesPerNode": resources},
        ),
        _v2_3_trainjob(
            namespace,
            "xgboost-distributed",
            {
                "numNodes": 2,
                "command": ["python", "train.py"],
                "env": [{"name": "EPOCHS", "value": "3"}],
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": "1"}},
            },
        ),
        _v2_3_trainjob(namespace, "fz-flux", {"numNodes": 2, "numProcPerNode": 1, "command": ["hostname"]}),
        _v2_3_trainjob(
            namespace,
            "torchtune-llama3.2-1b",
            {"numNodes": 1, "command": ["tune", "run"], "args": ["epochs=1"]},
            initializer={
                "dataset": {"storageUri": "hf://tatsu-lab/alpaca"},
                "model": {"storageUri": "hf://meta-llama/Llama-3.2-1B-Instruct"},
            },
        ),
    ]


def _v2_3_bases(namespace: str) -> dict[str, list[Json]]:
    specs = [runtime["spec"] for runtime in _v2_3_runtimes()]
    claims = {
        "templates": [
            {
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            }
        ],
        "retentionPolicy": {"whenDeleted": "Delete"},
    }
    jobset = _jobset(namespace, volumeClaimPolicies=[claims])
    jobset["spec"]["replicatedJobs"][1]["template"] = job_template(
        "worker", volumeMounts=[{"name": "data", "mountPath": "/data"}]
    )
    return {
        "TrainJob": _v2_3_trainjobs(namespace),
        "TrainingRuntime": _runtimes("TrainingRuntime", specs, namespace),
        "ClusterTrainingRuntime": _runtimes("ClusterTrainingRuntime", specs, namespace),
        "JobSet": [_jobset(namespace), jobset],
        "Pod": [_pod(namespace)],
    }


# --- the levels ----------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class FuzzLevel:
    """What the fuzzer sends at one API level, and which refusals its Go webhooks give."""

    name: str
    """The API level (``trainer.levels``), e.g. ``v2.3``."""
    paths: Paths
    """The webhook paths the level's managers serve."""
    make_bases: Callable[[str], dict[str, list[Json]]]
    """The valid objects per kind, in a namespace."""
    make_runtimes: Callable[[], Collection[Json]]
    """The ClusterTrainingRuntimes the TrainJob bases name: what the cluster must hold."""
    refusals: Mapping[str, frozenset[int]]
    """Per path, the codes of a denial besides 400 (a request or object the path cannot decode,
    ``admission.Errored(400, ...)``) and 413 (a body over the size limit): 403 where the Go
    webhook returns a plain error (controller-runtime's ``admission.Denied``), 422 where it
    returns ``apierrors.NewInvalid``."""

    @property
    def id(self) -> str:
        """The level in test ids: ``v2_3``."""
        return self.name.replace(".", "_")

    def bases(self, namespace: str = NAMESPACE) -> dict[str, list[Json]]:
        """Valid objects per kind; shared, so copy one before changing it."""
        return _cached_bases(self, namespace)

    def runtimes(self) -> list[Json]:
        return copy.deepcopy(list(self.make_runtimes()))

    def base_objects(self, namespace: str = NAMESPACE) -> dict[str, Json]:
        """The first valid object per kind (a copy)."""
        return {kind: copy.deepcopy(objs[0]) for kind, objs in self.bases(namespace).items()}


@functools.cache
def _cached_bases(level: FuzzLevel, namespace: str) -> dict[str, list[Json]]:
    return level.make_bases(namespace)


_TRAINER_VALIDATORS = (TRAINJOB_VALIDATE_PATH, TRAINING_RUNTIME_PATH, CLUSTER_TRAINING_RUNTIME_PATH)

V2_1 = FuzzLevel(
    name="v2.1",
    paths=V2_1_PATHS,
    make_bases=_v2_1_bases,
    make_runtimes=_v2_1_runtimes,
    refusals={
        # trainer v2.1.0: the runtimes' field.ErrorList aggregate, "unsupported runtime"
        **dict.fromkeys(_TRAINER_VALIDATORS, frozenset({403})),
        # jobset v0.10.1: Default never fails; ValidateCreate errors.Join, ValidateUpdate an aggregate
        JOBSET_MUTATE_PATH: frozenset(),
        JOBSET_VALIDATE_PATH: frozenset({403}),
        # the pod webhooks' fmt.Errorf ("pod missing label: ...", "follower pod ...")
        POD_MUTATE_PATH: frozenset({403}),
        POD_VALIDATE_PATH: frozenset({403}),
    },
)
V2_3 = FuzzLevel(
    name="v2.3",
    paths=V2_3_PATHS,
    make_bases=_v2_3_bases,
    make_runtimes=_v2_3_runtimes,
    refusals={
        **dict.fromkeys(_TRAINER_VALIDATORS, frozenset({403})),
        # trainer v2.3.0 TrainJobDefaulter.Default: json.Unmarshal of the old object's raw bytes
        TRAINJOB_DEFAULT_PATH: frozenset({403}),
        JOBSET_MUTATE_PATH: frozenset(),
        # jobset v0.12.0 ValidateCreate/ValidateUpdate: apierrors.NewInvalid, always
        JOBSET_VALIDATE_PATH: frozenset({422}),
        POD_MUTATE_PATH: frozenset({403}),
        POD_VALIDATE_PATH: frozenset({403}),
    },
)
LEVELS: dict[str, FuzzLevel] = {level.name: level for level in (V2_1, V2_3)}


BASE_KINDS = ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime", "JobSet", "Pod")

# --- hostile JSON ------------------------------------------------------------------------------

_text = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["", "\x00", "a\x00b", "☃", "🚀" * 3, "\u202e", "\ud7ff", "-1", "1e309", "NaN", "null"]),
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**31, 2**63, -(2**63) - 1, 2**64]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.5, -0.0, 1e300, 1.5]),
    _text,
)
json_values: st.SearchStrategy[Json] = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(_text, children, max_size=4),
    ),
    max_leaves=12,
)


@st.composite
def huge(draw: st.DrawFn) -> Json:
    kind = draw(st.sampled_from(["string", "list", "dict", "nested-list", "nested-dict"]))
    if kind == "string":
        return draw(st.sampled_from(["x", "\x00", "é"])) * draw(st.sampled_from([300, 70_000, 400_000]))
    if kind == "list":
        return [draw(_scalars)] * draw(st.sampled_from([1_000, 20_000]))
    if kind == "dict":
        return {f"k{i}": i for i in range(draw(st.sampled_from([1_000, 10_000])))}
    depth = draw(st.sampled_from([50, 200, 500]))  # 500: past the server's default recursion limit
    value: Json = "leaf"
    for _ in range(depth):
        value = [value] if kind == "nested-list" else {"a": value}
    return value


hostile_values = st.one_of(json_values, huge())


# --- near-valid values -----------------------------------------------------------------------


def near_valid(current: Json) -> st.SearchStrategy[Json]:
    """A value of the same JSON type as ``current`` that a validator may refuse."""
    if isinstance(current, bool):
        return st.just(not current)
    if isinstance(current, int):
        return st.sampled_from([0, -1, -5, 2**31 - 1, 2**31, current + 1, 10**6])
    if isinstance(current, float):
        return st.sampled_from([0.0, -1.0, 1e9])
    if isinstance(current, str):
        return st.one_of(
            st.sampled_from(
                ["", "UPPER", "a" * 64, "a" * 300, "-bad-", "has space", "1Gi", "-1", "auto", "x.y/z", "é"]
            ),
            st.text(max_size=8),
        )
    if isinstance(current, list):
        return st.sampled_from([[], current + current, current[:1]])
    if isinstance(current, dict):
        return st.sampled_from([{}, {**current, "unknownField": 1}])
    return st.none()


# --- paths into an object ----------------------------------------------------------------------


def _paths(obj: Json, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``obj`` down to 40 levels (never into a drawn deep nest: hypothesis keeps
    only about 2,000 free frames, and nests inside nests would exceed them while copying)."""
    out = [prefix]
    if len(prefix) >= 40:
        return out
    if isinstance(obj, dict):
        for key, value in obj.items():
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            out.extend(_paths(value, (*prefix, i)))
    return out


def _get(obj: Json, path: tuple[Any, ...]) -> Json:
    for part in path:
        obj = obj[part]
    return obj


def _set(obj: Json, path: tuple[Any, ...], value: Json) -> Json:
    if not path:
        return value
    _get(obj, path[:-1])[path[-1]] = value
    return obj


def _delete(obj: Json, path: tuple[Any, ...]) -> Json:
    if path:
        del _get(obj, path[:-1])[path[-1]]
    return obj


@st.composite
def mutated(draw: st.DrawFn, base: Json, *, max_mutations: int = 3) -> Json:
    """``base`` left valid, or changed at up to ``max_mutations`` random depths."""
    obj = copy.deepcopy(base)
    flavour = draw(st.sampled_from(["valid", "near", "near", "hostile", "hostile", "mixed"]))
    if flavour == "valid":
        return obj
    for _ in range(draw(st.integers(1, max_mutations))):
        paths = _paths(obj)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        current = _get(obj, path)
        action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        hostile = flavour == "hostile" or (flavour == "mixed" and draw(st.booleans()))
        if action == "delete" and path:
            obj = _delete(obj, path)
        elif action == "add" and isinstance(current, dict):
            key = draw(st.one_of(_text, st.sampled_from(["spec", "name", "metadata", "status", "template"])))
            current[key] = draw(hostile_values if hostile else json_values)
        else:
            obj = _set(obj, path, draw(hostile_values if hostile else near_valid(current)))
    return obj


# --- AdmissionReviews --------------------------------------------------------------------------


@st.composite
def admission_reviews(
    draw: st.DrawFn, level: FuzzLevel = V2_1, namespace: str = NAMESPACE, paths: Collection[str] | None = None
) -> tuple[str, Json]:
    """``(path, review)``: a review for one of the level's webhook paths (``paths``: those only)."""
    path = draw(st.sampled_from(sorted(paths if paths is not None else level.paths)))
    group, version, kind, resource = level.paths[path]
    bases = level.bases(namespace)
    # mostly the path's own kind; now and then another kind's object sent to it
    kind_of_object = draw(st.sampled_from([kind] * 6 + sorted(bases)))
    base = copy.deepcopy(draw(st.sampled_from(bases[kind_of_object])))
    name = draw(st.sampled_from(["fz", "fz-2", "a" * 63]))
    base["metadata"]["name"] = name
    obj = draw(mutated(base))
    operation = draw(st.sampled_from(["CREATE"] * 5 + ["UPDATE"] * 4 + ["DELETE", "CONNECT"]))
    request: Json = {
        "uid": str(uuid.UUID(int=draw(st.integers(0, 2**128 - 1)))),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "name": name,
        "operation": operation,
        "userInfo": {"username": "fuzzer", "groups": ["system:authenticated"]},
        "dryRun": draw(st.booleans()),
    }
    if kind != "ClusterTrainingRuntime":
        request["namespace"] = namespace
    if operation == "DELETE":
        request["oldObject"] = obj
    else:
        request["object"] = obj
    if operation == "UPDATE":
        old_flavour = draw(st.sampled_from(["same", "base", "mutated"]))
        request["oldObject"] = (
            copy.deepcopy(obj)
            if old_flavour == "same"
            else base
            if old_flavour == "base"
            else draw(mutated(base))
        )
    review: Json = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    if draw(st.integers(0, 19)) == 0:  # one in twenty: a hostile envelope
        review = draw(mutated(review, max_mutations=2))
    return path, review


def in_namespace(review: Json, namespace: str) -> None:
    """The review drawn in ``NAMESPACE`` moved to ``namespace`` (in place): the request's and
    its objects' namespace where they are the drawn one."""
    request = review.get("request") if isinstance(review, dict) else None
    if not isinstance(request, dict) or namespace == NAMESPACE:
        return
    if request.get("namespace") == NAMESPACE:
        request["namespace"] = namespace
    for key in ("object", "oldObject"):
        metadata = request[key].get("metadata") if isinstance(request.get(key), dict) else None
        if isinstance(metadata, dict) and metadata.get("namespace") == NAMESPACE:
            metadata["namespace"] = namespace


def _request_value(review: Json, key: str) -> Json:
    request = review.get("request") if isinstance(review, dict) else None
    return request.get(key) if isinstance(request, dict) else None


def object_kind(review: Json) -> str:
    """The kind of the object a review carries (``object``, else ``oldObject``), as sent: one of
    the base kinds, ``other`` for a hostile kind, ``none`` without an object."""
    for key in ("object", "oldObject"):
        obj = _request_value(review, key)
        if obj is not None:
            kind = obj.get("kind") if isinstance(obj, dict) else None
            return kind if isinstance(kind, str) and kind in BASE_KINDS else "other"
    return "none"


def operation(review: Json) -> str:
    value = _request_value(review, "operation")
    return value if value in ("CREATE", "UPDATE", "DELETE", "CONNECT") else "other"


def encode(review: Json) -> bytes:
    """JSON as the API server sends it (non-ASCII and NUL escaped or not, both are valid JSON)."""
    return json.dumps(review, ensure_ascii=False).encode("utf-8", "surrogatepass")


# --- the answer --------------------------------------------------------------------------------


def check_answer(
    review: Json, status: int, body: bytes, level: FuzzLevel = V2_1, path: str | None = None
) -> Json:
    """Assert what every answer must be; returns the AdmissionReview response. With ``path``,
    also that a denial has a code the level's Go webhook of that path gives, in its form."""
    assert status == 200, f"HTTP {status}: {body[:500]!r}"
    answer = json.loads(body)
    assert isinstance(answer, dict), answer
    response = answer.get("response")
    assert isinstance(response, dict), answer
    request = review.get("request") if isinstance(review, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    if isinstance(uid, str) and response.get("uid"):
        assert response["uid"] == uid, (response.get("uid"), uid)
    result = response.get("status") or {}
    code = result.get("code", 200)
    assert code != 500 and code < 500, f"answered {code}: {result.get('message')}"
    if not response.get("allowed"):
        message = result.get("message", "")
        assert message, f"a denial without a message: {response}"
        assert "Traceback" not in message and "internal error" not in message, message
        assert not _PYTHON_TEXT.search(message), f"Python's words in the denial: {message[:600]}"
        assert _FIELD.search(message) or any(s in message for s in FIELDLESS_DENIALS), (
            f"the denial names no field: {message[:400]}"
        )
        if path is not None:
            _check_refusal(level, path, result)
    if "patch" in response:
        patch = json.loads(base64.b64decode(response["patch"]))
        assert isinstance(patch, list) and all(p.get("op") in ("add", "remove", "replace") for p in patch)
        if path == TRAINJOB_DEFAULT_PATH:
            _check_stamped(review, patch)
    return response


def _check_refusal(level: FuzzLevel, path: str, result: Json) -> None:
    """The denial's code is one the Go webhook gives (``FuzzLevel.refusals``), as
    controller-runtime writes it: ``Errored`` (400, no reason), ``Denied`` (403 ``Forbidden``),
    or the ``apierrors.NewInvalid`` status itself (422 ``Invalid``, its kind and causes)."""
    code, message = result.get("code"), str(result.get("message", ""))
    # any path: 400 for what it cannot decode, 413 for a body over controller-runtime's limit
    assert code in (400, 413) or code in level.refusals[path], (
        f"level {level.name} {path} refused with {code}, which its Go webhook never answers: {message[:300]}"
    )
    if code == 403:
        assert result.get("reason") == "Forbidden", result
    if code == 422:
        assert result.get("reason") == "Invalid", result
        details = result.get("details") or {}
        qualified = f"{details.get('kind')}.{details.get('group')}"
        # the name as %q quotes it (printable characters as they are, the rest escaped)
        assert re.match(rf'{re.escape(qualified)} ".*" is invalid', message, re.S), result
        assert details.get("causes"), result


def _check_stamped(review: Json, patch: list[Json]) -> None:
    """The TrainJob defaulter patched to stamp times: afterwards every ``time`` of
    ``runtimePatches`` is written as ``metav1.Time`` writes it, and after a CREATE every entry
    has one (an UPDATE keeps an unchanged entry's old time, which may be none)."""
    patched = apply_patch(copy.deepcopy(_request_value(review, "object")), patch)
    assert isinstance(patched, dict), patched
    entries = ((patched.get("spec") or {}).get("runtimePatches")) or []
    assert entries, f"a defaulter patch without runtimePatches: {patch}"
    for entry in entries:
        assert isinstance(entry, dict), entry
        if operation(review) == "CREATE" or "time" in entry:
            assert isinstance(entry.get("time"), str) and _GO_TIME.match(entry["time"]), entry.get("time")


# --- sending -------------------------------------------------------------------------------------


class Poster:
    """One keep-alive HTTPS connection to the webhook server (reopened when the server closes it)."""

    def __init__(self, port: int, ca_pem: bytes) -> None:
        self.port = port
        self.ctx = ssl.create_default_context(cadata=ca_pem.decode())
        self.conn: http.client.HTTPSConnection | None = None

    def post(self, path: str, body: bytes, content_type: str = "application/json") -> tuple[int, bytes]:
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=60)
            try:
                self.conn.request("POST", path, body=body, headers={"Content-Type": content_type})
                response = self.conn.getresponse()
                data = response.read()
                if response.getheader("Connection", "").lower() == "close":
                    self.close()
                return response.status, data
            except (ConnectionError, http.client.HTTPException, ssl.SSLError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def fuzz_webhook_server(
    port: int,
    ca_pem: bytes,
    namespace: str,
    examples: int,
    on_answer: Callable[[str, Json, Json], None],
    level: FuzzLevel = V2_1,
    paths: Collection[str] | None = None,
) -> None:
    """POST ``examples`` generated reviews of ``level`` (to ``paths``, by default all the level's)
    to the webhook server on ``port``, check each answer (``check_answer``) and hand it to
    ``on_answer(path, review, response)`` for the caller's tally. Derandomized unless
    ``FUZZ_SEED`` is set (then that seed); blocking: run it in a thread."""
    poster = Poster(port, ca_pem)

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=os.environ.get("FUZZ_SEED") is None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    # drawn in the fixed NAMESPACE, then put into ``namespace``: a derandomized draw is seeded
    # from what the strategy prints, so the reviews must not depend on the test's namespace
    @given(admission_reviews(level, NAMESPACE, paths))
    def one(drawn: tuple[str, Json]) -> None:
        path, review = drawn
        in_namespace(review, namespace)
        status, body = poster.post(path, encode(review))
        on_answer(path, review, check_answer(review, status, body, level, path))

    if os.environ.get("FUZZ_SEED"):
        one = seed(int(os.environ["FUZZ_SEED"]))(one)
    try:
        one()
    finally:
        poster.close()
