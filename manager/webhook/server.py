"""The admission webhook HTTPS server (aiohttp): TLS >= 1.2, HTTP/1.1 only, port 9443.

Admission answers never wait behind reconciles: the server runs on a thread and event loop of
its own, a guest of the manager's loop (``manager.loops``), so the API server's call (which holds
a user's ``kubectl apply`` open) is read, judged and answered while the manager's loop is busy
with informer events and reconcile steps. Handlers run on that loop too; they read the
manager's cache there directly and send API requests through the manager's client, which hands
them to the manager's loop (docs/behaviour/framework.md D.5). ``own_thread=False`` serves on the
caller's loop instead.

Paths are registered before start (duplicates are an error); each is wrapped with the
``controller_runtime_webhook_*`` metrics. Bodies must be ``application/json`` and under 7 MiB;
as controller-runtime, a request that cannot be read (empty, too large, another content type,
not an AdmissionReview) is answered HTTP 200 with an AdmissionReview whose status carries 400
(413 for the size) and the reason. A handler that raises is answered with a 500 inside the AdmissionReview (a generic message;
the traceback goes to the log) and counted in
``controller_runtime_webhook_panics_total``; the server keeps serving.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from manager import loops
from manager._http import serve
from manager.webhook import metrics
from manager.webhook.admission import (
    INTERNAL_ERROR_MESSAGE,
    AdmissionDecodeError,
    Handler,
    decode_review,
    encode_review,
    errored,
)
from manager.webhook.certwatcher import CertWatcher, TLSOption
from manager.webhook.pressure import AdmissionPressure
from manager.webhook.tlsserver import watch_certificates

log = logging.getLogger(__name__)
MAX_BODY = 7 * 1024 * 1024
# A body may nest as deep as the JSON decoder allows (orjson: 1024 levels; Go's decoder 10,000) and
# handlers copy, check and diff objects recursively (a few frames a level): the interpreter's
# default limit of 1000 frames would turn a deeply nested field into a RecursionError and a 500.
RECURSION_LIMIT = 10_000
# controller-runtime's default, under Go's os.TempDir(): $TMPDIR, else /tmp. Not
# tempfile.gettempdir(), which tries to write a file in each candidate and raises at import when
# none is writable (a read-only root without a /tmp volume, where the console script's other
# commands still run).
DEFAULT_CERT_DIR = Path(os.environ.get("TMPDIR") or "/tmp") / "k8s-webhook-server" / "serving-certs"
GIL_SWITCH_INTERVAL = 0.001
"""Seconds a thread waiting for the GIL waits before the running one must hand it over (Python's
default is 5 ms). The server's thread waits for it after every socket read and write while the
manager's thread reconciles: at 5 ms an answer picked up five such waits (a webhook answer's p50
13 ms against 7 ms at 1 ms with the manager's loop busy, docs/bench.md). Threads that do not wait
are not switched more often."""


async def _read_limited(request: web.Request) -> bytes | None:
    """The body, or None when it reaches ``MAX_BODY`` bytes (controller-runtime's LimitedReader:
    a body of exactly the limit is refused too). The rest is left unread."""
    chunks: list[bytes] = []
    size = 0
    while size < MAX_BODY:
        chunk = await request.content.read(MAX_BODY - size)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
    return None


def _refused(code: int, message: str) -> web.Response:
    """A request that never reached a handler: HTTP 200 with an AdmissionReview carrying ``code``,
    no apiVersion/kind and no uid, as controller-runtime's ``writeResponse(Errored(...))``."""
    log.info("admission request refused: %s", message)
    return web.Response(body=encode_review("", "", errored(code, message)), content_type="application/json")


class WebhookServerError(Exception):
    pass


class WebhookServer:
    """Runnable (``needs_leader_election = False``); sets ``started`` once listening."""

    needs_leader_election = False

    def __init__(
        self,
        *,
        host: str = "",
        port: int = 9443,
        cert_dir: Path | str = DEFAULT_CERT_DIR,
        cert_name: str = "tls.crt",
        key_name: str = "tls.key",
        client_ca_name: str = "",
        cert_poll_interval: float = 10.0,
        tls_opts: tuple[TLSOption, ...] = (),
        embedded_in_error_path: bool = False,
        own_thread: bool = True,
        switch_interval: float | None = GIL_SWITCH_INTERVAL,
        pressure: AdmissionPressure | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.cert_dir = Path(cert_dir)
        self.cert_name = cert_name
        self.key_name = key_name
        self.client_ca_name = client_ca_name
        self.cert_poll_interval = cert_poll_interval
        self.tls_opts = tls_opts
        """Applied to the serving context after the defaults (controller-runtime's ``TLSOpts``)."""
        self.embedded_in_error_path = embedded_in_error_path
        """A type error in the AdmissionReview names its embedded ``AdmissionReview`` in the path
        (``Go struct field AdmissionRequest.AdmissionReview.request.uid``), as the
        ``sigs.k8s.io/json`` of controller-runtime v0.24's managers does."""
        self.own_thread = own_thread
        """Serve on a thread and event loop of the server's own (the default), so that no answer
        waits for the loop that started it; False: on that loop."""
        self.switch_interval = switch_interval
        """With ``own_thread``: the interpreter's thread switch interval while the server runs,
        when shorter than the one set (None: leave it)."""
        self.pressure = pressure
        """Told of every admission request, so that the reconciles yield while admission is
        under load (``manager.webhook.pressure``); None: nobody is told."""
        self._handlers: dict[str, Handler] = {}
        self._started = False
        self._frozen = False
        self.certwatcher: CertWatcher | None = None
        self.bound_port: int | None = None

    def register(self, path: str, handler: Handler) -> None:
        if self._frozen:
            raise WebhookServerError("cannot register a webhook after the server started")
        if not path.startswith("/"):
            raise WebhookServerError(f"webhook path {path!r} must start with '/'")
        if path in self._handlers:
            raise WebhookServerError(f"a webhook is already registered at {path}")
        self._handlers[path] = handler
        metrics.init_path(path)

    @property
    def paths(self) -> list[str]:
        """The registered webhook paths; a server with none need not run."""
        return list(self._handlers)

    def started_checker(self) -> Callable[[], bool]:
        """A readiness check: true once the server is listening (``StartedChecker``)."""
        return lambda: self._started

    def _ssl_context(self) -> ssl.SSLContext:
        for name in (self.cert_name, self.key_name):
            if not (self.cert_dir / name).is_file():
                raise WebhookServerError(
                    f"webhook serving certificate file {self.cert_dir / name} does not exist: "
                    "mount tls.crt and tls.key there (or point the cert dir elsewhere)"
                )
        self.certwatcher = watch_certificates(
            self.cert_dir,
            self.cert_name,
            self.key_name,
            interval=self.cert_poll_interval,
            tls_opts=self.tls_opts,
        )
        ctx = self.certwatcher.context
        if self.client_ca_name:
            ctx.load_verify_locations(self.cert_dir / self.client_ca_name)
            ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx

    def _wrap(self, path: str, handler: Handler) -> Callable[[web.Request], Awaitable[web.Response]]:
        # the path's series, looked up once (a labels() call per request is a lock and a dict walk)
        in_flight = metrics.WEBHOOK_IN_FLIGHT.labels(webhook=path)
        answered = metrics.WEBHOOK_REQUESTS.labels(webhook=path, code="200")
        latency = metrics.WEBHOOK_LATENCY.labels(webhook=path)

        async def serve(request: web.Request) -> web.Response:
            started = time.perf_counter()
            if self.pressure is not None:
                self.pressure.note()
            in_flight.inc()
            try:
                body = await _read_limited(request)
                if body is None:
                    return _refused(413, f"request entity is too large; limit is {MAX_BODY} bytes")
                if not body:
                    return _refused(400, "request body is empty")
                content_type = request.headers.get("Content-Type", "")
                if content_type != "application/json":
                    return _refused(400, f"contentType={content_type}, expected application/json")
                try:
                    api_version, req = decode_review(body, embedded_in_error_path=self.embedded_in_error_path)
                except AdmissionDecodeError as err:
                    return _refused(400, str(err))
                try:
                    response = await handler(req)
                except Exception:
                    metrics.WEBHOOK_PANICS.inc()
                    log.exception("webhook %s failed", path)
                    response = errored(500, INTERNAL_ERROR_MESSAGE)
                return web.Response(
                    body=encode_review(api_version, req.uid, response), content_type="application/json"
                )
            finally:
                in_flight.dec()
                answered.inc()  # every answer is HTTP 200; its AdmissionReview carries the verdict
                latency.observe(time.perf_counter() - started)

        return serve

    async def start(self, started: asyncio.Event) -> None:
        """Listen until cancelled; certificates are re-read every ``cert_poll_interval`` s.

        With ``own_thread`` (the default) the server runs on a guest loop (``manager.loops``);
        cancelling ``start`` stops it there gracefully and returns once its thread has ended."""
        self._frozen = True
        if sys.getrecursionlimit() < RECURSION_LIMIT:
            sys.setrecursionlimit(RECURSION_LIMIT)
        ctx = self._ssl_context()  # here: a missing certificate fails the start at once
        if not self.own_thread:
            await self._serve(ctx, started.set)
            return
        host = asyncio.get_running_loop()
        previous = sys.getswitchinterval()
        interval = self.switch_interval if self.switch_interval is not None else previous
        if interval < previous:
            sys.setswitchinterval(interval)
        try:
            await loops.run_guest(
                self._serve(ctx, lambda: host.call_soon_threadsafe(started.set)), name="webhook-server"
            )
        finally:
            if interval < previous and sys.getswitchinterval() == interval:
                sys.setswitchinterval(previous)  # unless someone set another meanwhile

    async def _serve(self, ctx: ssl.SSLContext, ready: Callable[[], object]) -> None:
        """The aiohttp server on the running loop: ``ready()`` once it listens."""
        app = web.Application(client_max_size=MAX_BODY)
        for path, handler in self._handlers.items():
            app.router.add_post(path, self._wrap(path, handler))
        assert self.certwatcher is not None

        def listening(port: int) -> None:
            self.bound_port = port
            self._started = True
            ready()
            log.info("webhook server listening on port %s", port)

        try:
            await serve(
                app, self.host, self.port, ssl_context=ctx, listening=listening, until=self.certwatcher.watch
            )
        finally:
            self._started = False
