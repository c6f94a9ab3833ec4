"""Property: whatever the interleaving of events and reconcile completions, with any number of
workers, a key is never reconciled twice at once and every event is followed by a reconcile
that started after it (level-triggered: nothing is lost, repeats collapse)."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from manager.controller import Controller, KindSource, Options, Request, enqueue_for_object
from manager.scheme import GroupVersionKind
from manager.testing.clock import FakeClock
from manager.testing.informers import FakeInformers

KIND = GroupVersionKind("example.com", "v1", "Widget")
KEYS = ["a", "b", "c"]
STEPS = st.lists(
    st.tuples(st.sampled_from(["event", "finish"]), st.sampled_from(KEYS)),
    min_size=1,
    max_size=40,
)


async def scenario(steps: list[tuple[str, str]], workers: int, name: str) -> None:
    clock = FakeClock()
    informers = FakeInformers()
    informer = informers.informer(KIND)
    tick = 0
    last_event: dict[str, int] = {}
    last_start: dict[str, int] = {}
    running: dict[str, asyncio.Event] = {}
    overlap: list[str] = []

    async def reconcile(req: Request) -> None:
        nonlocal tick
        if req.name in running:
            overlap.append(req.name)
        tick += 1
        last_start[req.name] = tick
        gate = running[req.name] = asyncio.Event()
        try:
            await gate.wait()
        finally:
            del running[req.name]

    ctrl = Controller(name, reconcile, Options(max_concurrent_reconciles=workers, clock=clock))
    ctrl.watch(KindSource(informers, KIND, enqueue_for_object()))
    started = asyncio.Event()
    task = asyncio.create_task(ctrl.start(started))
    await asyncio.wait_for(started.wait(), 5)
    try:
        for action, key in steps:
            if action == "event":
                tick += 1
                last_event[key] = tick
                obj: dict[str, Any] = {
                    "metadata": {"name": key, "namespace": "ns", "labels": {"t": str(tick)}}
                }
                if any(k.name == key for k in informer.objects):
                    informer.update(obj)
                else:
                    informer.create(obj)
            elif key in running:
                running[key].set()
            await clock.settle()
        for _ in range(100):  # drain: finish whatever runs until nothing does
            if not running:
                break
            for gate in list(running.values()):
                gate.set()
            await clock.settle()
        assert not running, "reconciles still running after draining"
        assert not overlap, f"keys reconciled concurrently: {overlap}"
        for key, event_tick in last_event.items():
            assert last_start.get(key, 0) > event_tick, f"{key}: event at {event_tick} never reconciled after"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@settings(max_examples=150, deadline=None)
@given(steps=STEPS, workers=st.integers(min_value=1, max_value=4))
def test_level_triggered_and_serialized(steps: list[tuple[str, str]], workers: int) -> None:
    asyncio.run(scenario(steps, workers, "levelprop"))
