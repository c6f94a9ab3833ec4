"""Security: the product's webhook and metrics servers speak TLS 1.2+ and HTTP/1.1 only.

``python -m trainer`` with secure metrics on a free port: a client limited to TLS 1.1 fails the
handshake on both servers, TLS 1.2 and 1.3 clients are served, and ALPN offering ``h2`` first
gets ``http/1.1`` -- with and without ``--enable-http2`` (accepted for parity with upstream's flag;
aiohttp has no HTTP/2 server, docs/divergences.md F-IO-9).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from pathlib import Path

import pytest
from trainer_process import running_manager

from manager.envtest import Environment
from manager.envtest.process import free_port


def client_context(
    *, maximum: ssl.TLSVersion | None = None, minimum: ssl.TLSVersion | None = None
) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the handshake's version is under test, not the chain
    # let this client offer old protocol versions (OpenSSL's default security level forbids them)
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    if minimum is not None:
        ctx.minimum_version = minimum
    if maximum is not None:
        ctx.maximum_version = maximum
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    return ctx


async def handshake(port: int, ctx: ssl.SSLContext) -> tuple[str, str | None]:
    """The negotiated (protocol version, ALPN protocol); raises on a failed handshake."""
    _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, ssl=ctx), 10)
    try:
        ssl_obj = writer.get_extra_info("ssl_object")
        return ssl_obj.version(), ssl_obj.selected_alpn_protocol()
    finally:
        writer.close()
        with contextlib.suppress(ssl.SSLError, ConnectionError):
            await writer.wait_closed()


@pytest.mark.parametrize("http2_flag", [False, True], ids=["default", "enable-http2"])
async def test_webhook_and_metrics_servers_are_tls12_plus_and_http11_only(
    control_plane: Environment, tmp_path: Path, http2_flag: bool
) -> None:
    metrics_port = free_port()
    async with running_manager(
        control_plane,
        tmp_path,
        {"metrics": {"bindAddress": f"127.0.0.1:{metrics_port}", "secureServing": True}},
        args=["--enable-http2"] if http2_flag else [],
    ) as manager:
        for name, port in (("webhook", manager.webhook_port), ("metrics", metrics_port)):
            with pytest.raises((ssl.SSLError, ConnectionError)):
                await handshake(port, client_context(maximum=ssl.TLSVersion.TLSv1_1))
            assert await handshake(port, client_context(maximum=ssl.TLSVersion.TLSv1_2)) == (
                "TLSv1.2",
                "http/1.1",
            ), name
            assert await handshake(port, client_context(minimum=ssl.TLSVersion.TLSv1_3)) == (
                "TLSv1.3",
                "http/1.1",
            ), name
