"""Throughput of the framework core, without a cluster (``make bench``, or run this file).

* work queue: add + get + done cycles per second (distinct keys, then duplicates collapsing);
* controller: informer events per second through predicates, handler, queue and one no-op
  reconcile per key, with 1 and 8 workers (in-memory informer, so this is the framework's own cost).
"""

from __future__ import annotations

import asyncio
import io
import time

import pytest

from manager import log
from manager.controller import Controller, KindSource, Options, Request, enqueue_for_object
from manager.scheme import GroupVersionKind
from manager.testing.informers import FakeInformers
from manager.workqueue import Queue, RateLimitingQueue

N = 100_000
# Floors far below what one core does, so the benchmark fails only on a real regression.
MIN_QUEUE_ITEMS_PER_S = 100_000
MIN_EVENTS_PER_S = 3_000

pytestmark = pytest.mark.bench


async def queue_cycles() -> float:
    queue: Queue[int] = Queue("bench")
    start = time.perf_counter()
    for i in range(N):
        queue.add(i)
    for _ in range(N):
        item = await queue.get()
        queue.done(item)
    return N / (time.perf_counter() - start)


async def duplicate_adds() -> float:
    queue: RateLimitingQueue[int] = RateLimitingQueue("bench")
    start = time.perf_counter()
    for i in range(N):
        queue.add(i % 100)
    return N / (time.perf_counter() - start)


async def controller_events(workers: int) -> float:
    kind = GroupVersionKind("example.com", "v1", "Widget")
    informers = FakeInformers()
    informer = informers.informer(kind)
    done = asyncio.Event()
    seen = 0
    total = 20_000

    async def reconcile(req: Request) -> None:
        nonlocal seen
        seen += 1
        if seen == total:
            done.set()

    ctrl = Controller(f"bench{workers}", reconcile, Options(max_concurrent_reconciles=workers))
    ctrl.watch(KindSource(informers, kind, enqueue_for_object()))
    started = asyncio.Event()
    task = asyncio.create_task(ctrl.start(started))
    await started.wait()
    objects = [{"metadata": {"name": f"w{i}", "namespace": "ns"}} for i in range(total)]
    start = time.perf_counter()
    for i, obj in enumerate(objects):
        informer.create(obj)
        if i % 500 == 0:
            await asyncio.sleep(0)  # let workers run, as a reflector yields between reads
    await done.wait()
    elapsed = time.perf_counter() - start
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return total / elapsed


async def main() -> None:
    log.configure(level="INFO", fmt="json", stream=io.StringIO())  # measure the framework, not the log sink
    print(f"workqueue add+get+done: {await queue_cycles():,.0f} items/s")
    print(f"workqueue duplicate add: {await duplicate_adds():,.0f} adds/s")
    for workers in (1, 8):
        print(
            f"events -> no-op reconcile ({workers} workers): {await controller_events(workers):,.0f} events/s"
        )


def test_bench_framework_core(capsys: pytest.CaptureFixture[str]) -> None:
    log.configure(level="INFO", fmt="json", stream=io.StringIO())
    queue_rate = asyncio.run(queue_cycles())
    event_rate = asyncio.run(controller_events(4))
    with capsys.disabled():
        print(
            f"\nworkqueue add+get+done: {queue_rate:,.0f} items/s; events -> no-op reconcile: {event_rate:,.0f}/s"
        )
    assert queue_rate > MIN_QUEUE_ITEMS_PER_S
    assert event_rate > MIN_EVENTS_PER_S


if __name__ == "__main__":
    asyncio.run(main())
