"""``eventually``: retry an assertion until it holds, for state that converges asynchronously."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    check: Callable[[], Awaitable[T] | T],
    *,
    timeout: float = 30.0,
    interval: float = 0.1,
    message: str = "",
    retry_on: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``check`` until it neither raises ``AssertionError`` (or one of ``retry_on``, e.g.
    ``NotFound`` while an object is still being created) nor returns a falsy value other than ``None``.

    A check that returns ``None`` passes: assertion-style checks return nothing. Returns what
    the last call returned. On timeout the last failure is raised as an ``AssertionError`` with
    ``message`` and the elapsed time, so it says what never became true.
    """
    deadline = time.monotonic() + timeout
    started = time.monotonic()
    last: BaseException | None = None
    retryable: tuple[type[BaseException], ...] = (AssertionError, *retry_on)
    while True:
        try:
            result = check()
            if inspect.isawaitable(result):
                result = await result
            if result is None or result:
                return result
            last = AssertionError(f"check returned {result!r}")
        except retryable as err:
            last = err
        if time.monotonic() >= deadline:
            elapsed = time.monotonic() - started
            prefix = f"{message}: " if message else ""
            raise AssertionError(f"{prefix}not true after {elapsed:.1f}s: {last}") from last
        await asyncio.sleep(interval)
