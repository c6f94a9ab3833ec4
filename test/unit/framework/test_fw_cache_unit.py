"""Cache behaviour that needs no real server: missing informers, not started, sync timeout,
lazy informers, and the periodic local resync."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from local_http import open_watch, serving_client

from manager.cache import Cache, CacheNotStarted, CacheOptions, CacheSyncTimeout, ResourceNotCached
from manager.cache.informer import SharedInformer
from manager.client import Client
from manager.client.restmapper import RESTMapping
from manager.scheme import GroupVersionKind
from manager.testing.eventually import eventually

GVK = GroupVersionKind("example.com", "v1", "Widget")
MAPPING = RESTMapping(GVK, "widgets", True)


class Api:
    """Lists one Widget, or fails every list with 500 when ``broken``; watches stay open."""

    def __init__(self) -> None:
        self.broken = False
        self.lists = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        initial = request.query.get("sendInitialEvents") == "true"
        if request.query.get("watch") != "true" or initial:
            self.lists += 1  # a LIST or a watch-list: the whole state read
            if self.broken:
                return web.json_response({"kind": "Status", "code": 500, "message": "etcd down"}, status=500)
        item = {"metadata": {"name": "w", "namespace": "ns", "resourceVersion": "3"}, "spec": {}}
        if request.query.get("watch") == "true":
            resp = await open_watch(request, [item], "3")
            await asyncio.sleep(3600)
            return resp
        return web.json_response({"items": [item], "metadata": {"resourceVersion": "3"}})


@pytest.fixture
async def api() -> AsyncIterator[tuple[Api, Client]]:
    fake = Api()
    async with serving_client(fake.handle, MAPPING) as client:
        yield fake, client


async def test_reads_need_an_informer_and_a_started_cache(api: tuple[Api, Client]) -> None:
    _, client = api
    cache = Cache(client)
    with pytest.raises(ResourceNotCached):
        await cache.get(GVK, "w", "ns")
    await cache.get_informer(GVK)
    with pytest.raises(CacheNotStarted):
        await cache.list(GVK)
    started = asyncio.Event()
    task = asyncio.create_task(cache.start(started))
    try:
        await asyncio.wait_for(started.wait(), 10)
        assert (await cache.get(GVK, "w", "ns"))["metadata"]["name"] == "w"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_lazy_informer_when_allowed(api: tuple[Api, Client]) -> None:
    _, client = api
    cache = Cache(client, CacheOptions(fail_on_missing_informer=False))
    started = asyncio.Event()
    task = asyncio.create_task(cache.start(started))
    try:
        await asyncio.wait_for(started.wait(), 10)
        got = await cache.list(GVK, namespace="ns")  # creates, starts and waits for the informer
        assert [o["metadata"]["name"] for o in got] == ["w"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_start_fails_when_caches_never_sync(api: tuple[Api, Client]) -> None:
    fake, client = api
    fake.broken = True
    cache = Cache(client, CacheOptions(sync_timeout=0.5))
    await cache.get_informer(GVK)
    with pytest.raises(CacheSyncTimeout):
        await asyncio.wait_for(cache.start(asyncio.Event()), 10)
    assert fake.lists >= 1


async def test_periodic_resync_redelivers_cached_objects(api: tuple[Api, Client]) -> None:
    _, client = api
    informer = SharedInformer(client, MAPPING, resync_period=0.05)
    updates: list[tuple[Any, Any]] = []

    class Handler:
        def on_add(self, obj: dict[str, Any], initial: bool) -> None:
            pass

        def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
            updates.append((old, new))

        def on_delete(self, obj: dict[str, Any]) -> None:
            pass

    informer.add_event_handler(Handler())
    task = asyncio.create_task(informer.run())
    try:
        await eventually(lambda: len(updates) >= 2, timeout=10, interval=0.02)
        assert all(old is new for old, new in updates)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_list_copies_unless_told_not_to(api: tuple[Api, Client]) -> None:
    """A list returns copies (a caller's edit leaves the cache alone); ``unsafe_disable_deep_copy``
    returns the cached objects themselves, through the cache and through the client."""
    _, client = api
    cache = Cache(client)
    await cache.get_informer(GVK)
    cached_client = Client(client.transport, client.mapper, cache=cache)
    started = asyncio.Event()
    task = asyncio.create_task(cache.start(started))
    try:
        await asyncio.wait_for(started.wait(), 10)
        copied = await cache.list(GVK, namespace="ns")
        copied[0]["spec"]["edited"] = True
        assert "edited" not in (await cache.get(GVK, "w", "ns"))["spec"]
        shared = await cache.list(GVK, namespace="ns", unsafe_disable_deep_copy=True)
        again = await cached_client.list(GVK, namespace="ns", unsafe_disable_deep_copy=True)
        assert shared[0] is again[0]
        assert (await cache.list(GVK))[0] is not shared[0]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_client_reads_through_its_cache_and_its_override(api: tuple[Api, Client]) -> None:
    """A client over a cache hands out copies (an edit leaves the cache alone); over a cache whose
    class has a ``get`` of its own, every read goes through that ``get``; the cache it reads is
    the one it was made with."""
    _, client = api

    class CountingCache(Cache):
        reads = 0

        async def get(self, kind: Any, name: str, namespace: str = "") -> Any:
            CountingCache.reads += 1
            return await super().get(kind, name, namespace)

    plain, counting = Cache(client), CountingCache(client)
    tasks = []
    try:
        for cache in (plain, counting):
            await cache.get_informer(GVK)
            started = asyncio.Event()
            tasks.append(asyncio.create_task(cache.start(started)))
            await asyncio.wait_for(started.wait(), 10)
        over_plain = Client(client.transport, client.mapper, cache=plain)
        read = await over_plain.get(GVK, "w", "ns")
        read["spec"]["edited"] = True
        assert "edited" not in (await over_plain.get(GVK, "w", "ns"))["spec"]
        over_counting = Client(client.transport, client.mapper, cache=counting)
        assert (await over_counting.get(GVK, "w", "ns"))["metadata"]["name"] == "w"
        assert CountingCache.reads == 1
        with pytest.raises(AttributeError):
            over_plain.cache = counting  # type: ignore[misc]
        assert over_plain.cache is plain
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
