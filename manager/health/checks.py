"""Health and readiness checks: a named callable that raises (or returns an error) when unhealthy.

A checker gets the HTTP request (most ignore it) and may be sync or async. It fails by raising
an exception whose message says why; that reason is only shown on the check's own sub-path
(``/readyz/<name>``), never on the aggregated endpoint, which is public.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

from aiohttp import web

Checker = Callable[[web.Request], "Awaitable[None] | None"]


async def ping(_request: web.Request) -> None:
    """Always healthy: the process answers HTTP."""


class NotReadyError(Exception):
    pass


def flag_checker(is_ready: Callable[[], bool], reason: str) -> Checker:
    """A checker that fails with ``reason`` until ``is_ready()`` is true (e.g. caches synced)."""

    def check(_request: web.Request) -> None:
        if not is_ready():
            raise NotReadyError(reason)

    return check


async def run_check(checker: Checker, request: web.Request) -> None:
    result = checker(request)
    if inspect.isawaitable(result):
        await result
