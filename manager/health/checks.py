"""Health and readiness checks: a named callable that fails by raising or by returning ``False``.

A checker takes the HTTP request or nothing (``server.started_checker()`` style), and may be sync
or async. It fails by raising an exception whose message says why, or by returning ``False``;
any other return value (``None``, ``True``) is healthy. The reason is only shown on the check's
own sub-path (``/readyz/<name>``), never on the aggregated endpoint, which is public.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from aiohttp import web

from manager.errors import Error

Checker = Callable[[web.Request], object] | Callable[[], object]
"""``(request) -> None | bool | Awaitable[None | bool]`` or the same without the request."""


async def ping(_request: web.Request) -> None:
    """Always healthy: the process answers HTTP."""


class CheckFailedError(Error):
    pass


def flag_checker(is_ready: Callable[[], bool], reason: str) -> Checker:
    """A checker that fails with ``reason`` until ``is_ready()`` is true (e.g. caches synced)."""

    def check(_request: web.Request) -> None:
        if not is_ready():
            raise CheckFailedError(reason)

    return check


def _takes_request(checker: Checker) -> bool:
    try:
        parameters = inspect.signature(checker).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: assume the request form
        return True
    positional = [
        p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    return bool(positional)


async def run_check(checker: Checker, request: web.Request) -> None:
    """Run ``checker``; raise if it fails (an exception of its own, or ``CheckFailedError`` for ``False``)."""
    result = checker(request) if _takes_request(checker) else checker()  # type: ignore[call-arg]
    if inspect.isawaitable(result):
        result = await result
    if result is False:
        raise CheckFailedError("check returned false")
