"""Paged LISTs read ahead: the next page is asked for as soon as a page's continue token is read
from its first bytes, so the API server serves it while the client decodes and transforms this
one (the 100,000-Pod start-up waited for each page in turn, docs/scale.md).

The stand-in API server runs on a thread and loop of its own, so it answers while the client's
loop is busy, as a real one does."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from aiohttp import web

from manager.client import Client, Gone, RestTransport
from manager.client.client import peek_continue
from manager.client.restmapper import RESTMapper, RESTMapping
from manager.config import RestConfig
from manager.scheme import GroupVersionKind

GVK = GroupVersionKind("", "v1", "Pod")
MAPPING = RESTMapping(GVK, "pods", True)
PAGES = 4


def page_body(number: int, *, pages: int = PAGES, layout: str = "apiserver") -> bytes:
    """Page ``number`` (0-based) of a PodList of two pods a page, as the API server writes it:
    kind, apiVersion, the list's metadata, then the items."""
    meta: dict[str, Any] = {"resourceVersion": "42"}
    if number + 1 < pages:
        meta["continue"] = f"token-{number + 1}"
    items = [{"metadata": {"name": f"p{number}-{i}", "namespace": "ns"}} for i in range(2)]
    if layout == "items-first":
        return json.dumps({"items": items, "metadata": meta}, separators=(",", ":")).encode()
    body = {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": items}
    if layout == "indented":
        return json.dumps(body, indent=2).encode()
    return json.dumps(body, separators=(",", ":")).encode()


class ThreadedApiServer:
    """Serves PodList pages from its own thread; records each LIST's continue token on arrival."""

    def __init__(self, *, layout: str = "apiserver", gone_at: int | None = None) -> None:
        self.layout = layout
        self.gone_at = gone_at
        self.arrived: list[str | None] = []
        self.lock = threading.Lock()
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="api-server", daemon=True)

    def seen(self) -> list[str | None]:
        with self.lock:
            return list(self.arrived)

    async def _handle(self, request: web.Request) -> web.Response:
        token = request.query.get("continue")
        with self.lock:
            self.arrived.append(token)
        number = int(token.removeprefix("token-")) if token else 0
        if self.gone_at is not None and number == self.gone_at:
            self.gone_at = None  # once: the retried list from scratch gets through
            status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410}
            return web.json_response(
                status | {"reason": "Expired", "message": "continue expired"}, status=410
            )
        return web.Response(body=page_body(number, layout=self.layout), content_type="application/json")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def serve() -> None:
            app = web.Application()
            app.router.add_get("/api/v1/namespaces/ns/pods", self._handle)
            runner = web.AppRunner(app, shutdown_timeout=0.1)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
            self._stop = asyncio.Event()
            self._ready.set()
            await self._stop.wait()
            await runner.cleanup()

        self._loop.run_until_complete(serve())

    def __enter__(self) -> ThreadedApiServer:
        self._thread.start()
        assert self._ready.wait(10), "the stand-in API server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[ThreadedApiServer]:
    with ThreadedApiServer(**getattr(request, "param", {})) as running:
        yield running


ALL_NAMES = [f"p{n}-{i}" for n in range(PAGES) for i in range(2)]


@contextlib.asynccontextmanager
async def client_of(server: ThreadedApiServer) -> AsyncIterator[Client]:
    transport = RestTransport(RestConfig(host=server.url))
    mapper = RESTMapper(transport)
    mapper.add(MAPPING)
    try:
        yield Client(transport, mapper)
    finally:
        await transport.aclose()


async def names_listed(server: ThreadedApiServer) -> list[str]:
    async with client_of(server) as client:
        items, _ = await client.list_raw(GVK, namespace="ns", limit=2)
    assert items[0]["kind"] == "Pod" and items[0]["apiVersion"] == "v1"
    return [i["metadata"]["name"] for i in items]


def wait_for(condition: Any, seconds: float) -> bool:
    """Blocks the caller's thread (as decoding a page does) until ``condition()`` or the deadline."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.005)
    return False


def test_the_continue_token_is_read_from_the_first_bytes() -> None:
    assert peek_continue(page_body(0)) == "token-1"
    assert peek_continue(page_body(0, layout="indented")) == "token-1"
    assert peek_continue(page_body(PAGES - 1)) is None  # the last page: no continue
    assert (
        peek_continue(b' {"kind":"PodList","apiVersion":"v1","metadata":{"continue":"a\\u003cb"},"items":[]}')
        == "a<b"
    )
    # another layout is not guessed at: the caller decodes the page first
    assert peek_continue(page_body(0, layout="items-first")) is None
    assert peek_continue(b'{"kind":"PodList","metadata":{"continue":"x"') is None
    assert peek_continue(b"") is None


async def test_the_next_page_is_asked_for_while_this_one_is_transformed(server: ThreadedApiServer) -> None:
    asked_ahead: dict[int, bool] = {}

    def transform(item: dict[str, Any]) -> str:
        name = item["metadata"]["name"]
        number = int(name[1 : name.index("-")])
        if name.endswith("-0") and number + 1 < PAGES:
            # still on this page: has the API server been asked for the next one already?
            asked_ahead[number] = wait_for(lambda: f"token-{number + 1}" in server.seen(), 5.0)
        return str(name)

    async with client_of(server) as client:
        items, rv = await client.list_raw(GVK, namespace="ns", limit=2, transform=transform)
    assert items == ALL_NAMES and rv == "42"
    assert asked_ahead == dict.fromkeys(range(PAGES - 1), True), asked_ahead
    assert server.seen() == [None, "token-1", "token-2", "token-3"]


@pytest.mark.parametrize("server", [{"layout": "items-first"}], indirect=True)
async def test_pages_of_another_layout_are_still_listed_one_after_the_other(
    server: ThreadedApiServer,
) -> None:
    assert await names_listed(server) == ALL_NAMES
    assert server.seen() == [None, "token-1", "token-2", "token-3"]


@pytest.mark.parametrize("server", [{"gone_at": 2}], indirect=True)
async def test_an_expired_continue_token_on_a_page_read_ahead_lists_again_from_scratch(
    server: ThreadedApiServer,
) -> None:
    assert await names_listed(server) == ALL_NAMES
    assert server.seen() == [None, "token-1", "token-2", None, "token-1", "token-2", "token-3"]


async def test_a_failing_transform_leaves_no_page_request_behind(server: ThreadedApiServer) -> None:
    def transform(item: dict[str, Any]) -> str:
        raise ValueError(f"cannot keep {item['metadata']['name']}")

    async with client_of(server) as client:
        before = asyncio.all_tasks()
        with pytest.raises(ValueError, match="cannot keep p0-0"):
            await client.list_raw(GVK, namespace="ns", limit=2, transform=transform)
        assert asyncio.all_tasks() == before  # the page read ahead was cancelled and awaited


async def test_a_first_page_refused_gone_is_raised(server: ThreadedApiServer) -> None:
    server.gone_at = 0
    async with client_of(server) as client:
        with pytest.raises(Gone):
            await client.list_raw(GVK, namespace="ns", limit=2, resource_version="7")
