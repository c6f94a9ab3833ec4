"""Serving an aiohttp app (``serve``: listen, report the port, run until cancelled, clean up;
every server of the manager goes through it) and the small server runnable of the metrics and
health-probe endpoints.

Bind addresses follow controller-runtime: ``":8080"`` listens on every interface,
``"127.0.0.1:0"`` picks a free port (read it back from ``port``), and ``"0"`` or ``""`` means
the server is disabled (the manager then does not add it at all).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable

import structlog
from aiohttp import web

log = structlog.get_logger("manager.http")


async def serve(
    app: web.Application,
    host: str | None,
    port: int,
    *,
    ssl_context: ssl.SSLContext | None,
    listening: Callable[[int], object],
    until: Callable[[], Awaitable[None]] | None = None,
    shutdown_timeout: float = 60.0,
) -> None:
    """Serve ``app`` on ``host:port`` (``None``/``""``: every interface, port 0: a free one):
    ``listening(bound port)`` once the socket accepts, then ``until()`` (default: forever) while it
    serves. Cancelling stops it; open requests get ``shutdown_timeout`` s to finish."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host or None, port, ssl_context=ssl_context)
        await site.start()
        addresses = runner.addresses
        listening(int(addresses[0][1]) if addresses else port)
        await (until() if until is not None else asyncio.Event().wait())
    finally:
        await runner.cleanup()


def is_disabled(bind_address: str) -> bool:
    return bind_address in ("", "0")


def parse_bind_address(bind_address: str) -> tuple[str | None, int]:
    """``":8080"`` -> (None, 8080) meaning all interfaces; ``"[::1]:9"`` -> ("::1", 9)."""
    host, sep, port = bind_address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"bind address {bind_address!r} must look like host:port or :port")
    host = host.strip("[]")
    return (host or None), int(port)


class HTTPServer:
    """Serves ``app`` until cancelled; sets ``started`` once the socket listens."""

    needs_leader_election = False

    def __init__(
        self, app: web.Application, bind_address: str, *, name: str, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self.app = app
        self.ssl_context = ssl_context
        self.bind_address = bind_address
        self.name = name
        self.port: int | None = None

    async def start(self, started: asyncio.Event) -> None:
        host, port = parse_bind_address(self.bind_address)

        def listening(bound: int) -> None:
            self.port = bound
            # controller-runtime: "Serving metrics server" bindAddress=... secure=...
            log.info(
                f"Serving {self.name} server",
                bindAddress=self.bind_address,
                port=self.port,
                secure=self.ssl_context is not None,
            )
            started.set()

        await serve(self.app, host, port, ssl_context=self.ssl_context, listening=listening)

    def __repr__(self) -> str:
        return f"HTTPServer({self.name!r}, {self.bind_address!r})"
