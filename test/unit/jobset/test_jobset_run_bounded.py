"""``run_bounded``, the JobSet controller's ``workqueue.ParallelizeUntil``: every call runs, at most
``limit`` at once and never more workers than calls; the errors come back in the calls' order;
a lazy iterable is drawn as the workers go; the iterable itself failing fails the whole run."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator

import pytest

from trainer.controllers.jobset.reconciler import run_bounded

Call = Callable[[], Awaitable[None]]


async def test_no_call_runs_nothing_and_starts_no_task() -> None:
    tasks = len(asyncio.all_tasks())
    assert await run_bounded([]) == []
    assert len(asyncio.all_tasks()) == tasks


async def test_one_call_runs_in_the_callers_task_and_its_error_is_returned() -> None:
    ran_in: list[asyncio.Task[object] | None] = []
    boom = ValueError("boom")

    async def call() -> None:
        ran_in.append(asyncio.current_task())
        raise boom

    assert await run_bounded([call]) == [boom]
    assert ran_in == [asyncio.current_task()]


async def test_many_calls_run_at_most_limit_at_once_errors_in_call_order() -> None:
    running = peak = 0
    done: list[int] = []

    def call(i: int) -> Call:
        async def run() -> None:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.001 * (7 - i % 7))  # later calls may finish first
            running -= 1
            done.append(i)
            if i % 3 == 0:
                raise RuntimeError(f"call {i}")

        return run

    errors = await run_bounded([call(i) for i in range(20)], limit=4)
    assert sorted(done) == list(range(20))
    assert peak == 4
    assert [str(e) for e in errors] == [f"call {i}" for i in range(0, 20, 3)]


async def test_fewer_calls_than_the_limit_get_one_worker_each() -> None:
    running = peak = 0
    release = asyncio.Event()

    async def call() -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await release.wait()
        running -= 1

    tasks = len(asyncio.all_tasks())
    run = asyncio.create_task(run_bounded([call, call, call], limit=50))
    for _ in range(100):  # each worker reaches its call within a few loop turns
        if peak == 3:
            break
        await asyncio.sleep(0)
    assert peak == 3, f"{peak} of the 3 calls started"
    assert len(asyncio.all_tasks()) == tasks + 1 + 3  # the run and its three workers, not fifty
    release.set()
    assert await run == []


async def test_a_lazy_iterable_is_drawn_as_workers_go() -> None:
    drawn = 0
    finished = 0

    def calls() -> Iterator[Call]:
        nonlocal drawn
        for _ in range(100):
            drawn += 1
            # never more than the limit ahead of what finished (the first limit are drawn at once)
            assert drawn <= finished + 2 * 5

            async def run() -> None:
                nonlocal finished
                await asyncio.sleep(0)
                finished += 1

            yield run

    assert await run_bounded(calls(), limit=5) == []
    assert finished == drawn == 100


async def test_the_iterable_failing_fails_the_run() -> None:
    async def ok() -> None:
        await asyncio.sleep(0)

    def calls() -> Iterator[Call]:
        yield ok
        yield ok
        raise KeyError("the iterable")

    with pytest.raises(KeyError, match="the iterable"):
        await run_bounded(calls(), limit=1)

    def later() -> Iterator[Call]:
        for _ in range(10):
            yield ok
        raise KeyError("later")

    with pytest.raises(KeyError, match="later"):
        await run_bounded(later(), limit=3)
