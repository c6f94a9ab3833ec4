"""Doubles and builders for the Trainer controller and webhook unit tests."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from manager.cache import not_found
from manager.client.errors import NotFound
from manager.scheme import GroupVersionKind
from manager.testing.fake import FakeClient
from trainer.runtime import indexes
from trainer.runtime.objects import (
    CLUSTER_TRAINING_RUNTIME_GVK,
    JOBSET_GVK,
    TRAINJOB_GVK,
)

Json = dict[str, Any]
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
NOW = "2026-01-01T00:00:00Z"


def fake_client(objects: Iterable[Json] = ()) -> FakeClient:
    """A fake API with the Trainer's status subresources, cluster scopes and TrainJob indexes."""
    client = FakeClient(
        [copy.deepcopy(o) for o in objects],
        status_subresource=[TRAINJOB_GVK, JOBSET_GVK],
        cluster_scoped=[CLUSTER_TRAINING_RUNTIME_GVK],
    )
    client.add_index(
        TRAINJOB_GVK,
        indexes.TRAINJOB_RUNTIME_REF_KEY,
        indexes.index_trainjob_training_runtime,
    )
    client.add_index(
        TRAINJOB_GVK,
        indexes.TRAINJOB_CLUSTER_RUNTIME_REF_KEY,
        indexes.index_trainjob_cluster_training_runtime,
    )
    return client


class ClientReader:
    """The runtime framework's Reader over a FakeClient, with the cache's NotFound words."""

    def __init__(self, client: FakeClient) -> None:
        self.client = client

    async def get(self, gvk: GroupVersionKind, name: str, namespace: str = "") -> Json:
        try:
            obj: Json = await self.client.get(gvk, name, namespace)
        except NotFound:
            raise not_found(gvk, name) from None  # a miss reads as the cache words it
        return obj

    async def list(
        self,
        gvk: GroupVersionKind,
        *,
        namespace: str | None = None,
        label_selector: str | dict[str, str] | None = None,
        field_selector: dict[str, str] | None = None,
    ) -> list[Json]:
        items: list[Json] = await self.client.list(
            gvk, namespace=namespace, label_selector=label_selector, field_selector=field_selector
        )
        return items


@dataclass
class RecordedEvent:
    obj: Json
    type: str
    reason: str
    message: str


@dataclass
class FakeRecorder:
    events: list[RecordedEvent] = field(default_factory=list)

    async def event(self, obj: Any, event_type: str, reason: str, message: str) -> None:
        self.events.append(RecordedEvent(obj, event_type, reason, message))


def container(name: str, **extra: Any) -> Json:
    return {"name": name, **extra}


def rjob(name: str, ancestor: str | None, containers: list[Json], *, replicas: int | None = 1) -> Json:
    job: Json = {"name": name, "template": {"spec": {"template": {"spec": {"containers": containers}}}}}
    if replicas is not None:
        job["replicas"] = replicas
    if ancestor is not None:
        job["template"]["metadata"] = {"labels": {ANCESTOR: ancestor}}
    return job


def wrapper_rjobs(*, labels: bool = True, replicas: int = 1) -> list[Json]:
    """dataset-initializer, model-initializer and node, each with its own container."""
    return [
        rjob(n, (a if labels else None), [container(n, image="img")], replicas=replicas)
        for n, a in (
            ("dataset-initializer", "dataset-initializer"),
            ("model-initializer", "model-initializer"),
            ("node", "trainer"),
        )
    ]


def runtime(
    name: str = "test-runtime",
    *,
    namespace: str | None = "default",
    rjobs: list[Json] | None = None,
    labels: dict[str, str] | None = None,
    ml_policy: Json | None = None,
    finalizers: list[str] | None = None,
    deleting: bool = False,
) -> Json:
    """A TrainingRuntime (or a ClusterTrainingRuntime when ``namespace`` is None)."""
    meta: Json = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = labels
    if finalizers:
        meta["finalizers"] = list(finalizers)
    if deleting:
        meta["deletionTimestamp"] = NOW
    spec: Json = {"template": {"spec": {"replicatedJobs": rjobs if rjobs is not None else wrapper_rjobs()}}}
    if ml_policy is not None:
        spec["mlPolicy"] = ml_policy
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime" if namespace is not None else "ClusterTrainingRuntime",
        "metadata": meta,
        "spec": spec,
    }


def trainjob(
    name: str = "test-job",
    *,
    namespace: str = "default",
    runtime_name: str = "test-runtime",
    kind: str = "TrainingRuntime",
    group: str = "trainer.kubeflow.org",
    status: Json | None = None,
    **spec: Any,
) -> Json:
    tj: Json = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {"runtimeRef": {"name": runtime_name, "apiGroup": group, "kind": kind}, **spec},
    }
    if status is not None:
        tj["status"] = status
    return tj
