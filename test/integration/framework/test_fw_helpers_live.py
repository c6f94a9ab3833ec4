"""Helpers on the real API server: conflict retry with a competing writer, typed models,
cache-backed client reads, events with de-duplication, controller references and GC."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from manager.cache.cache import Cache
from manager.client import Conflict
from manager.cluster import Cluster
from manager.controller_util import create_or_update, retry_on_conflict, set_controller_reference
from manager.scheme import GroupVersionKind
from manager.testing.eventually import eventually

CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")
EVENT = GroupVersionKind("", "v1", "Event")


class ObjectMeta(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    name: str
    namespace: str = ""
    resource_version: str | None = Field(default=None, alias="resourceVersion")
    labels: dict[str, str] | None = None


class ConfigMap(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    api_version: ClassVar[str] = "v1"
    kind: ClassVar[str] = "ConfigMap"
    metadata: ObjectMeta
    data: dict[str, str] | None = None


async def test_update_conflict_is_retried_to_success(cluster: Cluster, namespace: str) -> None:
    c = cluster.api_reader
    await c.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "counter", "namespace": namespace},
            "data": {"n": "0"},
        }
    )
    conflicts = 0

    async def increment() -> dict[str, Any]:
        nonlocal conflicts
        cm = await c.get(CONFIGMAP, "counter", namespace)
        await asyncio.sleep(0)  # let the other writers read the same version
        cm["data"]["n"] = str(int(cm["data"]["n"]) + 1)
        try:
            result: dict[str, Any] = await c.update(cm)
        except Conflict:
            conflicts += 1
            raise
        return result

    # Five concurrent read-modify-write loops on one object: without retries most would fail.
    from manager.controller_util import RetryBackoff

    await asyncio.gather(
        *(retry_on_conflict(increment, RetryBackoff(steps=20, duration=0.01, jitter=1.0)) for _ in range(5))
    )
    final = await c.get(CONFIGMAP, "counter", namespace)
    assert final["data"]["n"] == "5"
    assert conflicts >= 1  # the race really happened and was retried


async def test_typed_models_round_trip(cluster: Cluster, namespace: str) -> None:
    c = cluster.api_reader
    created = await c.create(
        ConfigMap(metadata=ObjectMeta(name="typed", namespace=namespace), data={"a": "1"})
    )
    assert isinstance(created, ConfigMap)
    assert created.metadata.resource_version
    fetched = await c.get(ConfigMap, "typed", namespace)
    assert isinstance(fetched, ConfigMap) and fetched.data == {"a": "1"}
    fetched.data = {"a": "2"}
    updated = await c.update(fetched)
    assert updated.data == {"a": "2"}
    listed = await c.list(ConfigMap, namespace=namespace)
    assert all(isinstance(x, ConfigMap) for x in listed)
    applied = await c.apply(
        ConfigMap(metadata=ObjectMeta(name="typed-ssa", namespace=namespace), data={"x": "y"}),
        field_owner="typed",
    )
    assert isinstance(applied, ConfigMap) and applied.data == {"x": "y"}


async def test_cache_backed_client_and_create_or_update(cluster: Cluster, namespace: str) -> None:
    cache: Cache = cluster.cache
    await cache.get_informer(CONFIGMAP)
    started = asyncio.Event()
    task = asyncio.create_task(cluster.start(started))
    try:
        await asyncio.wait_for(started.wait(), 30)
        desired = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cou", "namespace": namespace},
        }
        _, op = await create_or_update(cluster.api_reader, desired, lambda o: o.update(data={"k": "v"}))
        assert op == "created"

        async def cached() -> None:
            found = await _get_or_none(cluster, "cou", namespace)
            assert found is not None and found["data"] == {"k": "v"}

        await eventually(cached)  # the write reaches the cache through the watch
        _, op = await create_or_update(cluster.api_reader, desired, lambda o: o.update(data={"k": "v"}))
        assert op == "unchanged"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _get_or_none(cluster: Cluster, name: str, namespace: str) -> Any:
    from manager.client import NotFound

    try:
        return await cluster.client.get(CONFIGMAP, name, namespace)
    except NotFound:
        return None


async def test_events_are_recorded_and_deduplicated(cluster: Cluster, namespace: str) -> None:
    c = cluster.api_reader
    cm = await c.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "evt", "namespace": namespace}}
    )
    recorder = cluster.event_recorder("framework-test")
    for _ in range(3):
        await recorder.event(cm, "Normal", "Synced", "synced ok")
    await recorder.event(cm, "Warning", "Failed", "something broke")
    events = await c.list(EVENT, namespace=namespace)
    by_reason = {e["reason"]: e for e in events}
    assert set(by_reason) == {"Synced", "Failed"}
    assert by_reason["Synced"]["count"] == 3
    assert by_reason["Synced"]["involvedObject"]["uid"] == cm["metadata"]["uid"]
    assert by_reason["Failed"]["type"] == "Warning"


async def test_controller_reference_accepted_by_the_server(cluster: Cluster, namespace: str) -> None:
    c = cluster.api_reader
    owner = await c.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "own", "namespace": namespace}}
    )
    child = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kid", "namespace": namespace}}
    set_controller_reference(owner, child)
    created = await c.create(child)
    ref = created["metadata"]["ownerReferences"][0]
    assert (
        ref["controller"] is True
        and ref["blockOwnerDeletion"] is True
        and ref["uid"] == owner["metadata"]["uid"]
    )
