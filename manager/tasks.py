"""Owned background tasks: every task the framework starts belongs to a ``TaskSet`` that ends it.

``asyncio.TaskGroup`` owns tasks for one ``async with`` block and, on the first failure, cancels
the rest and raises an ``ExceptionGroup``. The manager needs more than that: its runnables are
stopped group by group within one shutdown *budget* (a TaskGroup waits forever), a failing
runnable must be reported once, not turn into an ExceptionGroup, and fire-and-forget work (event
emits, async map handlers) must be awaited before the HTTP session closes. ``TaskSet`` is that:

    tasks = TaskSet("events", on_error=log_it)
    tasks.spawn(recorder.event(...))      # owned: kept alive, its failure reported
    await tasks.drain()                   # wait for what was started (flush)
    await tasks.cancel(timeout=5.0)       # end everything; True if all ended in time

Nothing spawned here outlives its owner's ``cancel``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import TypeVar

T = TypeVar("T")

ErrorHandler = Callable[[asyncio.Task[object], BaseException], None]


class TaskSet:
    """A set of tasks with one owner: spawned, reported on failure, drained or cancelled together."""

    def __init__(self, name: str, *, on_error: ErrorHandler | None = None) -> None:
        self.name = name
        self._on_error = on_error
        self._tasks: set[asyncio.Task[object]] = set()

    def spawn(self, coro: Coroutine[object, object, T], *, name: str | None = None) -> asyncio.Task[T]:
        """Start ``coro`` now (needs a running loop); the set holds it until it ends."""
        task = asyncio.get_running_loop().create_task(coro, name=name or f"{self.name}-task")
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[object]) -> None:
        self._tasks.discard(task)
        if task.cancelled() or self._on_error is None:
            return
        err = task.exception()
        if err is not None:
            self._on_error(task, err)

    def __len__(self) -> int:
        return len(self._tasks)

    def tasks(self) -> list[asyncio.Task[object]]:
        return list(self._tasks)

    async def drain(self) -> None:
        """Wait until every task spawned so far, and any they spawn meanwhile, has ended."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def cancel(self, timeout: float | None = None) -> bool:
        """Cancel every task and wait up to ``timeout`` seconds (None: until they end; 0: do not
        wait). True when all of them ended."""
        live = [t for t in self._tasks if not t.done()]
        for task in live:
            task.cancel()
        if not live:
            return True
        if timeout is not None and timeout <= 0:
            return False
        _done, still = await asyncio.wait(live, timeout=timeout)
        return not still
