"""``/healthz`` and ``/readyz`` with controller-runtime's (and the API server's) response format.

* aggregated: 200 ``ok`` when every check passes; otherwise 500 and one line per check,
  sorted by name: ``[+]name ok`` / ``[-]name failed: reason withheld`` then ``healthz check failed``
  (upstream prints "healthz" for both endpoints; kept for parity);
* ``?verbose`` prints the lines on success too; ``?exclude=name`` (repeatable) skips a check and
  warns about names that match nothing;
* ``/<endpoint>/<name>`` runs one check and shows its error text;
* no checks registered: a built-in ``ping``.

Checks are registered before the manager starts; the registry freezes when the server starts.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from aiohttp import web

from manager._http import HTTPServer
from manager.health.checks import Checker, ping, run_check

log = logging.getLogger("manager.health")

LIVENESS_PATH = "/healthz"
READINESS_PATH = "/readyz"


@dataclass
class CheckSet:
    checks: dict[str, Checker] = field(default_factory=dict)
    frozen: bool = False

    def add(self, name: str, checker: Checker) -> None:
        if self.frozen:
            raise RuntimeError(f"cannot add check {name!r}: the health server already started")
        if not name or "/" in name:
            raise ValueError(f"invalid check name {name!r}")
        if name in self.checks:
            raise ValueError(f"check {name!r} is already registered")
        self.checks[name] = checker


def _quoted(names: list[str]) -> str:
    return ",".join(f'"{n}"' for n in names)


async def _aggregated(checks: CheckSet, request: web.Request) -> web.Response:
    excluded = set(request.query.getall("exclude", []))
    lines: list[tuple[str, str]] = []
    failed = False
    registered = checks.checks or {"ping": ping}
    for name, checker in registered.items():
        if name in excluded:
            excluded.discard(name)
            lines.append((name, f"[+]{name} excluded: ok"))
            continue
        try:
            await run_check(checker, request)
        except Exception as err:
            log.debug("health check %s failed: %s", name, err)
            lines.append((name, f"[-]{name} failed: reason withheld"))
            failed = True
        else:
            lines.append((name, f"[+]{name} ok"))
    headers = {"X-Content-Type-Options": "nosniff"}
    status = 500 if failed else 200
    if not failed and "verbose" not in request.query:
        return web.Response(status=status, text="ok", headers=headers)
    body = "".join(line + "\n" for _, line in sorted(lines))
    if excluded:
        body += f"warn: some health checks cannot be excluded: no matches for {_quoted(sorted(excluded))}\n"
    body += "healthz check failed\n" if failed else "healthz check passed\n"
    return web.Response(status=status, text=body, headers=headers)


async def _single(checks: CheckSet, name: str, request: web.Request) -> web.Response:
    checker = checks.checks.get(name)
    if checker is None and not checks.checks and name == "ping":
        checker = ping
    if checker is None:
        return web.Response(status=404, text="404 page not found\n")
    try:
        await run_check(checker, request)
    except Exception as err:
        return web.Response(status=500, text=f"internal server error: {err}\n")
    return web.Response(text="ok")


def _endpoint(name: str) -> str:
    path = "/" + name.strip("/")
    if path == "/":
        raise ValueError("a health endpoint name must not be empty")
    return path


def health_app(
    liveness: CheckSet,
    readiness: CheckSet,
    *,
    liveness_endpoint: str = LIVENESS_PATH,
    readiness_endpoint: str = READINESS_PATH,
) -> web.Application:
    """Both endpoints with their sub-paths; names may be given with or without the leading slash."""
    app = web.Application()
    for path, checks in (
        (_endpoint(liveness_endpoint), liveness),
        (_endpoint(readiness_endpoint), readiness),
    ):

        async def aggregated(request: web.Request, checks: CheckSet = checks) -> web.Response:
            return await _aggregated(checks, request)

        async def single(request: web.Request, checks: CheckSet = checks) -> web.Response:
            return await _single(checks, request.match_info["check"], request)

        app.router.add_get(path, aggregated)
        app.router.add_get(path + "/", aggregated)
        app.router.add_get(path + "/{check}", single)
    return app


class HealthProbeServer(HTTPServer):
    """The probe endpoint; freezes both check sets when it starts."""

    def __init__(
        self,
        bind_address: str,
        liveness: CheckSet,
        readiness: CheckSet,
        *,
        liveness_endpoint: str = LIVENESS_PATH,
        readiness_endpoint: str = READINESS_PATH,
    ) -> None:
        app = health_app(
            liveness, readiness, liveness_endpoint=liveness_endpoint, readiness_endpoint=readiness_endpoint
        )
        super().__init__(app, bind_address, name="health-probe")
        self.liveness = liveness
        self.readiness = readiness

    async def start(self, started: asyncio.Event) -> None:
        self.liveness.frozen = True
        self.readiness.frozen = True
        await super().start(started)
