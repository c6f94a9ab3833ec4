"""The delaying queue with a fake clock: an item shows up exactly when its earliest ready time passes."""

from __future__ import annotations

import asyncio

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from manager.testing.clock import FakeClock
from manager.workqueue import DelayingQueue

ITEMS = st.sampled_from(["a", "b", "c", "d"])
DELAYS = st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.5, 10.0])


class DelayingMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.queue: DelayingQueue[str] = DelayingQueue("prop", clock=self.clock)
        self.ready_at: dict[str, float] = {}  # waiting item -> earliest ready time
        self.queued: list[str] = []

    def _model_add(self, item: str) -> None:
        if item not in self.queued:
            self.queued.append(item)

    @rule(item=ITEMS, delay=DELAYS)
    def add_after(self, item: str, delay: float) -> None:
        self.queue.add_after(item, delay)
        if delay <= 0:
            self._model_add(item)
            return
        ready = self.clock.now() + delay
        self.ready_at[item] = min(ready, self.ready_at.get(item, ready))

    @rule(item=ITEMS)
    def add(self, item: str) -> None:
        self.queue.add(item)
        self._model_add(item)

    @rule(seconds=st.sampled_from([0.25, 0.5, 1.0, 3.0]))
    def advance(self, seconds: float) -> None:
        self.clock.advance_nowait(seconds)
        due = sorted((t, i) for i, t in self.ready_at.items() if t <= self.clock.now())
        for _, item in due:
            del self.ready_at[item]
            self._model_add(item)

    @rule()
    def get_and_done(self) -> None:
        if not self.queued:
            try:
                self.queue.get_nowait()
                raise AssertionError("nothing is ready yet")
            except asyncio.QueueEmpty:
                return
        item = self.queue.get_nowait()
        assert item in self.queued
        self.queued.remove(item)
        self.queue.done(item)

    @invariant()
    def agrees(self) -> None:
        assert len(self.queue) == len(self.queued)
        assert sorted(self.queue._queue) == sorted(self.queued)
        assert self.queue.waiting() == len(self.ready_at)
        # one timer per queue, never one per waiting item
        assert self.clock.pending_timers() == (1 if self.ready_at else 0)
        if self.ready_at:
            assert self.clock.next_deadline() == min(self.ready_at.values())


TestDelayingMachine = DelayingMachine.TestCase
TestDelayingMachine.settings = settings(max_examples=200, stateful_step_count=50, deadline=None)
