"""A watch's own HTTP/1.1 connection (manager/client/http1_stream.py, through ``RestTransport.stream``)
against a scripted server: lines cut anywhere by the network, error answers, the inactivity guard,
a connection lost mid-stream, back-pressure on a slow reader, gzip, and an early close."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Awaitable, Callable

import pytest

from manager.client import RestTransport, TransportError
from manager.client.errors import Forbidden
from manager.client.http1_stream import HIGH_WATER, open_stream
from manager.config import RestConfig

pytestmark = pytest.mark.asyncio

Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


END = b"0\r\n\r\n"


def event(name: str, kind: str = "ADDED") -> bytes:
    return json.dumps({"type": kind, "object": {"metadata": {"name": name}}}).encode()


class Server:
    """Reads one request head per connection, records it, and hands the connection to ``serve``."""

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.heads: list[bytes] = []
        self.gone = asyncio.Event()  # a write found the client gone

    async def __aenter__(self) -> Server:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.heads.append(await reader.readuntil(b"\r\n\r\n"))
        try:
            await self.serve(reader, writer)
        except ConnectionError:
            self.gone.set()
        finally:
            writer.close()


async def events(transport: RestTransport, **options: float) -> list[object]:
    return [e async for e in transport.stream("/api/v1/pods", params={"watch": True}, **options)]


async def test_lines_cut_anywhere_by_the_network_arrive_whole_and_in_order() -> None:
    async def serve(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = event("a") + b"\n" + event("b") + b"\n\n" + event("c") + b"\n" + event("d")
        writer.write(HEAD)
        # every chunk boundary falls inside a line, and one TCP write holds several chunks
        for start in range(0, len(body), 7):
            writer.write(chunk(body[start : start + 7]))
            if start % 21 == 0:
                await writer.drain()
                await asyncio.sleep(0.001)
        writer.write(END)
        await writer.drain()

    async with Server(serve) as server, RestTransport(RestConfig(host=server.url)) as transport:
        got = await events(transport)
    assert [e["object"]["metadata"]["name"] for e in got] == ["a", "b", "c", "d"]  # type: ignore[index]
    assert server.heads[0].startswith(b"GET /api/v1/pods?watch=true HTTP/1.1\r\n")
    assert b"\r\nAccept: application/json\r\n" in server.heads[0]


async def test_an_error_answer_is_its_api_error_with_the_servers_message() -> None:
    async def serve(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        status = json.dumps(
            {"kind": "Status", "code": 403, "reason": "Forbidden", "message": 'pods is forbidden: User "x"'}
        ).encode()
        writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\n")
        writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(status), status))
        await writer.drain()

    async with Server(serve) as server, RestTransport(RestConfig(host=server.url)) as transport:
        with pytest.raises(Forbidden, match='pods is forbidden: User "x"'):
            await events(transport)


async def test_a_silent_stream_times_out_after_what_arrived_was_read() -> None:
    async def serve(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(HEAD + chunk(event("first") + b"\n"))
        await writer.drain()
        await asyncio.sleep(30)

    async with Server(serve) as server, RestTransport(RestConfig(host=server.url)) as transport:
        got = []
        with pytest.raises(TimeoutError, match=r"watch /api/v1/pods: no data for 0.3s"):
            async for e in transport.stream("/api/v1/pods", inactivity_timeout=0.3):
                got.append(e)
    assert [e["object"]["metadata"]["name"] for e in got] == ["first"]


async def test_a_server_that_never_answers_times_out_as_a_silent_stream() -> None:
    async def serve(_: asyncio.StreamReader, __: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)

    async with Server(serve) as server, RestTransport(RestConfig(host=server.url)) as transport:
        with pytest.raises(TimeoutError, match="no connection or answer in time"):
            await events(transport, inactivity_timeout=0.3)


async def test_a_connection_lost_mid_stream_ends_it_after_the_whole_lines() -> None:
    async def serve(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(HEAD + chunk(event("a") + b"\n" + event("b")[:10]))
        await writer.drain()
        writer.transport.abort()  # mid-chunk, mid-line

    async with Server(serve) as server, RestTransport(RestConfig(host=server.url)) as transport:
        got = await events(transport)
    assert [e["object"]["metadata"]["name"] for e in got] == ["a"]  # type: ignore[index]


async def test_a_body_that_is_not_http_fails_the_stream() -> None:
    async def serve(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(HEAD + chunk(event("a") + b"\n") + b"zz\r\nnot a chunk\r\n")
        await writer.drain()
        await asyncio.sleep(30)

    async with Server(serve) as server, RestTransport(RestConfig(host=server.url)) as transport:
        got = []
        with pytest.raises(TransportError, match="malformed answer"):
            async for e in transport.stream("/api/v1/pods"):
                got.append(e)
    assert len(got) == 1


async def test_a_gzipped_stream_is_decoded() -> None:
    async def serve(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = gzip.compress(event("a") + b"\n" + event("b") + b"\n")
        writer.write(HEAD.replace(b"\r\n\r\n", b"\r\nContent-Encoding: gzip\r\n\r\n"))
        for start in range(0, len(body), 16):
            writer.write(chunk(body[start : start + 16]))
            await writer.drain()
        writer.write(END)
        await writer.drain()

    async with Server(serve) as server, RestTransport(RestConfig(host=server.url)) as transport:
        got = await events(transport)
    assert [e["object"]["metadata"]["name"] for e in got] == ["a", "b"]  # type: ignore[index]


async def test_a_slow_reader_pauses_the_connection_and_loses_nothing() -> None:
    line = b'{"type":"ADDED","object":{"pad":"' + b"x" * 1000 + b'"}}\n'
    total = (24 << 20) // len(line)  # more than the kernel buffers both ends hold
    written = 0

    async def serve(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal written
        writer.write(HEAD)
        for _ in range(total):
            writer.write(chunk(line))
            await writer.drain()
            written += 1
        writer.write(END)
        await writer.drain()

    async with Server(serve) as server, RestTransport(RestConfig(host=server.url)) as transport:
        stream = await open_stream(transport.pool, "/api/v1/pods?watch=true", {}, inactivity_timeout=0.3)
        async with stream:
            # nobody reads for longer than the inactivity timeout: the server is held back
            # (its writes wait), what waits here stays bounded, and no timeout fires
            await asyncio.sleep(1.0)
            assert stream.backlog <= HIGH_WATER + 256 * 1024, stream.backlog
            assert written < total, "the server wrote everything: reading never paused"
            got = [line async for line in stream.lines()]
    assert len(got) == total and written == total
    assert all(g == line.rstrip(b"\n") for g in got)


async def test_closing_the_stream_early_closes_its_connection() -> None:
    async def serve(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(HEAD)
        for i in range(10_000):
            writer.write(chunk(event(f"e{i}") + b"\n"))
            await writer.drain()
            await asyncio.sleep(0.001)

    async with Server(serve) as server, RestTransport(RestConfig(host=server.url)) as transport:
        async for e in transport.stream("/api/v1/pods"):
            assert e["object"]["metadata"]["name"] == "e0"
            break
        await asyncio.wait_for(server.gone.wait(), 5)  # the server's next writes fail


async def test_no_server_is_a_transport_error() -> None:
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    async with RestTransport(RestConfig(host=f"http://127.0.0.1:{port}")) as transport:
        with pytest.raises(TransportError, match=r"GET /api/v1/pods \(watch\)"):
            await events(transport)


async def test_a_body_that_is_not_the_gzip_it_says_fails_the_stream() -> None:
    async def serve(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(HEAD.replace(b"\r\n\r\n", b"\r\nContent-Encoding: gzip\r\n\r\n"))
        writer.write(chunk(event("a") + b"\n") + END)
        await writer.drain()

    async with Server(serve) as server, RestTransport(RestConfig(host=server.url)) as transport:
        with pytest.raises(TransportError, match="malformed gzip body"):
            await events(transport)


async def test_a_last_line_without_its_newline_is_read_and_leaves_no_backlog() -> None:
    async def serve(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(HEAD + chunk(event("a") + b"\n" + event("b")) + END)
        await writer.drain()

    async with (
        Server(serve) as server,
        RestTransport(RestConfig(host=server.url)) as transport,
        await open_stream(transport.pool, "/api/v1/pods?watch=true", {}) as stream,
    ):
        got = [json.loads(line)["object"]["metadata"]["name"] async for line in stream.lines()]
        assert stream.backlog == 0
    assert got == ["a", "b"]
