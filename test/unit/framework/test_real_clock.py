"""The real clock reads ``time.monotonic()``: the clock both event loops schedule by, so a deadline
taken from it and given to ``call_at`` fires where it should, on asyncio's loop and on uvloop's
(which caches the same clock once an iteration), and it reads the same from any thread."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from manager.clock import REAL_CLOCK
from manager.workqueue.delaying import DelayingQueue

LOOPS: dict[str, Callable[[Coroutine[Any, Any, None]], None]] = {
    "asyncio": asyncio.run,
    "uvloop": uvloop.run,
}


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_the_clock_is_the_loops_clock(loop: str) -> None:
    async def compare() -> None:
        running = asyncio.get_running_loop()
        for _ in range(200):
            loop_time = running.time()  # read first: the clock only moves forward
            ahead = REAL_CLOCK.now() - loop_time
            # uvloop's time is cached at the start of the iteration, in milliseconds
            assert 0 <= ahead < 0.05, f"the clock is {ahead:+.6f}s from {loop}'s loop.time()"
            await asyncio.sleep(0)

    LOOPS[loop](compare())


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_delayed_item_arrives_after_its_delay(loop: str) -> None:
    async def delayed() -> None:
        queue: DelayingQueue[str] = DelayingQueue("clock")
        start = time.monotonic()
        queue.add_after("item", 0.05)
        item = await asyncio.wait_for(queue.get(), timeout=5)
        waited = time.monotonic() - start
        assert item == "item"
        assert waited >= 0.05 - 1e-9, f"the item came after {waited:.4f}s, before its 0.05s delay"

    LOOPS[loop](delayed())


def test_the_clock_reads_from_a_thread_without_a_loop() -> None:
    seen: list[float] = []
    before = time.monotonic()
    thread = threading.Thread(target=lambda: seen.append(REAL_CLOCK.now()))
    thread.start()
    thread.join(timeout=5)
    assert len(seen) == 1 and before <= seen[0] <= time.monotonic()
