"""The work queue against client-go's rules, as a hypothesis state machine.

The model states the rules in their own terms: ``pending`` (handed out next, FIFO, no
duplicates), ``processing`` (handed out, not done) and ``again`` (added while processing, due
back once after ``done``). Any sequence of add/get/done/shutdown must agree with it.
"""

from __future__ import annotations

import asyncio

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from manager.workqueue import Queue, ShutDownError

ITEMS = st.sampled_from(["a", "b", "c", "d", "e"])


class QueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.queue: Queue[str] = Queue("prop")
        self.pending: list[str] = []
        self.processing: set[str] = set()
        self.again: set[str] = set()
        self.shut = False

    @rule(item=ITEMS)
    def add(self, item: str) -> None:
        self.queue.add(item)
        if self.shut or item in self.pending or item in self.again:
            return
        if item in self.processing:
            self.again.add(item)
        else:
            self.pending.append(item)

    @rule()
    def get(self) -> None:
        if self.pending:
            item = self.queue.get_nowait()
            assert item == self.pending.pop(0), "items come out in FIFO order"
            assert item not in self.processing, "an item is never handed to two workers"
            self.processing.add(item)
        elif self.shut:
            try:
                self.queue.get_nowait()
                raise AssertionError("a drained, shut down queue must refuse get")
            except ShutDownError:
                pass
        else:
            try:
                self.queue.get_nowait()
                raise AssertionError("nothing should be ready")
            except asyncio.QueueEmpty:
                pass

    @precondition(lambda self: bool(self.processing))
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        item = data.draw(st.sampled_from(sorted(self.processing)))
        self.queue.done(item)
        self.processing.discard(item)
        if item in self.again:
            self.again.discard(item)
            self.pending.append(item)

    @rule()
    def shutdown(self) -> None:
        self.queue.shutdown()
        self.shut = True

    @invariant()
    def length_matches(self) -> None:
        assert len(self.queue) == len(self.pending)
        for item in self.processing:
            assert self.queue.is_processing(item)


TestQueueMachine = QueueMachine.TestCase
TestQueueMachine.settings = settings(max_examples=300, stateful_step_count=60, deadline=None)
