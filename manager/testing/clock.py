"""A fake monotonic clock so backoff, requeue_after and lease expiry are tested without sleeping.

Time only moves when the test calls ``advance``. ``advance`` walks from timer to timer in
order, fires each due callback and lets the event loop run between steps, so a task woken by
one timer can schedule the next one and still see it fire within the same ``advance``.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field


@dataclass(order=True)
class _Timer:
    when: float
    seq: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A ``manager.clock.Clock`` whose time moves only when ``advance`` is called."""

    def __init__(self, start: float = 1000.0, *, settle_rounds: int = 50) -> None:
        self._now = start
        self._timers: list[_Timer] = []
        self._seq = itertools.count()
        self._settle_rounds = settle_rounds

    def now(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[[], None]) -> _Timer:
        timer = _Timer(when, next(self._seq), callback)
        heapq.heappush(self._timers, timer)
        return timer

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        timer = self.call_at(self._now + max(0.0, seconds), wake)
        try:
            await future
        finally:
            timer.cancel()

    def pending_timers(self) -> int:
        """How many live timers are scheduled (tests use it to check nothing leaks)."""
        return sum(1 for t in self._timers if not t.cancelled)

    def next_deadline(self) -> float | None:
        self._drop_cancelled()
        return self._timers[0].when if self._timers else None

    async def settle(self) -> None:
        """Let every runnable task run until the loop is idle (bounded number of rounds)."""
        for _ in range(self._settle_rounds):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, firing due timers in order and settling between them."""
        target = self._now + seconds
        await self.settle()
        while (timer := self._next_due(target)) is not None:
            timer.callback()
            await self.settle()
        self._now = max(self._now, target)
        await self.settle()

    @contextlib.asynccontextmanager
    async def autojump(self, threshold: float = 0.001) -> AsyncIterator[None]:
        """Inside the block, jump to the next timer whenever the loop stays idle for ``threshold``
        real seconds (trio's ``autojump_threshold``): code that sleeps for minutes finishes at once.
        """

        async def jumper() -> None:
            while True:
                await asyncio.sleep(threshold)
                deadline = self.next_deadline()
                if deadline is not None:
                    await self.advance(max(0.0, deadline - self._now))

        task = asyncio.create_task(jumper())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def advance_nowait(self, seconds: float) -> None:
        """Move time forward and fire due timers without yielding to the loop (sync tests)."""
        target = self._now + seconds
        while (timer := self._next_due(target)) is not None:
            timer.callback()
        self._now = max(self._now, target)

    def _next_due(self, target: float) -> _Timer | None:
        """The earliest live timer due by ``target``, taken off the heap, with the time moved to it."""
        self._drop_cancelled()
        if not self._timers or self._timers[0].when > target:
            return None
        timer = heapq.heappop(self._timers)
        self._now = max(self._now, timer.when)
        return timer

    def _drop_cancelled(self) -> None:
        while self._timers and self._timers[0].cancelled:
            heapq.heappop(self._timers)
