"""Deletions the client learns of first-hand hide the object from the cache until its watch
delivers the delete (docs/behaviour/framework.md D.8): a DELETE that went through, a write
answered NotFound for the object it names. The stand-in API server's watch delivers only what a
test sends it, so the cache lags the way a watch backing off after errors does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from local_http import open_watch, serving

from manager.cache import Cache
from manager.client import Client, RestTransport
from manager.client.errors import NotFound
from manager.client.interfaces import Preconditions
from manager.client.patch import Patch
from manager.client.restmapper import RESTMapper, RESTMapping
from manager.config import RestConfig
from manager.scheme import GroupVersionKind
from manager.testing.eventually import eventually

GVK = GroupVersionKind("example.com", "v1", "Widget")
MAPPING = RESTMapping(GVK, "widgets", True)


def widget(name: str, uid: str, rv: str = "3", **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv, **meta},
        "spec": {},
    }


def status_404(name: str) -> web.Response:
    return web.json_response(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "reason": "NotFound",
            "code": 404,
            "message": f'widgets.example.com "{name}" not found',
            "details": {"name": name, "group": "example.com", "kind": "widgets"},
        },
        status=404,
    )


class Api:
    """Lists ``listed``; the watch sends what ``events`` gets; DELETE answers ``delete_answer``
    (``None``: 404); PUT and PATCH answer 404 for the object (``write_missing``) or, with
    ``api_missing``, the 404 of an unknown path (no object named)."""

    def __init__(self) -> None:
        self.listed = [widget("a", "uid-a"), widget("b", "uid-b")]
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.delete_answer: tuple[int, dict[str, Any]] | None = None
        self.api_missing = False

    async def get(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") == "true":
            resp = await open_watch(request, self.listed, "3")
            while True:
                event = await self.events.get()
                await resp.write(json.dumps(event).encode() + b"\n")
        return web.json_response({"items": self.listed, "metadata": {"resourceVersion": "3"}})

    async def delete(self, request: web.Request) -> web.Response:
        if self.delete_answer is None:
            return status_404(request.match_info["name"])
        code, body = self.delete_answer
        return web.json_response(body, status=code)

    async def write(self, request: web.Request) -> web.Response:
        if self.api_missing:
            return web.json_response(
                {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404,
                 "message": "the server could not find the requested resource", "details": {}},
                status=404,
            )  # fmt: skip
        return status_404(request.match_info["name"])


@pytest.fixture
async def setup() -> AsyncIterator[tuple[Api, Cache, Client]]:
    api = Api()
    app = web.Application()
    base = "/apis/example.com/v1/namespaces/ns/widgets/{name}"
    app.router.add_get("/{tail:.*}", api.get)
    app.router.add_delete(base, api.delete)
    app.router.add_put(base, api.write)
    app.router.add_put(base + "/status", api.write)
    app.router.add_patch(base, api.write)
    async with serving(app, shutdown_timeout=0.1) as url:
        transport = RestTransport(RestConfig(host=url))
        mapper = RESTMapper(transport)
        mapper.add(MAPPING)
        cache = Cache(Client(transport, mapper))
        await cache.get_informer(GVK)
        client = Client(transport, mapper, cache=cache)
        started = asyncio.Event()
        task = asyncio.create_task(cache.start(started))
        try:
            await asyncio.wait_for(started.wait(), 10)
            yield api, cache, client
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await transport.aclose()


async def names(client: Client) -> list[str]:
    return [o["metadata"]["name"] for o in await client.list(GVK, namespace="ns")]


async def test_a_delete_that_went_through_hides_the_object_until_its_watch_event(
    setup: tuple[Api, Cache, Client],
) -> None:
    api, cache, client = setup
    api.delete_answer = (
        200,
        {"kind": "Status", "status": "Success", "details": {"name": "a", "uid": "uid-a"}},
    )
    await client.delete(await client.get(GVK, "a", "ns"))
    with pytest.raises(NotFound):
        await client.get(GVK, "a", "ns")
    assert await names(client) == ["b"]
    # an event from before the delete (the watch is behind) does not bring it back
    api.events.put_nowait({"type": "MODIFIED", "object": widget("a", "uid-a", rv="4")})
    await eventually(lambda: cache._stored_uid(GVK, "ns/a") == "uid-a", timeout=10)
    with pytest.raises(NotFound):
        await client.get(GVK, "a", "ns")
    # the delete arrives; then a new object of that name is a new object
    api.events.put_nowait({"type": "DELETED", "object": widget("a", "uid-a", rv="5")})
    api.events.put_nowait({"type": "ADDED", "object": widget("a", "uid-a2", rv="6")})
    await eventually(lambda: cache._stored_uid(GVK, "ns/a") == "uid-a2", timeout=10)
    assert (await client.get(GVK, "a", "ns"))["metadata"]["uid"] == "uid-a2"
    assert await names(client) == ["a", "b"]


async def test_the_object_a_delete_answer_returns_hides_it_unless_it_is_still_terminating(
    setup: tuple[Api, Cache, Client],
) -> None:
    api, _, client = setup
    # a pending delete (finalizers, foreground, grace period): the object is still there
    pending = widget("a", "uid-a", deletionTimestamp="2026-12-05T08:00:00Z", finalizers=["x"])
    api.delete_answer = (200, pending)
    await client.delete(await client.get(GVK, "a", "ns"), propagation_policy="Foreground")
    assert (await client.get(GVK, "a", "ns"))["metadata"]["uid"] == "uid-a"
    # the removed object itself (custom resources answer with it)
    api.delete_answer = (200, widget("b", "uid-b"))
    await client.delete_by_name(GVK, "b", "ns")
    assert await names(client) == ["a"]


async def test_a_write_answered_not_found_for_the_object_hides_it(setup: tuple[Api, Cache, Client]) -> None:
    api, _, client = setup
    a = await client.get(GVK, "a", "ns")
    with pytest.raises(NotFound):
        await client.status.update(a)
    with pytest.raises(NotFound):
        await client.get(GVK, "a", "ns")
    # a 404 that names no object (a missing subresource or API) says nothing about the object
    api.api_missing = True
    b = await client.get(GVK, "b", "ns")
    with pytest.raises(NotFound):
        await client.update(b)
    assert await names(client) == ["b"]
    # a dry run changes nothing, whatever it is answered
    api.api_missing = False
    with pytest.raises(NotFound):
        await client.update(b, dry_run=True)
    assert await names(client) == ["b"]
    with pytest.raises(NotFound):
        await client.patch(b, Patch.merge({"spec": {"x": 1}}))
    assert await names(client) == []


async def test_a_delete_answered_not_found_hides_the_uid_it_named(setup: tuple[Api, Cache, Client]) -> None:
    _, _, client = setup
    with pytest.raises(NotFound):
        await client.delete_by_name(GVK, "a", "ns")  # no uid at hand: nothing to hide by
    assert await names(client) == ["a", "b"]
    with pytest.raises(NotFound):
        await client.delete_by_name(GVK, "a", "ns", preconditions=Preconditions(uid="uid-other"))
    assert await names(client) == ["a", "b"]  # another object's uid: this one stays
    with pytest.raises(NotFound):
        await client.delete_by_name(GVK, "a", "ns", preconditions=Preconditions(uid="uid-a"))
    assert await names(client) == ["b"]
