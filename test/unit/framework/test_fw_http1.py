"""The unary requests' HTTP/1.1 pool (manager/client/http1.py) against a scripted server: keep-alive
reuse, the connection limit, chunked and gzipped answers, and what happens when a connection dies
at each point of an exchange."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Awaitable, Callable

import pytest

from manager.client.http1 import ConnectionLost, Http1Pool

pytestmark = pytest.mark.asyncio

Reply = Callable[[int, bytes, asyncio.StreamWriter], Awaitable[bool]]
"""(connection number, request head, writer) -> keep the connection open."""


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = asyncio.get_running_loop().time() + 5
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within 5 s: {what}")
        await asyncio.sleep(0.005)


class Server:
    """Reads each request (head and Content-Length body) and lets ``reply`` answer it; records every
    request with the number of the connection it came on."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.requests: list[tuple[int, bytes, bytes]] = []
        self.connections = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> Server:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for writer in self.writers:
            writer.close()
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                self.requests.append((number, head, body))
                if not await self.reply(number, head, writer):
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


def answer(body: bytes, *extra: str, status: str = "200 OK") -> bytes:
    headers = "".join(f"{h}\r\n" for h in extra)
    return f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n{headers}\r\n".encode() + body


async def echo_path(number: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
    path = head.split(b" ")[1]
    writer.write(answer(b'{"path": "%s", "conn": %d}' % (path, number)))
    return True


async def test_sequential_requests_share_one_connection_and_send_the_prefix_and_headers() -> None:
    async with Server(echo_path) as server:
        pool = Http1Pool(
            f"http://127.0.0.1:{server.port}/k8s/clusters/c1/", None, headers={"User-Agent": "ua"}
        )
        for i in range(3):
            got = await pool.request("GET", f"/api/v1/pods?limit={i}", {"Accept": "application/json"}, None)
            assert got.status == 200
            assert got.body == b'{"path": "/k8s/clusters/c1/api/v1/pods?limit=%d", "conn": 1}' % i
        posted = await pool.request("POST", "/api/v1/x", {"Content-Type": "application/json"}, b'{"a":1}')
        assert posted.status == 200
        await pool.aclose()
    assert server.connections == 1 and pool.connections_made == 1
    head, body = server.requests[-1][1], server.requests[-1][2]
    assert head.startswith(b"POST /k8s/clusters/c1/api/v1/x HTTP/1.1\r\n")
    for header in (b"Host: 127.0.0.1:%d" % server.port, b"User-Agent: ua", b"Content-Length: 7"):
        assert header in head.split(b"\r\n")
    assert body == b'{"a":1}'


async def test_no_more_connections_than_the_limit_and_every_request_answered() -> None:
    async def slow(number: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.01)
        return await echo_path(number, head, writer)

    async with Server(slow) as server:
        pool = Http1Pool(f"http://127.0.0.1:{server.port}", None, limit=3)
        answers = await asyncio.gather(*(pool.request("GET", f"/r/{i}", {}, None) for i in range(20)))
        await pool.aclose()
    assert [a.status for a in answers] == [200] * 20
    assert [a.body.split(b'"')[3] for a in answers] == [b"/r/%d" % i for i in range(20)]
    assert server.connections == 3


async def test_chunked_and_gzipped_answers_arrive_whole_with_lower_cased_headers() -> None:
    payload = b'{"items": [' + b",".join(b'{"n": %d}' % i for i in range(5000)) + b"]}"
    packed = gzip.compress(payload)

    async def chunked_gzip(number: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Encoding: gzip\r\nRetry-After: 3\r\n\r\n"
        )
        for start in range(0, len(packed), 1000):
            piece = packed[start : start + 1000]
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        return True

    async with Server(chunked_gzip) as server:
        pool = Http1Pool(f"http://127.0.0.1:{server.port}", None)
        got = await pool.request("GET", "/big", {}, None)
        again = await pool.request("GET", "/big", {}, None)
        await pool.aclose()
    assert got.body == payload and again.body == payload
    assert got.headers["retry-after"] == "3"
    assert server.connections == 1


async def test_an_idle_connection_the_server_closed_is_not_written_to() -> None:
    async def once(number: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        await echo_path(number, head, writer)
        await writer.drain()
        return False  # answers, then closes the connection as an idle timeout would

    async with Server(once) as server:
        pool = Http1Pool(f"http://127.0.0.1:{server.port}", None)
        await pool.request("GET", "/a", {}, None)
        await until(lambda: pool.idle == 0, "the server's close reaches the pool")
        got = await pool.request("POST", "/b", {}, b"{}")
        await pool.aclose()
    assert got.body == b'{"path": "/b", "conn": 2}'
    assert [(n, h.split(b" ")[:2]) for n, h, _ in server.requests] == [
        (1, [b"GET", b"/a"]),
        (2, [b"POST", b"/b"]),
    ]


async def scripted_drop() -> tuple[Server, Http1Pool]:
    """A server whose first connection dies, unanswered, on its second request."""

    async def reply(number: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        if number == 1 and len(server.requests) == 2:
            return False  # the second request: read, then the connection dies, nothing answered
        return await echo_path(number, head, writer)

    server = Server(reply)
    await server.__aenter__()
    return server, Http1Pool(f"http://127.0.0.1:{server.port}", None)


async def test_a_get_whose_reused_connection_dies_unanswered_is_sent_once_more() -> None:
    server, pool = await scripted_drop()
    try:
        await pool.request("GET", "/first", {}, None)
        got = await pool.request("GET", "/second", {}, None)
    finally:
        await pool.aclose()
        await server.__aexit__()
    assert got.body == b'{"path": "/second", "conn": 2}'
    assert [(n, h.split(b" ")[1]) for n, h, _ in server.requests] == [
        (1, b"/first"),
        (1, b"/second"),
        (2, b"/second"),
    ]


async def test_a_post_whose_connection_dies_unanswered_fails_and_is_not_sent_twice() -> None:
    server, pool = await scripted_drop()
    try:
        await pool.request("GET", "/first", {}, None)
        with pytest.raises(ConnectionLost):
            await pool.request("POST", "/create", {}, b"{}")
        later = await pool.request("GET", "/later", {}, None)
    finally:
        await pool.aclose()
        await server.__aexit__()
    assert [h.split(b" ")[1] for _, h, _ in server.requests] == [b"/first", b"/create", b"/later"]
    assert later.body == b'{"path": "/later", "conn": 2}'


async def test_a_request_cancelled_mid_answer_closes_its_connection() -> None:
    release = asyncio.Event()

    async def stall_first(number: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        if head.split(b" ")[1] == b"/stall":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{")  # part of an answer
            await release.wait()
            writer.write(b"x" * 99)  # the rest arrives late: must not become the next answer
            return True
        return await echo_path(number, head, writer)

    async with Server(stall_first) as server:
        pool = Http1Pool(f"http://127.0.0.1:{server.port}", None)
        stalled = asyncio.ensure_future(pool.request("GET", "/stall", {}, None))
        await until(lambda: len(server.requests) == 1, "the server reads the request")
        stalled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stalled
        release.set()
        got = await pool.request("GET", "/next", {}, None)
        await pool.aclose()
    assert got.body == b'{"path": "/next", "conn": 2}'


async def test_connection_close_in_an_answer_is_honoured() -> None:
    async def closing(number: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        path = head.split(b" ")[1]
        writer.write(answer(b'{"path": "%s", "conn": %d}' % (path, number), "Connection: close"))
        return True  # the server would keep it: the pool still must not reuse it

    async with Server(closing) as server:
        pool = Http1Pool(f"http://127.0.0.1:{server.port}", None)
        first = await pool.request("GET", "/a", {}, None)
        second = await pool.request("GET", "/b", {}, None)
        await pool.aclose()
    assert (first.body, second.body) == (b'{"path": "/a", "conn": 1}', b'{"path": "/b", "conn": 2}')


async def test_an_answer_that_is_not_http_fails_the_request() -> None:
    async def garbage(number: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        return True

    async with Server(garbage) as server:
        pool = Http1Pool(f"http://127.0.0.1:{server.port}", None)
        with pytest.raises(ConnectionLost, match="malformed answer"):
            await pool.request("GET", "/a", {}, None)
        await pool.aclose()


async def test_no_server_is_an_os_error_and_a_header_with_a_line_break_is_refused() -> None:
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    pool = Http1Pool(f"http://127.0.0.1:{port}", None)
    with pytest.raises(OSError):
        await pool.request("GET", "/a", {}, None)
    with pytest.raises(ValueError, match="'Authorization' holds a line break"):
        await pool.request("GET", "/a", {"Authorization": "Bearer t\r\nX-Injected: 1"}, None)
    await pool.aclose()


async def test_at_the_limit_a_waiter_gets_a_freed_connection_or_a_closed_ones_slot() -> None:
    gate = asyncio.Event()

    async def gated(number: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        path = head.split(b" ")[1]
        if path == b"/slow":
            await gate.wait()
        if path == b"/closing":
            writer.write(answer(b'{"path": "/closing"}', "Connection: close"))
            return False
        return await echo_path(number, head, writer)

    async with Server(gated) as server:
        pool = Http1Pool(f"http://127.0.0.1:{server.port}", None, limit=1)
        slow = asyncio.ensure_future(pool.request("GET", "/slow", {}, None))
        await until(lambda: len(server.requests) == 1, "the server reads the slow request")
        abandoned = asyncio.ensure_future(pool.request("GET", "/never", {}, None))
        waiting = asyncio.ensure_future(pool.request("GET", "/after-slow", {}, None))
        await until(lambda: pool.waiting == 2, "both wait for the only connection")
        abandoned.cancel()  # a waiter that gives up leaves its place to the next
        gate.set()
        assert (await slow).status == 200
        assert (await waiting).body == b'{"path": "/after-slow", "conn": 1}'
        # the only connection closes after its answer: the next request opens another in its slot
        closing = asyncio.ensure_future(pool.request("GET", "/closing", {}, None))
        queued = asyncio.ensure_future(pool.request("GET", "/queued", {}, None))
        assert (await closing).body == b'{"path": "/closing"}'
        assert (await asyncio.wait_for(queued, 5)).body == b'{"path": "/queued", "conn": 2}'
        await pool.aclose()
    assert abandoned.cancelled()
    assert [h.split(b" ")[1] for _, h, _ in server.requests] == [
        b"/slow",
        b"/after-slow",
        b"/closing",
        b"/queued",
    ]
