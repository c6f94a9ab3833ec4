"""Hypothesis strategies for admission fuzzing: AdmissionReviews for every webhook path.

Objects start from valid TrainJobs, TrainingRuntimes, ClusterTrainingRuntimes, JobSets and Pods
and are then left valid, made near-valid (a value of the right type but out of range or badly
named, a key dropped, an unknown key added) or hostile (any JSON at any depth in place of a
value: wrong types, nulls, huge strings, deep nesting, unicode and NUL bytes). UPDATEs carry an
old object built the same way; a share of reviews have a hostile envelope too.

``check_answer`` is what every answer must satisfy, as controller-runtime answers: HTTP 200 with
an AdmissionReview whose response echoes the uid, never code 500, and a denial's message names
the field (or is one of the Go webhooks' own field-less sentences) and the reason.

Importable by its module name from every test (``test/`` is on ``sys.path``).
"""

from __future__ import annotations

import base64
import copy
import http.client
import json
import re
import ssl
import uuid
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
Json = Any
GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
TRAINER_API = f"{GROUP}/{VERSION}"
NAMESPACE = "fuzz"

# path -> (group, version, kind, resource)
PATHS: dict[str, tuple[str, str, str, str]] = {
    "/validate-trainer-kubeflow-org-v1alpha1-trainjob": (GROUP, VERSION, "TrainJob", "trainjobs"),
    "/validate-trainer-kubeflow-org-v1alpha1-trainingruntime": (
        GROUP,
        VERSION,
        "TrainingRuntime",
        "trainingruntimes",
    ),
    "/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime": (
        GROUP,
        VERSION,
        "ClusterTrainingRuntime",
        "clustertrainingruntimes",
    ),
    "/mutate-jobset-x-k8s-io-v1alpha2-jobset": ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"),
    "/validate-jobset-x-k8s-io-v1alpha2-jobset": ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"),
    "/mutate--v1-pod": ("", "v1", "Pod", "pods"),
    "/validate--v1-pod": ("", "v1", "Pod", "pods"),
}

# Denials of the Go webhooks that name their subject in words rather than as a field path
# (jobset v0.10.1's JobSet and pod webhooks): their text is upstream's, accepted as it is.
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
    r"request entity is too large|contentType=|request body is empty)"
)


def _runtime_spec() -> Json:
    doc = yaml.safe_load((ROOT / "config" / "runtimes" / "torch-distributed.yaml").read_text())
    return doc["spec"]


def job_template(name: str = "node", image: str = "busybox:1.36") -> Json:
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
                        }
                    ],
                }
            },
        }
    }


def base_objects(namespace: str = NAMESPACE) -> dict[str, Json]:
    """One valid object per kind; names vary per example through ``name``."""
    runtime_spec = _runtime_spec()
    return {
        "TrainJob": {
            "apiVersion": TRAINER_API,
            "kind": "TrainJob",
            "metadata": {"name": "fz", "namespace": namespace, "labels": {"app": "fuzz"}},
            "spec": {
                "runtimeRef": {
                    "name": "torch-distributed",
                    "apiGroup": GROUP,
                    "kind": "ClusterTrainingRuntime",
                },
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
                    {
                        "targetJobs": [{"name": "node"}],
                        "spec": {"nodeSelector": {"kubernetes.io/os": "linux"}},
                    }
                ],
            },
        },
        "TrainingRuntime": {
            "apiVersion": TRAINER_API,
            "kind": "TrainingRuntime",
            "metadata": {"name": "fz", "namespace": namespace},
            "spec": copy.deepcopy(runtime_spec),
        },
        "ClusterTrainingRuntime": {
            "apiVersion": TRAINER_API,
            "kind": "ClusterTrainingRuntime",
            "metadata": {"name": "fz"},
            "spec": copy.deepcopy(runtime_spec),
        },
        "JobSet": {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
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
            },
        },
        "Pod": {
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
        },
    }


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
def admission_reviews(draw: st.DrawFn, namespace: str = NAMESPACE) -> tuple[str, Json]:
    """``(path, review)``: a review for one of the served webhook paths."""
    path = draw(st.sampled_from(sorted(PATHS)))
    group, version, kind, resource = PATHS[path]
    bases = base_objects(namespace)
    # mostly the path's own kind; now and then another kind's object sent to it
    kind_of_object = draw(st.sampled_from([kind] * 6 + sorted(bases)))
    base = bases[kind_of_object]
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


def check_answer(review: Json, status: int, body: bytes) -> Json:
    """Assert what every answer must be; returns the AdmissionReview response."""
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
        assert _FIELD.search(message) or any(s in message for s in FIELDLESS_DENIALS), (
            f"the denial names no field: {message[:400]}"
        )
    if "patch" in response:
        patch = json.loads(base64.b64decode(response["patch"]))
        assert isinstance(patch, list) and all(p.get("op") in ("add", "remove", "replace") for p in patch)
    return response


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
