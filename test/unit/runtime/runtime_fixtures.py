"""Test doubles and object builders for the runtime tests.

``FakeReader`` is the in-memory cache reader the plugins are handed; the builders write the
upstream test "wrappers" (docs/behaviour/trainer.md §10 preamble) as plain dicts so every expectation is literal.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from manager.cache import not_found
from manager.client.errors import ApiError
from manager.scheme import GroupVersionKind, ObjectKey, gvk_of_object, key_of
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.runtime import indexes
from trainer.runtime.objects import CLUSTER_TRAINING_RUNTIME_GVK, TRAINING_RUNTIME_GVK, TRAINJOB_GVK

Json = dict[str, Any]

INDEXES: dict[tuple[GroupVersionKind, str], Callable[[Any], list[str] | None]] = {
    (TRAINJOB_GVK, indexes.TRAINJOB_RUNTIME_REF_KEY): indexes.index_trainjob_training_runtime,
    (TRAINJOB_GVK, indexes.TRAINJOB_CLUSTER_RUNTIME_REF_KEY): indexes.index_trainjob_cluster_training_runtime,
    (
        TRAINING_RUNTIME_GVK,
        indexes.TRAINING_RUNTIME_RUNTIME_CLASS_KEY,
    ): indexes.index_training_runtime_runtime_class,
    (
        CLUSTER_TRAINING_RUNTIME_GVK,
        indexes.CLUSTER_TRAINING_RUNTIME_RUNTIME_CLASS_KEY,
    ): indexes.index_cluster_training_runtime_runtime_class,
}


class FakeReader:
    """Objects by (GVK, key); ``errors`` makes a get of that kind fail with the given error."""

    def __init__(self, objects: Iterable[Json] = (), errors: dict[str, ApiError] | None = None) -> None:
        self.objects: dict[tuple[GroupVersionKind, ObjectKey], Json] = {}
        self.errors = errors or {}
        for obj in objects:
            self.add(obj)

    def add(self, obj: Json) -> None:
        self.objects[(gvk_of_object(obj), key_of(obj))] = copy.deepcopy(obj)

    async def get(self, gvk: GroupVersionKind, name: str, namespace: str = "") -> Json:
        if gvk.kind in self.errors:
            raise self.errors[gvk.kind]
        try:
            return copy.deepcopy(self.objects[(gvk, ObjectKey(namespace, name))])
        except KeyError:
            raise not_found(gvk, name) from None  # the cache reader's words, as upstream's

    async def list(
        self,
        gvk: GroupVersionKind,
        *,
        namespace: str | None = None,
        label_selector: str | dict[str, str] | None = None,
        field_selector: dict[str, str] | None = None,
    ) -> list[Json]:
        out = []
        for (obj_gvk, key), obj in sorted(self.objects.items(), key=lambda kv: str(kv[0][1])):
            if obj_gvk != gvk or (namespace and key.namespace != namespace):
                continue
            if field_selector and not all(
                value in INDEXES[(gvk, name)](obj) for name, value in field_selector.items()
            ):
                continue
            out.append(copy.deepcopy(obj))
        return out


class RecordingIndexer:
    """Accepts index registrations; rejects an empty index name as controller-runtime does."""

    def __init__(self) -> None:
        self.registered: list[tuple[GroupVersionKind, str]] = []

    async def index_field(self, gvk: GroupVersionKind, name: str, fn: Callable[[Any], Iterable[str]]) -> None:
        if not name:
            raise ValueError("field name cannot be empty")
        self.registered.append((gvk, name))


def sort_objects(objects: list[Json]) -> list[Json]:
    """Objects ordered by apiVersion, kind and name, as the upstream tests compare them."""
    return sorted(
        objects,
        key=lambda o: (o.get("apiVersion", ""), o.get("kind", ""), o.get("metadata", {}).get("name", "")),
    )


def owner_ref(name: str = "test-job", uid: str = "uid") -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
RES = {"requests": {"cpu": "1"}}
RES4 = {"requests": {"cpu": "1", "memory": "4Gi"}}
INITIALIZER_VOLUME = {"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer"}}


def rjob(
    name: str,
    ancestor: str | None,
    containers: list[Json],
    *,
    init_containers: list[Json] | None = None,
    volumes: list[Json] | None = None,
    parallelism: int | None = None,
    depends_on: list[Json] | None = None,
    pod_extra: Json | None = None,
) -> Json:
    """A replicated job the way the API server stores it (groupName and replicas defaulted)."""
    pod_spec: Json = {}
    if init_containers is not None:
        pod_spec["initContainers"] = init_containers
    pod_spec["containers"] = containers
    if volumes is not None:
        pod_spec["volumes"] = volumes
    pod_spec.update(pod_extra or {})
    job_spec: Json = {"template": {"spec": pod_spec}}
    if parallelism is not None:
        job_spec["parallelism"] = parallelism
    template: Json = {"spec": job_spec}
    if ancestor is not None:
        template = {"metadata": {"labels": {ANCESTOR: ancestor}}, **template}
    out: Json = {"name": name, "groupName": "default", "replicas": 1, "template": template}
    if depends_on is not None:
        out["dependsOn"] = depends_on
    return out


def wrapper_containers(extra: Json | None = None) -> dict[str, Json]:
    """The three wrapper containers (with ``extra`` fields such as image/command/resources)."""
    extra = extra or {}
    return {
        "dataset-initializer": {
            "name": "dataset-initializer",
            **extra,
            "volumeMounts": [{"name": "initializer", "mountPath": "/workspace/dataset"}],
        },
        "model-initializer": {
            "name": "model-initializer",
            **extra,
            "volumeMounts": [{"name": "initializer", "mountPath": "/workspace/model"}],
        },
        "node": {
            "name": "node",
            **extra,
            "volumeMounts": [
                {"name": "initializer", "mountPath": "/workspace/dataset"},
                {"name": "initializer", "mountPath": "/workspace/model"},
            ],
        },
    }


def wrapper_rjobs(*, labels: bool = True, extra: Json | None = None, depends_on: bool = False) -> list[Json]:
    """The standard three replicated jobs: dataset-initializer, model-initializer, node."""
    containers = wrapper_containers(extra)
    deps = (
        [
            {"name": "dataset-initializer", "status": "Complete"},
            {"name": "model-initializer", "status": "Complete"},
        ]
        if depends_on
        else None
    )
    return [
        rjob(
            "dataset-initializer",
            "dataset-initializer" if labels else None,
            [containers["dataset-initializer"]],
            volumes=[dict(INITIALIZER_VOLUME)],
        ),
        rjob(
            "model-initializer",
            "model-initializer" if labels else None,
            [containers["model-initializer"]],
            volumes=[dict(INITIALIZER_VOLUME)],
        ),
        rjob(
            "node",
            "trainer" if labels else None,
            [containers["node"]],
            volumes=[dict(INITIALIZER_VOLUME)],
            depends_on=deps,
        ),
    ]


def training_runtime(
    name: str = "test-runtime",
    *,
    namespace: str | None = "default",
    rjobs: list[Json] | None = None,
    ml_policy: Json | None = None,
    pod_group_policy: Json | None = None,
    template_meta: Json | None = None,
    meta: Json | None = None,
    spec_extra: Json | None = None,
    cluster: bool = False,
) -> Json:
    """A TrainingRuntime (or ClusterTrainingRuntime) dict."""
    metadata: Json = {"name": name, **(meta or {})}
    if not cluster and namespace is not None:
        metadata["namespace"] = namespace
    template: Json = {
        "spec": {"replicatedJobs": rjobs if rjobs is not None else wrapper_rjobs(), **(spec_extra or {})}
    }
    if template_meta:
        template = {"metadata": template_meta, **template}
    spec: Json = {}
    if ml_policy is not None:
        spec["mlPolicy"] = ml_policy
    if pod_group_policy is not None:
        spec["podGroupPolicy"] = pod_group_policy
    spec["template"] = template
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime" if cluster else "TrainingRuntime",
        "metadata": metadata,
        "spec": spec,
    }


def trainjob(
    name: str = "test-job",
    *,
    namespace: str = "default",
    uid: str = "uid",
    runtime: str = "test-runtime",
    kind: str = "TrainingRuntime",
    **spec: Any,
) -> Json:
    """A TrainJob dict; ``spec`` keywords are camelCase spec fields."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {"runtimeRef": {"name": runtime, "apiGroup": "trainer.kubeflow.org", "kind": kind}, **spec},
    }


def tj_model(**kwargs: Any) -> TrainJob:
    return TrainJob.from_dict(trainjob(**kwargs))


def redact_ssh_secret(objects: list[Json]) -> list[Json]:
    """Check the generated SSH key pair is present and well-formed, then replace it by a marker.

    The keys are random, so tests compare everything else literally.
    """
    import base64

    out = copy.deepcopy(objects)
    for obj in out:
        if obj.get("kind") != "Secret":
            continue
        data = obj["data"]
        private = base64.b64decode(data["ssh-privatekey"]).decode()
        public = base64.b64decode(data["ssh-publickey"]).decode()
        assert private.startswith("-----BEGIN EC PRIVATE KEY-----\n"), private
        assert public.startswith("ecdsa-sha2-nistp521 AAAA") and public.endswith("\n"), public
        obj["data"] = {"ssh-privatekey": "<private key>", "ssh-publickey": "<public key>"}
    return out


def load(text: str) -> Any:
    """A literal expected object written as YAML."""
    import yaml

    return yaml.safe_load(text)
