"""Unary requests to the API server over a pool of HTTP/1.1 keep-alive connections.

Each request is written in one piece on an idle connection and its answer parsed by llhttp
(httptools) as it arrives. This is the part of aiohttp's client the API server's unary requests
need, without the per-request machinery they do not (URL objects, header multidicts, cookie,
proxy, redirect and trace hooks, a response object and a stream per answer): measured against
envtest, a POST cost aiohttp's client ~270 us of CPU and costs this pool ~110 (docs/bench.md,
"The API requests' own HTTP client"). Watches take a connection of their own from ``connect``
(``manager.client.http1_stream``).

As Go's transport: idle connections are reused most recent first; a connection the server closed
while idle is never written to; an idempotent request whose reused connection dies before any
byte of the answer is sent once more on a new one, any other failure is the caller's
(``ConnectionLost``); a request abandoned mid-answer (cancelled, timed out) closes its connection,
whose state is then unknown.
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from collections import deque
from collections.abc import Callable
from typing import NamedTuple, TypeVar, cast
from urllib.parse import urlsplit

import httptools

# RFC 9110: a request a server may receive twice with the effect of once
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})

P = TypeVar("P", bound=asyncio.BaseProtocol)


class ConnectionLost(ConnectionError):
    """The connection ended, or spoke no HTTP, before the whole answer arrived."""


class Answer(NamedTuple):
    status: int
    headers: dict[str, str]
    """Lower-cased names; a repeated header keeps its last value."""
    body: bytes
    """Decompressed when the server gzipped it."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection: at most one request in flight, its answer parsed on arrival."""

    def __init__(self, pool: Http1Pool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[Answer] | None = None
        self.headers: dict[str, str] = {}
        self.body: list[bytes] = []
        self.answered = False  # a byte of the current answer arrived
        self.keep_alive = True
        self.closed = False
        self.reused = False

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a write transport, whatever its class (uvloop's are not asyncio.Transport subclasses)
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.waiter is None:  # nothing asked: a server speaking out of turn is not trusted again
            self.close()
            return
        self.answered = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as err:
            self._fail(ConnectionLost(f"malformed answer: {err}"))
            self.close()

    def eof_received(self) -> bool:
        return False  # close the transport: a half-closed connection serves no further request

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool._forget(self)
        self._fail(
            ConnectionLost(f"connection closed: {exc!r}" if exc else "connection closed by the server")
        )

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        body = b"".join(self.body)
        headers, self.headers, self.body = self.headers, {}, []
        if headers.get("content-encoding") == "gzip":
            body = zlib.decompress(body, wbits=31)
        self.keep_alive = self.parser.should_keep_alive()
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(Answer(self.parser.get_status_code(), headers, body))

    # ours

    def send(self, data: bytes) -> asyncio.Future[Answer]:
        assert self.transport is not None
        self.waiter = self.pool.loop.create_future()
        self.answered = False
        self.transport.write(data)
        return self.waiter

    def _fail(self, err: Exception) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(err)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class Http1Pool:
    """Up to ``limit`` connections to the server of ``url`` (``https`` with ``ssl_context``, or
    ``http``); a path in ``url`` prefixes every request's. Made and used on one loop."""

    def __init__(
        self,
        url: str,
        ssl_context: ssl.SSLContext | None,
        *,
        limit: int = 100,
        connect_timeout: float = 30.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        parts = urlsplit(url)
        self.https = parts.scheme == "https"
        if not parts.hostname:
            raise ValueError(f"server URL {url!r} names no host")
        self.hostname = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        self.ssl_context = (ssl_context or ssl.create_default_context()) if self.https else None
        self.limit = limit
        self.connect_timeout = connect_timeout
        host = parts.netloc.rpartition("@")[2]
        fixed = {"Host": host, **(headers or {})}
        self._fixed = "".join(f"{k}: {_value(k, v)}\r\n" for k, v in fixed.items())
        self.loop = asyncio.get_running_loop()
        self._idle: deque[_Connection] = deque()
        self._all: set[_Connection] = set()
        self._open = 0
        self._waiters: deque[asyncio.Future[_Connection | None]] = deque()
        self._closed = False
        self.connections_made = 0  # observability and tests

    @property
    def idle(self) -> int:
        """Connections open and free."""
        return len(self._idle)

    @property
    def waiting(self) -> int:
        """Requests waiting for a connection (the pool at its limit)."""
        return sum(1 for waiter in self._waiters if not waiter.done())

    async def request(self, method: str, target: str, headers: dict[str, str], body: bytes | None) -> Answer:
        """Send ``method target`` (``target``: path and query) with ``headers`` and ``body``;
        return the whole answer. Raises ``ConnectionLost`` or ``OSError`` when the exchange
        fails, ``TimeoutError`` when no connection is made in time."""
        data = self.encode(method, target, headers, body)
        conn = await self._acquire()
        try:
            return await self._exchange(conn, data)
        except ConnectionLost:
            if not (conn.reused and not conn.answered and method in IDEMPOTENT):
                raise
        # the server dropped a reused connection as we wrote to it: once more on a fresh one
        conn = await self._acquire(fresh=True)
        return await self._exchange(conn, data)

    def encode(self, method: str, target: str, headers: dict[str, str], body: bytes | None) -> bytes:
        """The request as written on the wire: the pool's fixed headers, then ``headers``."""
        head = [f"{method} {self.prefix}{target} HTTP/1.1\r\n", self._fixed]
        for name, value in headers.items():
            head.append(f"{name}: {_value(name, value)}\r\n")
        if body is not None:
            head.append(f"Content-Length: {len(body)}\r\n")
        head.append("\r\n")
        return "".join(head).encode("latin-1") + (body or b"")

    async def connect(self, protocol: Callable[[], P]) -> P:
        """A new connection to the pool's server speaking ``protocol``, outside the pool (a
        watch holds its own for as long as it lasts); ``TimeoutError`` past ``connect_timeout``."""
        async with asyncio.timeout(self.connect_timeout):
            _, made = await self.loop.create_connection(
                protocol,
                self.hostname,
                self.port,
                ssl=self.ssl_context,
                server_hostname=self.hostname if self.https else None,
            )
        return made

    async def _exchange(self, conn: _Connection, data: bytes) -> Answer:
        try:
            answer = await conn.send(data)
        except BaseException:
            conn.close()  # abandoned or failed mid-exchange: what the connection holds is unknown
            raise
        if conn.keep_alive and not conn.closed:
            self._release(conn)
        else:
            conn.close()
        return answer

    async def _acquire(self, *, fresh: bool = False) -> _Connection:
        while True:
            # a fresh connection when there is room for one; at the limit, whatever is idle
            while self._idle and (not fresh or self._open >= self.limit):
                conn = self._idle.pop()  # most recently used: the least likely to be timed out
                if not conn.closed and conn.transport is not None and not conn.transport.is_closing():
                    conn.reused = True
                    return conn
            if self._closed:
                raise ConnectionLost("the pool is closed")
            if self._open < self.limit:
                break
            handed = await self._wait_for_connection()
            if handed is not None:
                handed.reused = True
                return handed
            # a connection closed: its slot is free, unless another request took it first
        self._open += 1
        try:
            protocol = await self.connect(lambda: _Connection(self))
        except BaseException:
            self._open -= 1
            self._hand_slot()
            raise
        self.connections_made += 1
        self._all.add(protocol)
        return protocol

    async def _wait_for_connection(self) -> _Connection | None:
        """Wait for a request to finish (its connection, handed over) or a connection to close
        (None: a slot to open one in)."""
        waiter: asyncio.Future[_Connection | None] = self.loop.create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                handed = waiter.result()
                if handed is not None:
                    self._release(handed)  # handed over as we were cancelled: pass it on
                else:
                    self._hand_slot()
            raise

    def _release(self, conn: _Connection) -> None:
        """A connection is free again: to the first waiter, else to the idle list."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        self._idle.append(conn)

    def _forget(self, conn: _Connection) -> None:
        """``conn`` closed (either side): its slot frees up."""
        if conn not in self._all:
            return  # its create_connection failed, and gave its slot back there
        self._all.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)
        self._open -= 1
        self._hand_slot()

    def _hand_slot(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # no connection to hand over: open one
                return

    async def aclose(self) -> None:
        """Close every connection; requests in flight fail with ``ConnectionLost``."""
        self._closed = True
        for conn in list(self._all):
            conn.close()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(ConnectionLost("the pool is closed"))
        self._waiters.clear()
        await asyncio.sleep(0)  # let the transports report their end


def _value(name: str, value: str) -> str:
    if "\r" in value or "\n" in value:
        raise ValueError(f"header {name!r} holds a line break")
    return value
