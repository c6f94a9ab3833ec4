"""A stand-in HTTP server for unit tests: an aiohttp app served on a free loopback port.

Importable by its module name from every test (``test/`` is on ``sys.path``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiohttp import web

from manager.client import Client, RestTransport
from manager.client.restmapper import RESTMapper, RESTMapping
from manager.config import RestConfig


@contextlib.asynccontextmanager
async def serving(app: web.Application, *, shutdown_timeout: float = 60.0) -> AsyncIterator[str]:
    """Serve ``app`` on 127.0.0.1 (a port the OS picks) and yield its ``http://`` base URL; the
    server is stopped when the block ends."""
    runner = web.AppRunner(app, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def serving_client(
    handle: Callable[[web.Request], Awaitable[web.StreamResponse]], *mappings: RESTMapping
) -> AsyncIterator[Client]:
    """A ``Client`` talking to a stand-in API server whose every GET is ``handle``; its mapper
    knows ``mappings`` without discovery."""
    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    async with serving(app, shutdown_timeout=0.1) as url:
        transport = RestTransport(RestConfig(host=url))
        mapper = RESTMapper(transport)
        for mapping in mappings:
            mapper.add(mapping)
        try:
            yield Client(transport, mapper)
        finally:
            await transport.aclose()


#: The bookmark annotation that ends a watch-list's initial events (kube-apiserver's).
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def initial_events(items: list[dict[str, Any]], resource_version: str) -> bytes:
    """What kube-apiserver streams first on a watch-list (``sendInitialEvents=true``): every
    object as ADDED, then a bookmark at ``resource_version`` annotated as the initial events' end."""
    lines = [json.dumps({"type": "ADDED", "object": item}) for item in items]
    bookmark = {
        "kind": "Bookmark",
        "metadata": {"resourceVersion": resource_version, "annotations": {INITIAL_EVENTS_END: "true"}},
    }
    lines.append(json.dumps({"type": "BOOKMARK", "object": bookmark}))
    return "\n".join(lines).encode() + b"\n"


async def open_watch(
    request: web.Request, listed: list[dict[str, Any]], resource_version: str
) -> web.StreamResponse:
    """Start answering a watch; a watch-list request first gets ``listed`` as its initial events
    (``initial_events``). The caller writes the changes that follow."""
    resp = web.StreamResponse()
    await resp.prepare(request)
    if request.query.get("sendInitialEvents") == "true":
        await resp.write(initial_events(listed, resource_version))
    return resp
