"""The reflector reads a resource's state as a watch-list (client-go v0.35+'s default): one watch
with ``sendInitialEvents``, every object as ADDED, a bookmark annotated
``k8s.io/initial-events-end``, then the changes on the same connection. A server that refuses it or
ends the stream before that bookmark is read with a paged LIST instead."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from local_http import initial_events, serving_client

from manager.cache.informer import SharedInformer
from manager.client import Client
from manager.client.restmapper import RESTMapping
from manager.scheme import GroupVersionKind
from manager.testing.eventually import eventually

GVK = GroupVersionKind("example.com", "v1", "Widget")
MAPPING = RESTMapping(GVK, "widgets", True)


def widget(name: str, rv: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv},
        "spec": {"size": len(name)},
    }


class Server:
    """``mode``: ``stream`` serves watch-lists as kube-apiserver does (``compacted``: and ends every
    watch from resourceVersion 15 with 410 Gone); ``refuse`` answers them 422
    as a server with the WatchList feature off; ``ignore`` treats them as plain watches (ADDED
    events, no bookmark, then the stream ends), as a server that does not know the parameter."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.state = [widget("a", "5"), widget("b", "7")]  # the ADDED events' RVs are the objects'
        self.rv = "20"
        self.queries: list[dict[str, str]] = []
        self.changes: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        self.queries.append(query)
        if query.get("watch") != "true":
            return web.json_response({"items": self.state, "metadata": {"resourceVersion": "30"}})
        if query.get("sendInitialEvents") == "true" and self.mode == "refuse":
            status = {"kind": "Status", "status": "Failure", "reason": "Invalid", "code": 422,
                      "message": "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"}  # fmt: skip
            return web.json_response(status, status=422)
        resp = web.StreamResponse()
        await resp.prepare(request)
        if self.mode == "compacted" and query.get("resourceVersion") == "15":
            gone = {"kind": "Status", "status": "Failure", "reason": "Expired", "code": 410,
                    "message": "too old resource version: 15 (19)"}  # fmt: skip
            await resp.write(json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n")
            return resp
        if query.get("sendInitialEvents") == "true":
            if self.mode == "ignore":
                for item in [widget("x", "3"), *self.state]:
                    await resp.write(json.dumps({"type": "ADDED", "object": item}).encode() + b"\n")
                return resp
            await resp.write(initial_events(self.state, self.rv))
        while True:
            await resp.write(json.dumps(await self.changes.get()).encode() + b"\n")


@pytest.fixture
async def served(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Server, Client]]:
    server = Server(request.param)
    async with serving_client(server.handle, MAPPING) as client:
        yield server, client


class Seen:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, bool]] = []

    def on_add(self, o: dict[str, Any], initial: bool) -> None:
        self.events.append(("add", o["metadata"]["name"], initial))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.events.append(("update", new["metadata"]["name"], False))

    def on_delete(self, o: dict[str, Any]) -> None:
        self.events.append(("delete", o["metadata"]["name"], False))


async def run_until_synced(informer: SharedInformer) -> asyncio.Task[None]:
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(informer.wait_for_sync(), 10)
    return task


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.mark.parametrize("served", ["stream"], indirect=True)
async def test_the_state_arrives_as_a_watch_list_and_the_same_watch_goes_on(
    served: tuple[Server, Client],
) -> None:
    server, client = served
    informer = SharedInformer(client, MAPPING)
    seen = Seen()
    informer.add_event_handler(seen)
    task = await run_until_synced(informer)
    try:
        assert sorted(informer.store.keys()) == ["ns/a", "ns/b"]
        assert seen.events == [("add", "a", True), ("add", "b", True)]
        reflector = informer.reflectors[0]
        # the bookmark's RV, not the last ADDED object's: a rewatch resumes after the snapshot
        assert reflector.last_resource_version == "20"
        (query,) = server.queries  # no LIST, no second watch
        assert query["sendInitialEvents"] == "true" and query["resourceVersionMatch"] == "NotOlderThan"
        assert query["allowWatchBookmarks"] == "true" and "resourceVersion" not in query
        await server.changes.put({"type": "MODIFIED", "object": widget("a", "21") | {"spec": {"size": 9}}})
        await server.changes.put({"type": "DELETED", "object": widget("b", "22")})
        await eventually(lambda: reflector.last_resource_version == "22", timeout=5)
        assert informer.store.get("ns/a")["spec"] == {"size": 9}  # type: ignore[index]
        assert informer.store.keys() == ["ns/a"]
        assert seen.events[2:] == [("update", "a", False), ("delete", "b", False)]
        assert len(server.queries) == 1 and reflector.streamed == 1 and reflector.lists == 0
    finally:
        await stop(task)


@pytest.mark.parametrize("served", ["stream"], indirect=True)
@pytest.mark.parametrize("compact", [False, True])
async def test_a_watch_list_is_transformed_object_by_object(
    served: tuple[Server, Client], compact: bool
) -> None:
    _, client = served
    calls: list[str] = []

    def slim(o: dict[str, Any]) -> dict[str, Any]:
        calls.append(o["metadata"]["name"])
        assert o["apiVersion"] == "example.com/v1" and o["kind"] == "Widget"  # set before the transform
        return {"metadata": o["metadata"]}

    informer = SharedInformer(client, MAPPING, transform=slim, compact_store=compact)
    task = await run_until_synced(informer)
    try:
        assert calls == ["a", "b"]  # once each: the store's replace does not transform again
        assert informer.store.get("ns/b") == {"metadata": widget("b", "7")["metadata"]}
    finally:
        await stop(task)


@pytest.mark.parametrize("served", ["refuse", "ignore"], indirect=True)
async def test_a_server_without_watch_list_is_listed_and_watched_from_the_list(
    served: tuple[Server, Client],
) -> None:
    server, client = served
    server.state = [widget("a", "5"), widget("c", "8")]
    informer = SharedInformer(client, MAPPING)
    seen = Seen()
    informer.add_event_handler(seen)
    task = await run_until_synced(informer)
    try:
        reflector = informer.reflectors[0]
        await eventually(lambda: len(server.queries) == 3, timeout=5)
        initial, listed, watch = server.queries
        assert initial.get("sendInitialEvents") == "true"
        assert listed.get("watch") is None and listed["limit"] == "500"
        # watched from the LIST's resourceVersion, as a plain watch
        assert watch["resourceVersion"] == "30" and "sendInitialEvents" not in watch
        assert sorted(informer.store.keys()) == ["ns/a", "ns/c"]
        # what an ignored watch-list streamed before it ended never reached the handlers
        assert seen.events == [("add", "a", True), ("add", "c", True)]
        assert (reflector.lists, reflector.streamed) == (1, 0)
    finally:
        await stop(task)


@pytest.mark.parametrize("served", ["compacted"], indirect=True)
async def test_a_watch_list_from_a_compacted_resource_version_reads_the_current_state(
    served: tuple[Server, Client],
) -> None:
    server, client = served
    informer = SharedInformer(client, MAPPING)
    reflector = informer.reflectors[0]
    reflector.last_resource_version = "15"  # a restarted reflector resumes its watch (F-IO-6)
    task = await run_until_synced(informer)
    try:
        resumed, again, fresh = server.queries
        assert resumed["resourceVersion"] == "15" and "sendInitialEvents" not in resumed
        # 410: the state is read again from the last resourceVersion, then, gone too, fresh
        assert again["resourceVersion"] == "15" and again["sendInitialEvents"] == "true"
        assert "resourceVersion" not in fresh and fresh["sendInitialEvents"] == "true"
        assert sorted(informer.store.keys()) == ["ns/a", "ns/b"]
        assert (reflector.expired, reflector.streamed, reflector.lists) == (2, 1, 0)
        assert reflector.last_resource_version == "20"
    finally:
        await stop(task)
