"""``/metrics``: the manager registry in Prometheus text format, on every replica (no leader election)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from manager._http import HTTPServer
from manager._tls import TLSOption, server_ssl_context
from manager.client.interfaces import ClientProtocol
from manager.metrics.filters import Filter, Handler
from manager.metrics.registry import REGISTRY

FilterProvider = Callable[[ClientProtocol], Filter]
"""Builds the filter from the manager's client (Go's ``FilterProvider(config, httpClient)``)."""

DEFAULT_BIND_ADDRESS = ":8080"


def metrics_app(
    registry: CollectorRegistry = REGISTRY,
    extra_handlers: Mapping[str, Handler] | None = None,
    *,
    filter: Filter | None = None,
) -> web.Application:
    async def metrics(request: web.Request) -> web.StreamResponse:
        # off the loop: a collector may wait (the webhook process's relay asks its child)
        body = await asyncio.to_thread(generate_latest, registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    def wrapped(handler: Handler) -> Handler:
        return filter(handler) if filter is not None else handler

    app = web.Application()
    app.router.add_get("/metrics", wrapped(metrics))
    for path, handler in (extra_handlers or {}).items():
        if path == "/metrics":
            raise ValueError("overriding the /metrics path is not allowed")
        app.router.add_route("*", path, wrapped(handler))
    return app


def metrics_server(
    bind_address: str = DEFAULT_BIND_ADDRESS,
    *,
    registry: CollectorRegistry = REGISTRY,
    extra_handlers: Mapping[str, Handler] | None = None,
    secure: bool = False,
    cert_dir: str | None = None,
    filter: Filter | None = None,
    tls_opts: tuple[TLSOption, ...] = (),
) -> HTTPServer:
    """The ``/metrics`` server; ``secure`` serves HTTPS (cert files from ``cert_dir`` or self-signed).

    ``filter`` wraps every handler, e.g. to authenticate and authorise each request; ``tls_opts``
    change the HTTPS context after the defaults.
    """
    context = server_ssl_context(cert_dir, tls_opts=tls_opts) if secure else None
    return HTTPServer(
        metrics_app(registry, extra_handlers, filter=filter),
        bind_address,
        name="metrics",
        ssl_context=context,
    )
