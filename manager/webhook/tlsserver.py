"""``TLSServer``: an aiohttp app served over TLS from a certificate directory whose pair is re-read
while it runs (cert-manager rotates it in place), as a Runnable on every replica. The Trainer's
status servers subclass it and only say which app; the webhook server shares its
``watch_certificates`` and ``manager._http.serve``.
"""

from __future__ import annotations

import abc
import asyncio
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypedDict

from aiohttp import web

from manager._http import serve
from manager.webhook.certwatcher import CertWatcher, TLSOption

__all__ = ["Serving", "TLSServer", "watch_certificates"]


def watch_certificates(
    cert_dir: Path, cert_name: str, key_name: str, *, interval: float, tls_opts: tuple[TLSOption, ...]
) -> CertWatcher:
    """The pair in ``cert_dir``, loaded (a missing or bad file raises here, before serving)."""
    watcher = CertWatcher(cert_dir / cert_name, cert_dir / key_name, interval=interval, tls_opts=tls_opts)
    watcher.load()
    return watcher


class Serving(TypedDict, total=False):
    """Where and how a ``TLSServer`` listens, for subclasses to pass on (``**serving``)."""

    host: str
    cert_dir: Path | str
    cert_name: str
    key_name: str
    cert_poll_interval: float
    ssl_context: ssl.SSLContext | None
    tls_opts: tuple[TLSOption, ...]


class TLSServer(abc.ABC):
    """A Runnable on every replica (no leader needed) serving ``app()`` over TLS: from the pair in
    ``cert_dir`` re-read every ``cert_poll_interval`` s, or from a fixed ``ssl_context`` (tests)."""

    needs_leader_election = False
    shutdown_timeout = 5.0

    def __init__(
        self,
        *,
        host: str = "",
        port: int,
        cert_dir: Path | str = "",
        cert_name: str = "tls.crt",
        key_name: str = "tls.key",
        cert_poll_interval: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
        tls_opts: tuple[TLSOption, ...] = (),
    ) -> None:
        self.host = host
        self.port = port
        self.cert_dir = Path(cert_dir)
        self.cert_name = cert_name
        self.key_name = key_name
        self.cert_poll_interval = cert_poll_interval
        self.tls_opts = tls_opts
        """Applied to the serving context after the defaults (controller-runtime's ``TLSOpts``)."""
        self.bound_port: int | None = None
        self._ssl_context = ssl_context
        self._started = False

    @abc.abstractmethod
    def app(self) -> web.Application:
        """The application served (built at each start)."""

    def started_checker(self) -> Callable[[], bool]:
        """A readiness check: true while the server listens."""
        return lambda: self._started

    def listening(self, port: int) -> None:  # noqa: B027 (optional hook, not abstract)
        """Called once the socket accepts; a subclass may log it."""

    async def start(self, started: asyncio.Event) -> None:
        until: Callable[[], Awaitable[None]] | None = None
        context = self._ssl_context
        if context is None:
            watcher = watch_certificates(
                self.cert_dir,
                self.cert_name,
                self.key_name,
                interval=self.cert_poll_interval,
                tls_opts=self.tls_opts,
            )
            context, until = watcher.context, watcher.watch

        def listening(port: int) -> None:
            self.bound_port = port
            self._started = True
            started.set()
            self.listening(port)

        try:
            await serve(
                self.app(),
                self.host,
                self.port,
                ssl_context=context,
                listening=listening,
                until=until,
                shutdown_timeout=self.shutdown_timeout,
            )
        finally:
            self._started = False
