"""Time as a seam: everything that waits or measures durations takes a ``Clock``.

Work queues, rate limiters and the leader elector read ``now()`` (monotonic seconds) and
schedule wake-ups through the clock instead of calling ``asyncio.sleep`` directly, so tests
can swap in ``manager.testing.clock.FakeClock`` and drive hours of backoff in microseconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds; only differences are meaningful (never wall-clock time)."""
        ...

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` once ``now()`` reaches ``when``; the handle cancels it."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    """The running event loop's monotonic clock."""

    def now(self) -> float:
        try:
            return asyncio.get_running_loop().time()
        except (
            RuntimeError
        ):  # e.g. a metrics scrape from another thread; same clock for asyncio's default loop
            return time.monotonic()

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_at(when, callback)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


REAL_CLOCK: Clock = RealClock()
