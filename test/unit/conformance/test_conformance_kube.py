"""The runner's REST client decodes what the API server answers: JSON, plain text or nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from local_http import serving

from manager.config import RestConfig
from trainer.conformance.kube import Kube


@pytest.fixture
async def server() -> AsyncIterator[str]:
    async def status(_request: web.Request) -> web.Response:
        return web.json_response({"kind": "Status", "code": 404}, status=404)

    async def readyz(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def empty(_request: web.Request) -> web.Response:
        return web.Response(status=200)

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/x", status)
    app.router.add_get("/readyz", readyz)
    app.router.add_delete("/empty", empty)
    async with serving(app) as url:
        yield url


async def test_request_returns_status_and_decoded_json_text_or_none(server: str) -> None:
    kube = Kube(RestConfig(host=server))
    try:
        assert await kube.request("GET", "/api/v1/namespaces/x") == (404, {"kind": "Status", "code": 404})
        assert await kube.request("GET", "/readyz") == (200, "ok")
        assert await kube.request("DELETE", "/empty") == (200, None)
    finally:
        await kube.close()
