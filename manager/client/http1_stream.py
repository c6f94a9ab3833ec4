"""One streamed answer (a watch) over an HTTP/1.1 connection of its own, cut into lines as it arrives.

The API server writes a watch as one chunked answer, an event per line, and flushes each event
on its own: a watch's cost is the cost per small read. aiohttp's client spends ~50 us of CPU on
each such read (a payload parser, a stream reader, a timer re-armed per read, an async iterator
per chunk); this stream, on the same llhttp parser as the unary pool (``manager.client.http1``),
~30 us, most of it the event loop's own wake-up (docs/bench.md, "Watches on their own HTTP/1.1
connection").

As aiohttp did for the watches: reading pauses while more than ``HIGH_WATER`` bytes of lines wait
for the reader (memory stays bounded however slow the informer), and a connection that ends
after the answer began is the stream's end, whatever the reason (the caller watches again from
its last resourceVersion). ``inactivity_timeout`` fails the stream when no byte arrives for that
long, counted only while reading (a paused stream waits for its reader, not the server); one
timer checks it, re-armed from the last read rather than at every read.
"""

from __future__ import annotations

import asyncio
import zlib
from collections import deque
from collections.abc import AsyncIterator
from typing import cast

import httptools

from manager.client.http1 import ConnectionLost, Http1Pool

HIGH_WATER = 1 << 18
"""Bytes of lines waiting for the reader at which reading pauses (it resumes at half)."""


class _StreamConnection(asyncio.Protocol):
    """The connection and what has arrived on it: the head, then the body's lines."""

    def __init__(self, loop: asyncio.AbstractEventLoop, inactivity_timeout: float | None) -> None:
        self.loop = loop
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.head: asyncio.Future[None] = loop.create_future()
        self.status = 0
        self.headers: dict[str, str] = {}
        self.lines: deque[bytes] = deque()
        self.pending = 0  # bytes in ``lines``
        self.partial = b""  # the start of a line still arriving
        self.whole: list[bytes] | None = None  # the body kept whole (an error answer)
        self.unzip: zlib._Decompress | None = None
        self.ended = False
        self.error: Exception | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.paused = False
        self.inactivity_timeout = inactivity_timeout
        self.last_read = loop.time()
        self.timer: asyncio.TimerHandle | None = None

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.last_read = self.loop.time()
        if self.inactivity_timeout:
            self.timer = self.loop.call_at(self.last_read + self.inactivity_timeout, self._check_activity)

    def data_received(self, data: bytes) -> None:
        self.last_read = self.loop.time()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as err:
            self._fail(ConnectionLost(f"malformed answer: {err}"))

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if not self.head.done():
            reason = f"connection closed: {exc!r}" if exc else "connection closed by the server"
            self.head.set_exception(ConnectionLost(reason))
        self._end()

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        if self.headers.get("content-encoding") == "gzip":
            self.unzip = zlib.decompressobj(wbits=31)
        if self.status >= 300:
            self.whole = []
        if not self.head.done():
            self.head.set_result(None)

    def on_body(self, body: bytes) -> None:
        if self.unzip is not None:
            try:
                body = self.unzip.decompress(body)
            except zlib.error as err:
                self._fail(ConnectionLost(f"malformed gzip body: {err}"))
                return
        if self.whole is not None:
            self.whole.append(body)
            return
        if self.partial:
            body = self.partial + body
        start = 0
        lines = self.lines
        while (newline := body.find(b"\n", start)) >= 0:
            line = body[start:newline]
            start = newline + 1
            if line.strip():
                lines.append(line)
                self.pending += len(line)
        self.partial = body[start:]
        if self.pending >= HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        unzip, self.unzip = self.unzip, None
        if unzip is not None:
            self.on_body(unzip.flush())
        if self.partial.strip():  # a last line without its newline
            self.lines.append(self.partial)
            self.pending += len(self.partial)
        self.partial = b""
        self._end()
        if self.transport is not None:
            self.transport.close()  # a watch's connection serves nothing after it

    # ours

    def _end(self) -> None:
        self.ended = True
        self._wake()

    def _fail(self, err: Exception) -> None:
        if self.error is None:
            self.error = err
        if not self.head.done():
            self.head.set_exception(err)
        self.close()
        self._wake()

    def _wake(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _check_activity(self) -> None:
        self.timer = None
        if self.ended or self.inactivity_timeout is None:
            return
        now = self.loop.time()
        if self.paused:
            self.last_read = now  # waiting for our reader, not for the server
        elif now - self.last_read >= self.inactivity_timeout:
            self._fail(TimeoutError(f"no data for {self.inactivity_timeout}s"))
            return
        self.timer = self.loop.call_at(self.last_read + self.inactivity_timeout, self._check_activity)

    def resume_when_drained(self) -> None:
        """Paused: resume reading once the reader took half the backlog."""
        if self.pending <= HIGH_WATER // 2 and self.transport is not None:
            self.paused = False
            self.last_read = self.loop.time()
            self.transport.resume_reading()

    def arrival(self) -> asyncio.Future[None]:
        """A future done when something more arrives (a line, the end, an error)."""
        self.waiter = self.loop.create_future()
        return self.waiter

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if not self.head.done():
            self.head.cancel()  # nobody waits for it any more
        if self.transport is not None:
            self.transport.abort()


class Http1Stream:
    """A streamed GET on its own connection; use as an async context manager (it closes the
    connection, wherever the reader stopped)."""

    def __init__(self, conn: _StreamConnection) -> None:
        self._conn = conn

    @property
    def status(self) -> int:
        return self._conn.status

    @property
    def headers(self) -> dict[str, str]:
        """Lower-cased names; a repeated header keeps its last value."""
        return self._conn.headers

    @property
    def backlog(self) -> int:
        """Bytes of lines arrived and not yet read."""
        return self._conn.pending

    async def body(self) -> bytes:
        """The whole body of an answer that is not a success (2xx answers come as ``lines``)."""
        conn = self._conn
        while not conn.ended and conn.error is None:
            await conn.arrival()
        return b"".join(conn.whole or ())

    async def lines(self) -> AsyncIterator[bytes]:
        """The body's non-blank lines, as they arrive, until the answer or the connection ends;
        raises ``TimeoutError`` after ``inactivity_timeout`` without a byte, ``ConnectionLost``
        on a body that is not HTTP."""
        conn = self._conn
        lines = conn.lines
        while True:
            while lines:
                line = lines.popleft()
                conn.pending -= len(line)
                if conn.paused:
                    conn.resume_when_drained()
                yield line
            if conn.error is not None:
                raise conn.error
            if conn.ended:
                return
            await conn.arrival()

    def close(self) -> None:
        self._conn.close()

    async def __aenter__(self) -> Http1Stream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


async def open_stream(
    pool: Http1Pool,
    target: str,
    headers: dict[str, str],
    *,
    inactivity_timeout: float | None = None,
) -> Http1Stream:
    """GET ``target`` from ``pool``'s server on a new connection and return once the answer's
    head arrived. Raises ``OSError`` or ``ConnectionLost`` when the exchange fails before it,
    ``TimeoutError`` when no connection is made in ``pool.connect_timeout`` or no head arrives
    within ``inactivity_timeout``."""
    conn = await pool.connect(lambda: _StreamConnection(pool.loop, inactivity_timeout))
    try:
        assert conn.transport is not None
        conn.transport.write(pool.encode("GET", target, headers, None))
        await conn.head
    except BaseException:
        conn.close()
        raise
    return Http1Stream(conn)
