"""Object builders and a fake API for the scheduler-plugins controller unit tests.

Mirrors upstream's unit harness: a fake API where PodGroup, ElasticQuota and Pod have a status
subresource, so re-submitting a pod replaces its spec and keeps its stored phase. The
ElasticQuota reconciler's Running-pod requests are fed by the fake's Pod events, as the Pod
watch feeds them in the manager.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from manager.client.errors import NotFound
from manager.client.patch import Patch
from manager.controller.event import CreateEvent, DeleteEvent, UpdateEvent
from manager.controller.predicate import Predicate
from manager.events import EventRecorder
from manager.testing.fake import FakeClient
from trainer.api import scheduling_constants as c
from trainer.controllers import elasticquota, podgroup

Object = dict[str, Any]
LABEL = c.PodGroupLabel


def rfc3339(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


NOW = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)


def pg(
    name: str = "pg",
    namespace: str = "default",
    *,
    min_member: int | None = 2,
    phase: str | None = None,
    created: datetime.datetime = NOW,
    **status: Any,
) -> Object:
    spec: Object = {} if min_member is None else {"minMember": min_member}
    full_status = dict(status)
    if phase is not None:
        full_status["phase"] = phase
    obj: Object = {
        "apiVersion": c.API_VERSION,
        "kind": c.PodGroupKind,
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": rfc3339(created)},
        "spec": spec,
    }
    if full_status:
        obj["status"] = full_status
    return obj


def pod(
    name: str,
    namespace: str = "default",
    *,
    group: str | None = "pg",
    phase: str | None = "Pending",
    owners: list[str] = (),  # type: ignore[assignment]
    containers: list[Object] | None = None,
    init: list[Object] | None = None,
    overhead: Object | None = None,
) -> Object:
    meta: Object = {"name": name, "namespace": namespace}
    if group is not None:
        meta["labels"] = {LABEL: group}
    if owners:
        meta["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": owner, "uid": f"uid-{owner}"}
            for owner in owners
        ]
    spec: Object = {"containers": containers or [{"name": "c", "image": "busybox"}]}
    if init:
        spec["initContainers"] = init
    if overhead:
        spec["overhead"] = overhead
    obj: Object = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if phase is not None:
        obj["status"] = {"phase": phase}
    return obj


def container(requests: Object | None = None, **extra: Any) -> Object:
    out: Object = {"name": f"c{len(str(requests))}", "image": "busybox", **extra}
    if requests:
        out["resources"] = {"requests": requests}
    return out


def res(cpu: Any = None, mem: Any = None, gpu: Any = None, **more: Any) -> Object:
    """A resource list; CPU in cores, memory in bytes, GPU is ``nvidia.com/gpu`` (as §7's legend)."""
    out: Object = {}
    if cpu is not None:
        out["cpu"] = str(cpu)
    if mem is not None:
        out["memory"] = str(mem)
    if gpu is not None:
        out["nvidia.com/gpu"] = str(gpu)
    out.update({k.replace("_", "-"): str(v) for k, v in more.items()})
    return out


def eq(
    name: str,
    namespace: str,
    *,
    min: Object | None = None,
    max: Object | None = None,
    used: Object | None = None,
) -> Object:
    spec: Object = {}
    if min is not None:
        spec["min"] = min
    if max is not None:
        spec["max"] = max
    obj: Object = {
        "apiVersion": c.API_VERSION,
        "kind": c.ElasticQuotaKind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    if used is not None:
        obj["status"] = {"used": used}
    return obj


def fake_api(*objects: Object) -> FakeClient:
    """A FakeClient with status subresources and the pod indexes the controllers register."""
    client = FakeClient(
        objects, status_subresource=[podgroup.PODGROUP, elasticquota.ELASTICQUOTA, podgroup.POD]
    )
    client.add_index(podgroup.POD, podgroup.POD_GROUP_INDEX, podgroup.index_pod_group)
    return client


class PredicateFeed:
    """A ``ResourceEventHandler`` that hands each event to a predicate (as a source does)."""

    def __init__(self, predicate: Predicate) -> None:
        self.predicate = predicate

    def on_add(self, obj: Object, is_in_initial_list: bool) -> None:
        self.predicate.create(CreateEvent(obj, is_in_initial_list))

    def on_update(self, old: Object, new: Object) -> None:
        self.predicate.update(UpdateEvent(old, new))

    def on_delete(self, obj: Object) -> None:
        self.predicate.delete(DeleteEvent(obj))


def running_requests(client: FakeClient) -> elasticquota.RunningPodRequests:
    """The Running pods' requests, kept from ``client``'s Pod events from now on."""
    running = elasticquota.RunningPodRequests()
    client.add_event_handler(elasticquota.POD, PredicateFeed(running.observer()))
    return running


def pg_reconciler(client: FakeClient) -> podgroup.PodGroupReconciler:
    return podgroup.PodGroupReconciler(client, EventRecorder(client, component=podgroup.EVENT_COMPONENT))


def eq_reconciler(
    client: FakeClient, *, clock: Callable[[], float] | None = None
) -> elasticquota.ElasticQuotaReconciler:
    recorder = EventRecorder(client, component=elasticquota.EVENT_COMPONENT)
    running = running_requests(client)
    if clock is None:
        return elasticquota.ElasticQuotaReconciler(client, recorder, running)
    return elasticquota.ElasticQuotaReconciler(client, recorder, running, clock=clock)


async def set_pod_phase(client: FakeClient, name: str, phase: str, namespace: str = "default") -> bool:
    """Write a pod's phase through /status; False when the pod is not stored (upstream ignores it)."""
    try:
        await client.status.patch(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}},
            Patch.merge({"status": {"phase": phase}}),
        )
    except NotFound:
        return False
    return True


async def get_pg(client: FakeClient, name: str = "pg", namespace: str = "default") -> Object:
    obj: Object = await client.get(podgroup.PODGROUP, name, namespace)
    return obj


async def events(client: FakeClient) -> list[Object]:
    from manager.scheme import GroupVersionKind

    found: list[Object] = await client.list(GroupVersionKind("", "v1", "Event"))
    return found
