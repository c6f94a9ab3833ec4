"""A recording proxy on loopback between a manager and the API server (the RBAC test).

The manager talks plain HTTP to the proxy; the proxy forwards every request over TLS and records
method, path, query and the answer's status. By default the request's own credentials go
through (the manager's kubeconfig carries a ServiceAccount token: ``kubeconfig(token=...)``);
with ``impersonate=(user, groups)`` the proxy sends it as the envtest admin impersonating that
identity (``Impersonate-User``/``-Group``) instead. ``verbs_used`` turns the
record into RBAC terms: ``(apiGroup, resource[/subresource], verb)``. Watches stream through.

Importable by its module name from every test (``test/`` is on ``sys.path``).
"""

from __future__ import annotations

import base64
import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import yaml
from aiohttp import web

from manager.envtest import Environment
from manager.envtest.certs import KeyPair
from manager.envtest.process import free_port

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    status: int
    seconds: float = 0.0


@dataclass
class RecordingProxy:
    env: Environment
    directory: Path
    impersonate: tuple[str, list[str]] | None = None
    requests: list[Recorded] = field(default_factory=list)
    pending: dict[int, str] = field(default_factory=dict)  # sent upstream, no answer yet
    port: int = 0
    _runner: web.AppRunner | None = None
    _session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> RecordingProxy:
        ctx = ssl.create_default_context(cadata=self.env.serving_ca.cert_pem.decode())
        if self.impersonate is not None:
            admin: KeyPair = self.env.admin
            admin.write(self.directory / "admin.crt", self.directory / "admin.key")
            ctx.load_cert_chain(self.directory / "admin.crt", self.directory / "admin.key")
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ctx), auto_decompress=False, timeout=aiohttp.ClientTimeout()
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        self.port = free_port()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def kubeconfig(self, token: str | None = None) -> Path:
        """A kubeconfig for the manager: the proxy's plain-HTTP address, with ``token`` as its
        bearer token (none when the proxy impersonates)."""
        path = self.directory / "proxy-kubeconfig.yaml"
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "proxy", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
                    "users": [{"name": "proxy", "user": {"token": token} if token else {}}],
                    "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "proxy"}}],
                    "current-context": "proxy",
                }
            )
        )
        return path

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        multi = [(k, v) for k, v in headers.items()]
        if self.impersonate is not None:
            user, groups = self.impersonate
            multi = [(k, v) for k, v in multi if k.lower() != "authorization"]
            multi.append(("Impersonate-User", user))
            multi.extend(("Impersonate-Group", g) for g in groups)
        started = time.monotonic()
        self.pending[id(request)] = f"{request.method} {request.path_qs}"
        async with self._session.request(
            request.method,
            self.env.url + request.path_qs,
            data=body or None,
            headers=multi,
        ) as upstream:
            self.pending.pop(id(request), None)
            recorded = Recorded(request.method, request.path, dict(request.query), upstream.status)
            self.requests.append(recorded)
            response = web.StreamResponse(
                status=upstream.status,
                headers={k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP},
            )
            await response.prepare(request)
            try:
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
            except (ConnectionResetError, aiohttp.ClientError):
                pass
            recorded.seconds = time.monotonic() - started
            return response


NON_RESOURCE_PREFIXES = ("/version", "/openapi", "/healthz", "/readyz", "/livez", "/metrics")


def rbac_terms(rec: Recorded) -> tuple[str, str, str] | None:
    """``(apiGroup, resource or resource/subresource, verb)`` of a resource request; None for
    discovery and other non-resource requests."""
    if rec.path.startswith(NON_RESOURCE_PREFIXES):
        return None
    parts = [p for p in rec.path.split("/") if p]
    if parts[:1] == ["api"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"]:
        group, rest = parts[1], parts[3:]
    else:
        return None
    if not rest:
        return None  # discovery of a group version
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    watching = rec.query.get("watch") in ("true", "1")
    verb = {
        "GET": "watch" if watching else "get" if name else "list",
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if name else "deletecollection",
    }[rec.method]
    return group, f"{resource}/{sub}" if sub else resource, verb


def verbs_used(requests: list[Recorded]) -> dict[tuple[str, str], set[str]]:
    used: dict[tuple[str, str], set[str]] = {}
    for rec in requests:
        terms = rbac_terms(rec)
        if terms:
            used.setdefault(terms[:2], set()).add(terms[2])
    return used


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
