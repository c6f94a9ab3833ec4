"""The HTTP layer: one transport per API server, raw JSON in and out.

Every request goes through ``RestTransport.request`` so error mapping, the 429 retry policy,
client-side throttling and ``rest_client_requests_total`` live in one place; it is sent over the
transport's pool of HTTP/1.1 keep-alive connections (``http1.Http1Pool``). Watches use
``stream``, each on a connection of its own (``http1_stream``), which yields decoded watch events
line by line. The aiohttp session (absolute URLs: ``trainer.statusserver_v2_3``), the throttle and the
credentials belong to the loop that made them: a request from a guest loop (``manager.loops``,
the admission webhook server's) is sent from there; a watch is only opened on that loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from typing import TypedDict, Unpack
from urllib.parse import urlencode, urlsplit

import aiohttp
from prometheus_client import Counter

from manager import _json, loops
from manager.client import metrics
from manager.client.errors import ApiError, TooManyRequests, TransportError
from manager.client.http1 import ConnectionLost, Http1Pool
from manager.client.http1_stream import open_stream
from manager.client.ratelimit import QPSLimiter
from manager.config import RestConfig
from manager.meta.object import Json, json_kind

Params = Mapping[str, str | int | bool | None]


class RequestOptions(TypedDict, total=False):
    """What a request carries besides its method and path."""

    params: Params | None
    """The query (``None`` values are left out)."""
    body: object
    """Encoded as JSON (``content_type`` JSON unless another is named, e.g. a patch type)."""
    content_type: str | None
    timeout: float | None
    """Seconds for the whole request (default: the config's)."""


JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # HTTP-date form: the API server never sends it


def _encode_params(params: Params | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in (params or {}).items():
        if value is None:
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


def _target(path: str, params: Params | None) -> str:
    query = _encode_params(params)
    if not query:
        return path
    return f"{path}{'&' if '?' in path else '?'}{urlencode(query)}"


class _Deadlines:
    """The requests in flight on one loop and when each must give up, enforced by one timer set for
    the earliest deadline (aiohttp's per-request timeout arms and cancels a timer of its own on
    every request: 30 us of a 300 us POST, in a heap of cancelled timers). A request past its
    deadline is cancelled; ``expired`` tells its ``_send`` that the cancellation was ours."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._due: dict[asyncio.Task[object], float] = {}
        self._expired: set[asyncio.Task[object]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    def add(self, task: asyncio.Task[object], seconds: float) -> None:
        due = self.loop.time() + seconds
        self._due[task] = due
        if self._timer is None or due < self._timer_at:
            self._arm(due)

    def discard(self, task: asyncio.Task[object]) -> None:
        """``task``'s request is over (an expiry it did not ask about is forgotten too)."""
        self._due.pop(task, None)
        self._expired.discard(task)

    def expired(self, task: asyncio.Task[object]) -> bool:
        """Whether ``task`` was cancelled because its deadline passed (asked once)."""
        if task in self._expired:
            self._expired.discard(task)
            return True
        return False

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = self.loop.call_at(when, self._check), when

    def _check(self) -> None:
        self._timer = None
        now = self.loop.time()
        for task, due in list(self._due.items()):
            if due <= now:
                del self._due[task]
                self._expired.add(task)
                task.cancel()
        if self._due:
            self._arm(min(self._due.values()))


class RestTransport:
    """Owns the aiohttp session; ``aclose`` releases it (use as an async context manager).

    ``max_429_retries`` bounds how often a throttled request is retried after sleeping the
    server's ``Retry-After`` (capped by ``max_retry_after``); after that ``TooManyRequests``
    is raised with ``retry_after`` set so a caller can requeue.
    """

    def __init__(
        self,
        config: RestConfig,
        *,
        max_429_retries: int = 3,
        max_retry_after: float = 10.0,
    ) -> None:
        self.config = config
        self.host = urlsplit(config.host).netloc
        self.max_429_retries = max_429_retries
        self.max_retry_after = max_retry_after
        self._limiter = QPSLimiter(config.qps, config.burst) if config.qps else None
        self._session: aiohttp.ClientSession | None = None
        self._pool: Http1Pool | None = None
        self._series: dict[tuple[int | str, str], Counter] = {}
        self._deadlines: _Deadlines | None = None  # made on the session's loop

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # no context: the system's CAs, as the unary requests' pool (never unverified)
            connector = aiohttp.TCPConnector(ssl=self.config.ssl_context or True, limit=100)
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers={"User-Agent": self.config.user_agent},
                json_serialize=_json.dumps_str,
                # the API server sets no cookies: skip filtering a jar on every request
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self._session

    @property
    def pool(self) -> Http1Pool:
        """The unary requests' connections (watches go through ``session``), on the running loop."""
        return self._pool_on(asyncio.get_running_loop())

    def _pool_on(self, loop: asyncio.AbstractEventLoop) -> Http1Pool:
        pool = self._pool
        if pool is None or pool.loop is not loop:
            pool = self._pool = Http1Pool(
                self.config.host,
                self.config.ssl_context,
                limit=100,
                # as aiohttp sent them: the API server gzips an answer over 128 KiB (a list page)
                headers={"User-Agent": self.config.user_agent, "Accept-Encoding": "gzip"},
            )
        return pool

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None and pool.loop is asyncio.get_running_loop():
            await pool.aclose()  # a pool of another (ended) loop went with that loop's transports
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> RestTransport:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": JSON}
        if content_type:
            headers["Content-Type"] = content_type
        auth = await self.config.authorization()
        if auth:
            headers["Authorization"] = auth
        return headers

    def _count(self, code: int | str, method: str) -> None:
        series = self._series.get((code, method))
        if series is None:  # a labels() lookup per request was 3 us of every write
            series = metrics.REST_CLIENT_REQUESTS.labels(code=str(code), method=method, host=self.host)
            self._series[(code, method)] = series
        series.inc()

    async def _throttle(self, method: str) -> None:
        """Wait for the client-side token bucket (when ``qps`` is set) and record the wait."""
        if self._limiter is None:
            return
        start = time.monotonic()
        await self._limiter.acquire()
        metrics.REST_CLIENT_RATE_LIMITER_DURATION.labels(verb=method, host=self.host).observe(
            time.monotonic() - start
        )

    async def request(self, method: str, path: str, **options: Unpack[RequestOptions]) -> Json:
        """Send one request and return the decoded JSON object (``{}`` for an empty body); non-2xx
        raises an ``ApiError``, and so does a body that is not a JSON object (the API server
        answers every request with one)."""
        status, raw = await self._send(method, path, **options)
        return _object(raw, method, path, status)

    async def request_bytes(self, method: str, path: str, **options: Unpack[RequestOptions]) -> bytes:
        """``request`` without decoding: the 2xx answer's body as it came (a list page read while
        the previous one is decoded); non-2xx raises its ``ApiError``."""
        _, raw = await self._send(method, path, **options)
        return raw

    async def _send(self, method: str, path: str, **options: Unpack[RequestOptions]) -> tuple[int, bytes]:
        if loops.in_guest():
            return await loops.on_host(self._send(method, path, **options))
        params, body, timeout = options.get("params"), options.get("body"), options.get("timeout")
        content_type = options.get("content_type")
        data = _json.dumps(body) if body is not None else None
        if data is not None and content_type is None:
            content_type = JSON
        seconds = timeout or self.config.timeout
        attempt = 0
        while True:
            await self._throttle(method)
            headers = await self._headers(content_type)
            # the loop read once: each asyncio.get_running_loop() is a getpid() system call
            loop = asyncio.get_running_loop()
            task = asyncio.current_task(loop)
            deadlines = self._deadlines
            if deadlines is None or deadlines.loop is not loop:
                deadlines = self._deadlines = _Deadlines(loop)
            if task is not None and seconds:
                deadlines.add(task, seconds)
            try:
                answer = await self._pool_on(loop).request(method, _target(path, params), headers, data)
                self._count(answer.status, method)
                if answer.status < 300:
                    return answer.status, answer.body
                error = self._error(answer.status, answer.body, answer.headers.get("retry-after"))
            except (ConnectionLost, OSError, TimeoutError) as err:
                self._count("<error>", method)
                raise TransportError(f"{method} {path}: {err!r}") from err
            except asyncio.CancelledError:
                if task is None or not deadlines.expired(task):
                    raise
                task.uncancel()
                self._count("<error>", method)
                raise TransportError(f"{method} {path}: no answer within {seconds}s") from None
            finally:
                if task is not None:
                    deadlines.discard(task)
            if isinstance(error, TooManyRequests) and attempt < self.max_429_retries:
                attempt += 1
                delay = error.retry_after if error.retry_after is not None else 1.0
                await asyncio.sleep(min(delay, self.max_retry_after))
                continue
            raise error

    @staticmethod
    def _error(status: int, raw: bytes, retry_after: str | None) -> ApiError:
        try:
            body = _json.loads(raw) if raw else None
        except _json.JSONDecodeError:
            body = {"message": raw.decode(errors="replace")[:500]}
        if not isinstance(body, dict) or body.get("kind") != "Status":
            body = {"message": (body or {}).get("message") if isinstance(body, dict) else None} | {
                "code": status
            }
            if not body.get("message"):
                body["message"] = f"HTTP {status}"
        return ApiError.from_status(status, body, retry_after=_retry_after(retry_after))

    async def stream(
        self,
        path: str,
        *,
        params: Params | None = None,
        inactivity_timeout: float | None = None,
    ) -> AsyncIterator[Json]:
        """GET a watch and yield each event dict (``{"type": ..., "object": ...}``).

        ``inactivity_timeout`` guards against half-open connections: if no byte arrives for
        that long, ``TimeoutError`` is raised so the caller reconnects. The generator returns
        when the server ends the stream (its ``timeoutSeconds`` expired). Not from a guest loop:
        a watch feeds an informer, which lives on the manager's loop.
        """
        if loops.in_guest():
            raise RuntimeError(
                f"watch {path}: watches are opened on the manager's loop, not from a guest loop "
                "(read the cache there instead)"
            )
        await self._throttle("GET")
        headers = await self._headers(None)
        try:
            opened = await open_stream(
                self.pool, _target(path, params), headers, inactivity_timeout=inactivity_timeout
            )
        except TimeoutError as err:
            # as a silent stream: the caller reconnects from where it was
            self._count("<error>", "GET")
            raise TimeoutError(f"watch {path}: no connection or answer in time") from err
        except (ConnectionLost, OSError) as err:
            self._count("<error>", "GET")
            raise TransportError(f"GET {path} (watch): {err!r}") from err
        async with opened:
            self._count(opened.status, "GET")
            if opened.status >= 300:
                raise self._error(opened.status, await opened.body(), opened.headers.get("retry-after"))
            try:
                async for line in opened.lines():
                    yield _json.loads(line)
            except TimeoutError as err:
                raise TimeoutError(f"watch {path}: no data for {inactivity_timeout}s") from err
            except ConnectionLost as err:
                self._count("<error>", "GET")
                raise TransportError(f"GET {path} (watch): {err}") from err


def _object(raw: bytes, method: str, path: str, status: int = 200) -> Json:
    if not raw:
        return {}
    decoded = _json.loads(raw)
    if not isinstance(decoded, dict):
        raise ApiError(
            f"{method} {path}: the server answered with a JSON {json_kind(decoded)}, not an object",
            code=status,
        )
    return decoded


def decode_object(raw: bytes, method: str, path: str) -> Json:
    """A ``request_bytes`` answer decoded as ``request`` would have returned it."""
    return _object(raw, method, path)
