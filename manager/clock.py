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
    """The event loops' monotonic clock.

    ``now()`` reads ``time.monotonic()`` (CLOCK_MONOTONIC): asyncio's ``loop.time()`` is that
    clock, and uvloop's is the same clock cached once per loop iteration (up to 1 ms behind), so
    a deadline ``now() + d`` given to ``call_at`` falls where the loop expects it, and a timer
    that fired finds ``now()`` past its deadline. Not ``asyncio.get_running_loop().time()``:
    CPython 3.11 makes a ``getpid()`` system call in every ``get_running_loop`` (its fork check),
    five times the cost of the read, and the work queue reads the clock several times an event.
    """

    def now(self) -> float:
        return time.monotonic()

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_at(when, callback)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


REAL_CLOCK: Clock = RealClock()
