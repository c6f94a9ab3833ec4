"""The HTTP layer against a tiny in-process server: error mapping, 429 retries, metrics,
discovery, paging, watch stream parsing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from local_http import serving

import manager.metrics.client  # noqa: F401  (registers the client metrics on REGISTRY)
from manager.client import (
    AlreadyExists,
    ApiError,
    Client,
    Conflict,
    Gone,
    Invalid,
    NotFound,
    RestTransport,
    TooManyRequests,
    TransportError,
)
from manager.client.errors import Forbidden, InternalError
from manager.client.metrics import requests_count
from manager.client.ratelimit import QPSLimiter
from manager.client.restmapper import NoKindMatch, RESTMapper
from manager.config import RestConfig
from manager.metrics.registry import REGISTRY
from manager.scheme import GroupVersionKind


def status(code: int, reason: str, message: str, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
        **extra,
    }


class FakeServer:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, str]]] = []
        self.throttle = 0
        self.discovery_calls = 0
        self.has_gadgets = False

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.calls.append((request.method, request.path, dict(request.query)))
        path = request.path
        if path == "/apis/example.com/v1":
            self.discovery_calls += 1
            resources = [
                {"name": "widgets", "kind": "Widget", "namespaced": True},
                {"name": "widgets/status", "kind": "Widget", "namespaced": True},
            ]
            if self.has_gadgets:
                resources.append({"name": "gadgets", "kind": "Gadget", "namespaced": False})
            return web.json_response({"resources": resources})
        if path == "/apis/missing.com/v1":
            return web.json_response(
                status(404, "NotFound", "the server could not find the requested resource"), status=404
            )
        if path == "/slow":
            await asyncio.sleep(float(request.query.get("seconds", "30")))
            return web.json_response({"slow": True})
        if path.endswith("/throttled"):
            if self.throttle > 0:
                self.throttle -= 1
                return web.json_response(
                    status(429, "TooManyRequests", "slow down"), status=429, headers={"Retry-After": "0"}
                )
            return web.json_response({"ok": True})
        if path.endswith("/widgets") and request.method == "GET" and request.query.get("watch") == "true":
            resp = web.StreamResponse()
            await resp.prepare(request)
            await resp.write(
                b'{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}}\n{"type":"BOOK'
            )
            await resp.write(b'MARK","object":{"metadata":{"resourceVersion":"6"}}}\n')
            await resp.write(
                b'{"type":"ERROR","object":'
                + __import__("json").dumps(status(410, "Expired", "too old resource version: 1 (6)")).encode()
                + b"}\n"
            )
            return resp
        if path.endswith("/widgets") and request.method == "GET":
            token = request.query.get("continue", "")
            page = int(token or 0)
            items = [{"metadata": {"name": f"w{page * 2 + i}"}} for i in range(2)]
            more = page < 2
            return web.json_response(
                {
                    "items": items,
                    "metadata": {"resourceVersion": "42", "continue": str(page + 1) if more else ""},
                }
            )
        errors = {
            "/notfound": (404, status(404, "NotFound", 'widgets "x" not found')),
            "/exists": (409, status(409, "AlreadyExists", "already exists")),
            "/conflict": (409, status(409, "Conflict", "the object has been modified")),
            "/invalid": (
                422,
                status(
                    422,
                    "Invalid",
                    "bad",
                    details={
                        "causes": [
                            {"field": "spec.size", "message": "too big", "reason": "FieldValueInvalid"}
                        ]
                    },
                ),
            ),
            "/gone": (410, status(410, "Expired", "too old")),
            "/forbidden": (403, status(403, "Forbidden", "no")),
            "/plain500": (500, None),
        }
        if path in errors:
            code, body = errors[path]
            if body is None:
                return web.Response(status=code, text="oops")
            return web.json_response(body, status=code)
        return web.json_response({"path": path})


@pytest.fixture
async def server() -> AsyncIterator[tuple[FakeServer, RestTransport]]:
    fake = FakeServer()
    async with serving(fake.app()) as url:
        transport = RestTransport(RestConfig(host=url))
        try:
            yield fake, transport
        finally:
            await transport.aclose()


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/notfound", NotFound),
        ("/exists", AlreadyExists),
        ("/conflict", Conflict),
        ("/invalid", Invalid),
        ("/gone", Gone),
        ("/forbidden", Forbidden),
        ("/plain500", InternalError),
    ],
)
async def test_error_mapping(
    server: tuple[FakeServer, RestTransport], path: str, error: type[ApiError]
) -> None:
    _, transport = server
    with pytest.raises(error) as raised:
        await transport.request("GET", path)
    assert type(raised.value) is error
    if error is Invalid:
        assert raised.value.causes[0]["field"] == "spec.size"
    if error is Conflict:
        assert not isinstance(raised.value, AlreadyExists)
    if path == "/plain500":
        assert raised.value.status_code == 500


async def test_429_is_retried_a_bounded_number_of_times(server: tuple[FakeServer, RestTransport]) -> None:
    fake, transport = server
    fake.throttle = 2
    assert await transport.request("GET", "/throttled") == {"ok": True}
    assert requests_count("429", "GET", transport.host) >= 2
    fake.throttle = 10
    with pytest.raises(TooManyRequests) as raised:
        await transport.request("GET", "/throttled")
    assert raised.value.retry_after == 0.0
    assert fake.throttle == 10 - (transport.max_429_retries + 1)


async def test_transport_error_when_nobody_listens() -> None:
    transport = RestTransport(RestConfig(host="http://127.0.0.1:1"))
    try:
        with pytest.raises(TransportError):
            await transport.request("GET", "/")
    finally:
        await transport.aclose()


async def test_a_request_past_its_deadline_fails_naming_it_and_the_others_go_on(
    server: tuple[FakeServer, RestTransport],
) -> None:
    """One timer serves every request in flight: the slow one gives up at its own deadline (the
    config's, or the request's ``timeout``), a quick one beside it is not disturbed, and an
    answer within the deadline is kept."""
    _, transport = server
    transport.config.timeout = 0.3
    loop = asyncio.get_running_loop()
    started = loop.time()
    slow = asyncio.create_task(transport.request("GET", "/slow", params={"seconds": 2}))
    longer = asyncio.create_task(transport.request("GET", "/slow", params={"seconds": 2}, timeout=0.8))
    assert await transport.request("GET", "/slow", params={"seconds": 0.05}) == {"slow": True}
    with pytest.raises(TransportError, match=r"GET /slow: no answer within 0.3s"):
        await slow
    assert 0.25 < loop.time() - started < 0.7
    with pytest.raises(TransportError, match=r"no answer within 0.8s"):
        await longer
    assert 0.75 < loop.time() - started < 1.3
    assert requests_count("<error>", "GET", transport.host) >= 2
    assert await transport.request("GET", "/ok") == {"path": "/ok"}, "the transport still works"
    assert transport._deadlines is not None and not transport._deadlines._due, "nothing left behind"


def test_a_transport_used_again_on_another_loop_keeps_its_deadlines() -> None:
    fake = FakeServer()
    transport = RestTransport(RestConfig(host="http://127.0.0.1:1", timeout=0.3))

    async def once() -> None:
        async with serving(fake.app(), shutdown_timeout=0.1) as url:
            transport.config.host = url
            try:
                with pytest.raises(TransportError, match=r"no answer within 0.3s"):
                    await transport.request("GET", "/slow", params={"seconds": 2})
            finally:
                await transport.aclose()

    asyncio.run(once())
    asyncio.run(once())


async def test_cancelling_a_request_is_a_cancellation_not_a_timeout(
    server: tuple[FakeServer, RestTransport],
) -> None:
    _, transport = server
    request = asyncio.create_task(transport.request("GET", "/slow", params={"seconds": 2}))
    await asyncio.sleep(0.1)
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    assert transport._deadlines is not None and not transport._deadlines._due


async def test_restmapper_discovers_lazily_and_refreshes_on_unknown_kind(
    server: tuple[FakeServer, RestTransport],
) -> None:
    fake, transport = server
    mapper = RESTMapper(transport)
    widget = await mapper.mapping(GroupVersionKind("example.com", "v1", "Widget"))
    assert (widget.plural, widget.namespaced) == ("widgets", True)
    assert widget.object_path("w", "ns", "status") == "/apis/example.com/v1/namespaces/ns/widgets/w/status"
    await mapper.mapping(GroupVersionKind("example.com", "v1", "Widget"))
    assert fake.discovery_calls == 1
    with pytest.raises(NoKindMatch):
        await mapper.mapping(GroupVersionKind("example.com", "v1", "Gadget"))
    fake.has_gadgets = True  # "the CRD got installed"
    gadget = await mapper.mapping(GroupVersionKind("example.com", "v1", "Gadget"))
    assert gadget.object_path("g", "ignored") == "/apis/example.com/v1/gadgets/g"
    with pytest.raises(NoKindMatch):
        await mapper.mapping(GroupVersionKind("missing.com", "v1", "X"))


async def test_paged_list_and_watch_stream(server: tuple[FakeServer, RestTransport]) -> None:
    fake, transport = server
    client = Client(transport, RESTMapper(transport))
    gvk = GroupVersionKind("example.com", "v1", "Widget")
    items, rv = await client.list_raw(gvk, namespace="ns", limit=2, label_selector={"a": "b"})
    assert [i["metadata"]["name"] for i in items] == [f"w{i}" for i in range(6)]
    assert rv == "42" and items[0]["kind"] == "Widget"
    list_calls = [q for m, p, q in fake.calls if p.endswith("/widgets")]
    assert [q.get("continue") for q in list_calls] == [None, "1", "2"]
    assert all(q["limit"] == "2" and q["labelSelector"] == "a=b" for q in list_calls)

    mapping = await client.mapper.mapping(gvk)
    seen = []
    with pytest.raises(Gone):
        async for event in client.watch(mapping, namespace="ns", resource_version="4", timeout_seconds=7):
            seen.append(event["type"])
    assert seen == ["ADDED", "BOOKMARK"]
    watch_query = next(q for m, p, q in fake.calls if q.get("watch"))
    assert watch_query["allowWatchBookmarks"] == "true" and watch_query["timeoutSeconds"] == "7"


async def test_qps_limiter() -> None:
    now = [0.0]
    bucket = QPSLimiter(qps=2, burst=3, clock=lambda: now[0])
    assert [bucket.try_acquire() for _ in range(4)] == [True, True, True, False]
    now[0] += 0.5
    assert bucket.try_acquire() and not bucket.try_acquire()
    now[0] += 100
    assert sum(bucket.try_acquire() for _ in range(10)) == 3
    real = QPSLimiter(qps=200, burst=1)
    loop = asyncio.get_running_loop()
    start = loop.time()
    for _ in range(5):
        await real.acquire()
    assert loop.time() - start >= 4 / 200 * 0.9
    with pytest.raises(ValueError):
        QPSLimiter(qps=0, burst=1)


async def test_client_side_qps_limit_spaces_requests(server: tuple[FakeServer, RestTransport]) -> None:
    _, unthrottled = server
    throttled = RestTransport(RestConfig(host=unthrottled.config.host, qps=50, burst=1))
    try:
        loop = asyncio.get_running_loop()
        start = loop.time()
        waited = REGISTRY.get_sample_value(
            "rest_client_rate_limiter_duration_seconds_sum", {"verb": "GET", "host": throttled.host}
        )
        # All at once, so the bucket (not the requests' own duration on a loaded machine) spaces
        # them: the k-th waits about k/50 s.
        await asyncio.gather(*(throttled.request("GET", "/anything") for _ in range(6)))
        assert loop.time() - start >= 5 / 50 * 0.9
        # client-go's throttling histogram shows the wait on the manager's registry
        labels = {"verb": "GET", "host": throttled.host}
        assert REGISTRY.get_sample_value("rest_client_rate_limiter_duration_seconds_count", labels) >= 6
        total = REGISTRY.get_sample_value("rest_client_rate_limiter_duration_seconds_sum", labels)
        assert total - (waited or 0) >= sum(k / 50 for k in range(1, 6)) * 0.8
    finally:
        await throttled.aclose()
