"""The awaiting side of the queue: get waits, shutdown wakes, drain waits for done."""

from __future__ import annotations

import asyncio

import pytest

from manager.testing.clock import FakeClock
from manager.workqueue import DelayingQueue, Queue, ShutDownError


async def test_get_waits_for_add() -> None:
    queue: Queue[str] = Queue()
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    assert not getter.done()
    queue.add("x")
    assert await asyncio.wait_for(getter, 1) == "x"


async def test_shutdown_wakes_all_getters() -> None:
    queue: Queue[str] = Queue()
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await asyncio.sleep(0)
    queue.shutdown()
    for getter in getters:
        with pytest.raises(ShutDownError):
            await asyncio.wait_for(getter, 1)
    queue.add("ignored")
    assert len(queue) == 0


async def test_items_queued_before_shutdown_are_still_handed_out() -> None:
    queue: Queue[str] = Queue()
    queue.add("x")
    queue.shutdown()
    assert await queue.get() == "x"
    with pytest.raises(ShutDownError):
        await queue.get()


async def test_shutdown_with_drain_waits_for_in_flight_items() -> None:
    queue: Queue[str] = Queue()
    queue.add("x")
    item = await queue.get()
    drain = asyncio.create_task(queue.shutdown_with_drain())
    await asyncio.sleep(0.01)
    assert not drain.done(), "drain must wait for the item being processed"
    queue.done(item)
    await asyncio.wait_for(drain, 1)


async def test_cancelled_getter_does_not_swallow_the_wakeup() -> None:
    queue: Queue[str] = Queue()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.add("x")  # wakes `first`
    first.cancel()  # ... which is cancelled before it runs
    assert await asyncio.wait_for(second, 1) == "x"


async def test_re_add_while_processing_comes_back_once_after_done() -> None:
    queue: Queue[str] = Queue()
    queue.add("x")
    item = await queue.get()
    queue.add("x")
    queue.add("x")
    assert len(queue) == 0, "not handed out while a worker holds it"
    queue.done(item)
    assert len(queue) == 1
    assert await queue.get() == "x"
    queue.done("x")
    assert len(queue) == 0


async def test_delaying_queue_wakes_a_waiting_getter_at_the_ready_time() -> None:
    clock = FakeClock()
    queue: DelayingQueue[str] = DelayingQueue(clock=clock)
    getter = asyncio.create_task(queue.get())
    queue.add_after("x", 30)
    await clock.advance(29.9)
    assert not getter.done()
    await clock.advance(0.1)
    assert getter.done() and getter.result() == "x"
    queue.shutdown()
    assert clock.pending_timers() == 0
