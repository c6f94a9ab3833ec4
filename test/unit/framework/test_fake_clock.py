"""The fake clock: time moves only when told, timers fire in order, autojump skips idle waits."""

from __future__ import annotations

import asyncio

from manager.testing.clock import FakeClock


async def test_sleep_wakes_exactly_at_its_deadline() -> None:
    clock = FakeClock()
    start = clock.now()
    woke: list[float] = []

    async def sleeper(seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(clock.now() - start)

    tasks = [asyncio.create_task(sleeper(s)) for s in (3.0, 1.0, 2.0)]
    await clock.advance(1.5)
    assert woke == [1.0]
    await clock.advance(10)
    assert woke == [1.0, 2.0, 3.0]
    await asyncio.gather(*tasks)
    assert clock.pending_timers() == 0


async def test_chained_timers_fire_within_one_advance() -> None:
    clock = FakeClock()
    ticks: list[float] = []

    async def ticker() -> None:
        for _ in range(5):
            await clock.sleep(2)
            ticks.append(clock.now())

    task = asyncio.create_task(ticker())
    await clock.advance(10)
    assert len(ticks) == 5 and ticks[-1] - ticks[0] == 8
    await task


async def test_autojump_finishes_long_sleeps_at_once() -> None:
    clock = FakeClock()
    start = clock.now()
    loop = asyncio.get_running_loop()
    real_start = loop.time()
    async with clock.autojump():
        await clock.sleep(3600)
        await clock.sleep(1000)
    assert clock.now() - start == 4600
    assert loop.time() - real_start < 2
