"""Informers and the cache against a real kube-apiserver: events, reconnects, 410 relists."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from manager.cache.cache import Cache, ResourceNotCached
from manager.cache.informer import SharedInformer
from manager.client import NotFound
from manager.cluster import Cluster
from manager.envtest import Environment
from manager.scheme import GroupVersionKind
from manager.testing.eventually import eventually

WIDGET = GroupVersionKind("envtest.example.com", "v1", "Widget")
CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.envtest.example.com"


def widget(name: str, namespace: str, size: int = 3) -> dict[str, object]:
    return {
        "apiVersion": "envtest.example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "w"}},
        "spec": {"size": size},
    }


class Recorder:
    """An event handler that writes down what it is told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []

    def on_add(self, obj: dict[str, Any], is_in_initial_list: bool) -> None:
        self.events.append(("add", obj["metadata"]["name"], is_in_initial_list))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.events.append(("update", new["metadata"]["name"], new.get("spec", {}).get("size")))

    def on_delete(self, obj: dict[str, Any]) -> None:
        self.events.append(("delete", obj["metadata"]["name"], None))

    def names(self, kind: str) -> list[str]:
        return [name for k, name, _ in self.events if k == kind]


@pytest.fixture
async def running_cache(cluster: Cluster) -> AsyncIterator[Cache]:
    started = asyncio.Event()
    task = asyncio.create_task(cluster.cache.start(started))
    yield cluster.cache
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_informer_sees_add_update_delete_and_strips_managed_fields(
    cluster: Cluster, widgets_crd: None, namespace: str, running_cache: Cache
) -> None:
    c = cluster.api_reader
    await c.create(widget("before", namespace))
    informer = await running_cache.get_informer(WIDGET)
    assert await running_cache.wait_for_cache_sync(30)
    rec = Recorder()
    informer.add_event_handler(rec)
    assert ("add", "before", True) in rec.events  # replay for a late handler

    created = await c.create(widget("w1", namespace))
    await eventually(lambda: "w1" in rec.names("add"))
    created["spec"]["size"] = 6
    await c.update(created)
    await eventually(lambda: ("update", "w1", 6) in rec.events)
    await c.delete(created)
    await eventually(lambda: "w1" in rec.names("delete"))

    cached = await cluster.client.get(WIDGET, "before", namespace)
    assert "managedFields" not in cached["metadata"]
    cached["spec"]["size"] = 9  # a copy: the store is unaffected
    again = await running_cache.get(WIDGET, "before", namespace)
    assert again["spec"]["size"] == 3
    with pytest.raises(NotFound):
        await cluster.client.get(WIDGET, "w1", namespace)


async def test_cache_list_selectors_and_field_index(
    cluster: Cluster, widgets_crd: None, namespace: str, running_cache: Cache
) -> None:
    c = cluster.api_reader
    for i, size in enumerate([1, 2, 2]):
        obj = widget(f"w{i}", namespace, size)
        obj["metadata"]["labels"] = {"tier": "a" if i else "b", "app": "w"}  # type: ignore[index]
        await c.create(obj)
    await running_cache.index_field(WIDGET, "spec.size", lambda o: [str(o["spec"]["size"])])
    assert await running_cache.wait_for_cache_sync(30)
    client = cluster.client

    async def listed(**kw: Any) -> list[str]:
        return [o["metadata"]["name"] for o in await client.list(WIDGET, namespace=namespace, **kw)]

    await eventually(lambda: _len_is(listed(), 3))
    assert await listed(label_selector="tier=a") == ["w1", "w2"]
    assert await listed(label_selector="tier in (a,b),tier!=a") == ["w0"]
    assert await listed(label_selector={"tier": "b"}) == ["w0"]
    assert await listed(field_selector={"spec.size": "2"}) == ["w1", "w2"]
    assert await listed(field_selector={"spec.size": "2"}, label_selector="!tier") == []
    everywhere = await client.list(WIDGET, field_selector={"spec.size": "1"})
    assert [o["metadata"]["name"] for o in everywhere if o["metadata"]["namespace"] == namespace] == ["w0"]
    with pytest.raises(ResourceNotCached):
        await client.get(CONFIGMAP, "kube-root-ca.crt", namespace)
    # The live reader is not limited to cached kinds.
    assert await cluster.client.api_reader.list(CONFIGMAP, namespace=namespace) is not None


async def _len_is(names: Any, n: int) -> bool:
    return len(await names) == n


async def test_watch_reconnects_after_server_ends_stream(
    cluster: Cluster, widgets_crd: None, namespace: str
) -> None:
    """A 1-2 s server-side watch timeout closes the stream over and over; nothing is missed."""
    mapping = await cluster.mapper.mapping(WIDGET)
    informer = SharedInformer(cluster.api_reader, mapping, namespaces=[namespace], min_watch_timeout=1)
    rec = Recorder()
    informer.add_event_handler(rec)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.wait_for_sync(), 30)
        reflector = informer.reflectors[0]
        for i in range(6):
            await cluster.api_reader.create(widget(f"r{i}", namespace))
            # let at least one stream end between creations
            watches = reflector.watches
            await eventually(lambda w=watches: reflector.watches > w, timeout=10)  # type: ignore[misc]
        await eventually(lambda: sorted(rec.names("add")) == [f"r{i}" for i in range(6)])
        assert reflector.syncs == 1  # reconnects resumed from the last resourceVersion
        assert reflector.streamed == 1  # the state came as a watch-list (a real API server serves it)
        assert reflector.watches >= 7
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _compact_etcd(etcd_url: str) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{etcd_url}/v3/kv/range", json={"key": "AA=="}) as r:
            revision = (await r.json())["header"]["revision"]
        async with session.post(
            f"{etcd_url}/v3/kv/compaction", json={"revision": revision, "physical": True}
        ) as r:
            assert r.status == 200, await r.text()


async def _reinitialise_widget_storage(control_plane: Environment, column: str) -> None:
    """Changing a CRD makes the apiserver rebuild that resource's storage and watch cache,
    which drops every open watch (what an apiserver restart does to one resource)."""
    status, crd = await control_plane.request("GET", CRD_PATH)
    assert status == 200
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = [
        {"name": column, "type": "integer", "jsonPath": ".spec.size"}
    ]
    status, body = await control_plane.request("PUT", CRD_PATH, crd)
    assert status == 200, body


async def test_expired_watch_relists_and_synthesises_missed_changes(
    cluster: Cluster, control_plane: Environment, widgets_crd: None, namespace: str
) -> None:
    c = cluster.api_reader
    for name in ("keep", "change", "gone"):
        await c.create(widget(name, namespace))
    mapping = await cluster.mapper.mapping(WIDGET)
    informer = SharedInformer(c, mapping, namespaces=[namespace])
    rec = Recorder()
    informer.add_event_handler(rec)
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(informer.wait_for_sync(), 30)
    # Disconnect, then change things while nobody watches.
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    rec.events.clear()
    await c.delete(widget("gone", namespace))
    changed = await c.get(WIDGET, "change", namespace)
    changed["spec"]["size"] = 8
    await c.update(changed)
    await c.create(widget("new", namespace))
    await _reinitialise_widget_storage(control_plane, "Size")
    await _compact_etcd(control_plane.etcd_url)

    task = asyncio.create_task(informer.run())
    try:
        reflector = informer.reflectors[0]
        await eventually(lambda: reflector.syncs >= 2, timeout=60)
        assert reflector.expired >= 1  # the resumed watch was told 410 Gone
        await eventually(
            lambda: (
                sorted(rec.events, key=str)
                == sorted([("delete", "gone", None), ("update", "change", 8), ("add", "new", False)], key=str)
            )
        )
        assert sorted(informer.store.keys()) == sorted(f"{namespace}/{n}" for n in ("keep", "change", "new"))
        # and it keeps watching afterwards
        await c.create(widget("after", namespace))
        await eventually(lambda: "after" in rec.names("add"), timeout=30)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_live_informer_converges_through_storage_reinitialisation(
    cluster: Cluster, control_plane: Environment, widgets_crd: None, namespace: str
) -> None:
    c = cluster.api_reader
    mapping = await cluster.mapper.mapping(WIDGET)
    informer = SharedInformer(c, mapping, namespaces=[namespace])
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.wait_for_sync(), 30)
        for i in range(5):
            await c.create(widget(f"c{i}", namespace, size=1 + i))
        await _reinitialise_widget_storage(control_plane, "Sz")
        await c.delete(widget("c0", namespace))
        for i in range(5, 8):
            await c.create(widget(f"c{i}", namespace))

        async def converged() -> bool:
            live = {
                o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                for o in await c.list(WIDGET, namespace=namespace)
            }
            cached = {
                o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.store.values()
            }
            return live == cached

        await eventually(converged, timeout=60)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_namespaced_and_label_scoped_cache(cluster: Cluster, widgets_crd: None, kube: Any) -> None:
    """default_namespaces gives one watch per namespace; a ByObject label selector is applied
    server-side, and an object whose labels stop matching leaves the cache as a delete."""
    from kubernetes_asyncio import client as k8s

    from manager.cache.cache import ByObject, CacheOptions

    core = k8s.CoreV1Api(kube)
    names = [f"scoped-{i}-{asyncio.get_running_loop().time():.0f}".replace(".", "") for i in range(3)]
    for name in names:
        await core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    try:
        watched, also, ignored = names
        c = cluster.api_reader
        cache = Cache(
            c,
            CacheOptions(
                default_namespaces=[watched, also], by_object={WIDGET: ByObject(label_selector="app=w")}
            ),
        )
        informer = await cache.get_informer(WIDGET)
        rec = Recorder()
        informer.add_event_handler(rec)
        started = asyncio.Event()
        task = asyncio.create_task(cache.start(started))
        try:
            await asyncio.wait_for(started.wait(), 30)
            assert len(informer.reflectors) == 2
            await c.create(widget("a", watched))
            await c.create(widget("b", also))
            await c.create(widget("c", ignored))
            unlabelled = widget("d", watched)
            unlabelled["metadata"]["labels"] = {"app": "other"}  # type: ignore[index]
            await c.create(unlabelled)
            await eventually(lambda: sorted(rec.names("add")) == ["a", "b"])
            listed = await cache.list(WIDGET)
            assert sorted((o["metadata"]["namespace"], o["metadata"]["name"]) for o in listed) == sorted(
                [(watched, "a"), (also, "b")]
            )
            assert [o["metadata"]["name"] for o in await cache.list(WIDGET, namespace=also)] == ["b"]
            relabel = await c.get(WIDGET, "a", watched)
            relabel["metadata"]["labels"] = {"app": "gone"}
            await c.update(relabel)
            await eventually(lambda: "a" in rec.names("delete"))
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    finally:
        for name in names:
            await core.delete_namespace(name)


async def test_compact_cache_serves_the_same_reads(
    cluster: Cluster, widgets_crd: None, namespace: str
) -> None:
    from manager.cache.cache import CacheOptions

    c = cluster.api_reader
    cache = Cache(c, CacheOptions(compact_store=True))
    await cache.index_field(WIDGET, "spec.size", lambda o: [str(o["spec"]["size"])])
    started = asyncio.Event()
    task = asyncio.create_task(cache.start(started))
    try:
        await asyncio.wait_for(started.wait(), 30)
        await c.create(widget("c1", namespace, size=2))
        await c.create(widget("c2", namespace, size=3))

        async def both() -> bool:
            return len(await cache.list(WIDGET, namespace=namespace)) == 2

        await eventually(both)
        by_size = await cache.list(WIDGET, namespace=namespace, field_selector={"spec.size": "3"})
        assert [o["metadata"]["name"] for o in by_size] == ["c2"]
        got = await cache.get(WIDGET, "c1", namespace)
        assert "managedFields" not in got["metadata"] and got["spec"]["color"] == "red"
        got["spec"]["size"] = 10  # a private copy
        assert (await cache.get(WIDGET, "c1", namespace))["spec"]["size"] == 2
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
