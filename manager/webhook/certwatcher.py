"""Serve the newest certificate from ``tls.crt``/``tls.key`` without restarting (cert-manager
rotates them in place).

The files are polled (mtime, size and content hash, so atomic symlink swaps as done by
Kubernetes secret volumes are seen). A successful read loads the pair into the server's
``SSLContext``; new TLS handshakes use it, open connections keep theirs. The first read must
succeed; later failures keep the previous pair and count ``certwatcher_read_certificate_errors_total``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
from collections.abc import Iterable
from pathlib import Path

from manager._tls import TLSOption, new_server_context
from manager.webhook import metrics

__all__ = ["CertWatcher", "TLSOption"]

log = logging.getLogger(__name__)


class CertWatcher:
    def __init__(
        self,
        cert_path: Path | str,
        key_path: Path | str,
        *,
        interval: float = 10.0,
        tls_opts: Iterable[TLSOption] = (),
    ) -> None:
        self.cert_path = Path(cert_path)
        self.key_path = Path(key_path)
        self.interval = interval
        # TLS >= 1.2 and HTTP/2 off (the CVE-2023-44487 advice), then the server's TLS options
        self.context = new_server_context(tls_opts)
        self._fingerprint = b""
        self.reloads = 0

    def _read(self) -> bytes:
        return hashlib.sha256(self.cert_path.read_bytes() + b"\0" + self.key_path.read_bytes()).digest()

    def load(self) -> bool:
        """(Re)load the pair if it changed; returns whether it was loaded. Raises on the first load."""
        first = not self._fingerprint
        try:
            fingerprint = self._read()
            if fingerprint == self._fingerprint:
                return False
            metrics.CERT_READS.inc()
            self.context.load_cert_chain(self.cert_path, self.key_path)
        except (OSError, ssl.SSLError) as err:
            metrics.CERT_READ_ERRORS.inc()
            if first:
                raise
            log.warning("keeping the previous webhook certificate: %s", err)
            return False
        self._fingerprint = fingerprint
        self.reloads += 1
        if not first:
            log.info("reloaded webhook certificate from %s", self.cert_path)
        return True

    async def watch(self) -> None:
        """Poll until cancelled."""
        while True:
            await asyncio.sleep(self.interval)
            self.load()
