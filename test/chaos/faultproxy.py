"""A fault-injecting HTTP proxy on loopback between controller-managers and kube-apiserver.

The managers get a kubeconfig whose server is ``http://127.0.0.1:<port>`` (no credentials);
the proxy forwards every request to the real API server over TLS as admin. While a
``FaultPlan`` is active each request draws one fault with the plan's probabilities (the first
requests after ``faults_on`` take each kind once, in a shuffled order, so a short window on a
quiet cluster still injects every kind the checks count):

* ``429``: answered ``429 Too Many Requests`` with ``Retry-After`` (a Status body, as the
  API server's max-in-flight filter answers);
* ``500``: answered ``500 InternalError``;
* ``drop``: the connection is closed without an answer -- half of them *after* the request
  was forwarded, so the write happened but the client never learns it (the nasty case);
* ``slow``: the answer is held for a few seconds.

Watches are streamed through event by event (never half an event: the API server writes each
whole); ``expire_watches`` ends every open watch with the ``ERROR`` event ``410 Gone`` the API
server sends when a watcher fell out of its cache window, and ``cut_watches`` just closes them.
Everything injected is counted in ``injected``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
from collections import Counter
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from aiohttp import web

_HOP = {"host", "content-length", "transfer-encoding", "connection", "content-encoding", "accept-encoding"}


@dataclass(frozen=True)
class FaultPlan:
    p_429: float = 0.08
    p_500: float = 0.05
    p_drop: float = 0.04
    p_slow: float = 0.08
    slow_seconds: tuple[float, float] = (1.0, 4.0)
    retry_after_seconds: int = 1


def _status(code: int, reason: str, message: str) -> bytes:
    return orjson.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
    )


class FaultProxy:
    def __init__(self, upstream: str, ssl_context: ssl.SSLContext | None, *, seed: int = 0) -> None:
        self.upstream = upstream.rstrip("/")
        self.ssl_context = ssl_context
        self.rng = random.Random(seed)
        self.plan: FaultPlan | None = None
        self._first: list[str] = []
        self.injected: Counter[str] = Counter()
        self.requests = 0
        self.upstream_errors = 0
        self._watches: set[web.StreamResponse] = set()
        self._watch_tasks: dict[web.StreamResponse, asyncio.Task[Any]] = {}
        self._reasons: dict[web.StreamResponse, str] = {}
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                ssl=self.ssl_context if self.ssl_context is not None else False, limit=0
            ),
            auto_decompress=True,
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[union-attr]
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        self.cut_watches()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def __aenter__(self) -> FaultProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- faults ------------------------------------------------------------------------------

    def faults_on(self, plan: FaultPlan) -> None:
        self.plan = plan
        self._first = [name for name, p in self._kinds(plan) if p > 0]
        self.rng.shuffle(self._first)

    def faults_off(self) -> None:
        self.plan = None
        self._first = []

    @staticmethod
    def _kinds(plan: FaultPlan) -> tuple[tuple[str, float], ...]:
        return (("429", plan.p_429), ("500", plan.p_500), ("drop", plan.p_drop), ("slow", plan.p_slow))

    def _draw(self) -> str | None:
        plan = self.plan
        if plan is None:
            return None
        if self._first:
            return self._first.pop()
        x = self.rng.random()
        for name, p in self._kinds(plan):
            if x < p:
                return name
            x -= p
        return None

    def expire_watches(self) -> int:
        """End every open watch with ``ERROR 410 Gone``; returns how many were expired."""
        n = 0
        for response, task in list(self._watch_tasks.items()):
            self._reasons[response] = "expire"
            task.cancel()
            n += 1
        self.injected["watch-410"] += n
        return n

    def cut_watches(self) -> int:
        n = 0
        for response, task in list(self._watch_tasks.items()):
            self._reasons[response] = "cut"
            task.cancel()
            n += 1
        return n

    # -- forwarding --------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        fault = self._draw()
        if fault == "429":
            self.injected["429"] += 1
            assert self.plan is not None
            return web.Response(
                status=429,
                body=_status(429, "TooManyRequests", "the server has received too many requests (chaos)"),
                content_type="application/json",
                headers={"Retry-After": str(self.plan.retry_after_seconds)},
            )
        if fault == "500":
            self.injected["500"] += 1
            return web.Response(
                status=500,
                body=_status(
                    500, "InternalError", "an error on the server (chaos) has prevented the request"
                ),
                content_type="application/json",
            )
        drop_after = False
        if fault == "drop":
            self.injected["drop"] += 1
            drop_after = self.rng.random() < 0.5
            if not drop_after:
                return self._drop(request)
        if fault == "slow":
            self.injected["slow"] += 1
            assert self.plan is not None
            await asyncio.sleep(self.rng.uniform(*self.plan.slow_seconds))
        if request.query.get("watch") in ("true", "1"):
            return await self._watch(request)
        return await self._forward(request, drop_after)

    def _drop(self, request: web.Request) -> web.StreamResponse:
        if request.transport is not None:
            request.transport.abort()
        return web.Response(status=499)  # never sent: aiohttp ignores the gone peer

    def _headers(self, request: web.Request) -> dict[str, str]:
        return {
            k: v for k, v in request.headers.items() if k.lower() not in _HOP and k.lower() != "authorization"
        }

    async def _forward(self, request: web.Request, drop_after: bool) -> web.StreamResponse:
        assert self._session is not None
        body = await request.read()
        try:
            async with self._session.request(
                request.method,
                self.upstream + request.rel_url.path_qs,
                data=body or None,
                headers=self._headers(request),
                timeout=aiohttp.ClientTimeout(total=120),
                allow_redirects=False,
            ) as upstream:
                payload = await upstream.read()
                headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP}
                status = upstream.status
        except (aiohttp.ClientError, TimeoutError):
            # API server down (a restart): the client sees a refused/reset connection, as it
            # would talking to the API server directly
            self.upstream_errors += 1
            return self._drop(request)
        if drop_after:
            return self._drop(request)
        return web.Response(status=status, body=payload, headers=headers)

    async def _watch(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        try:
            upstream_cm = self._session.get(
                self.upstream + request.rel_url.path_qs,
                headers=self._headers(request),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
            )
            upstream = await upstream_cm.__aenter__()
        except (aiohttp.ClientError, TimeoutError):
            self.upstream_errors += 1
            return self._drop(request)
        try:
            if upstream.status >= 300:
                payload = await upstream.read()
                headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP}
                return web.Response(status=upstream.status, body=payload, headers=headers)
            response = web.StreamResponse(status=upstream.status)
            response.content_type = upstream.headers.get("Content-Type", "application/json").split(";")[0]
            await response.prepare(request)
            pump = asyncio.create_task(self._pump(upstream, response))
            self._watch_tasks[response] = pump
            try:
                await self._await_pump(pump)
            finally:
                self._watch_tasks.pop(response, None)
            reason = self._reasons.pop(response, "end")
            if reason == "expire":
                event = {
                    "type": "ERROR",
                    "object": orjson.loads(_status(410, "Expired", "too old resource version (chaos)")),
                }
                # then end the response as the API server does: a dropped connection would
                # lose the event for a client that has not read it yet (aiohttp raises the
                # drop before the bytes it holds), and its watch would resume without a relist
                with contextlib.suppress(ConnectionError, RuntimeError):
                    await response.write(orjson.dumps(event) + b"\n")
                    await response.write_eof()
                return response
            if reason == "cut":
                if request.transport is not None:
                    request.transport.close()
                return response
            with contextlib.suppress(ConnectionError, RuntimeError):
                await response.write_eof()
            return response
        finally:
            with contextlib.suppress(Exception):
                await upstream_cm.__aexit__(None, None, None)

    @staticmethod
    async def _await_pump(pump: asyncio.Task[Any]) -> None:
        try:
            await asyncio.shield(pump)
        except asyncio.CancelledError:
            if pump.cancelled():  # by expire_watches/cut_watches, which noted why
                return
            pump.cancel()  # the handler itself is cancelled: the client went away
            raise

    @staticmethod
    async def _pump(upstream: aiohttp.ClientResponse, response: web.StreamResponse) -> None:
        """Forward the watch stream whole events at a time (one JSON line each).

        The API server writes every event whole and ends a watch only between events, but an
        event bigger than one read reaches the proxy in parts. Forwarding the parts as they
        came, an expiry that cancelled this between two of them wrote its ERROR event after
        half an event: the client read one undecodable line and relisted as after any watch
        failure, not after a 410 -- one expiry short in the harness's count. So the part of
        an event not yet complete stays here, and is dropped if the watch ends first.
        """
        pending = bytearray()
        try:
            async for chunk in upstream.content.iter_any():
                pending += chunk
                end = pending.rfind(b"\n") + 1
                if end:
                    whole = bytes(pending[:end])
                    del pending[:end]
                    await response.write(whole)
            if pending:  # the upstream ended normally on a last line without its newline
                await response.write(bytes(pending))
        except (aiohttp.ClientError, ConnectionError):
            return


class TcpForwarder:
    """A loopback TCP forwarder over several backends (as a Service over replicas): each new
    connection goes to the next backend that accepts it. Carries TLS through untouched."""

    def __init__(self, backends: list[int]) -> None:
        self.backends = backends
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._next = 0
        self._conns: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._conns):
            task.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        try:
            for i in range(len(self.backends)):
                port = self.backends[(self._next + i) % len(self.backends)]
                try:
                    up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
                except OSError:
                    continue
                self._next = (self._next + i + 1) % len(self.backends)
                await asyncio.gather(
                    _pipe(reader, up_writer), _pipe(up_reader, writer), return_exceptions=True
                )
                return
        finally:
            writer.close()
            self._conns.discard(task)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()
