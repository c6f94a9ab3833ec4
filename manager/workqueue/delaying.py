"""A work queue that can add an item later, with one timer per queue (not one per item).

Waiting items live in a min-heap ordered by ready time. A single clock timer is armed for the
earliest ready time and re-armed when an earlier item arrives, so thousands of delayed keys
cost one heap entry each and no task or timer apiece. As in client-go, a duplicate waiting
item keeps the *earlier* ready time, ``add_after`` with a delay <= 0 is a plain ``add``, and
every ``add_after`` counts as a retry in the metrics (including a reconciler's requeue_after).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from typing import TypeVar

from manager.clock import REAL_CLOCK, Clock, TimerHandle
from manager.workqueue.metrics import QueueMetrics
from manager.workqueue.queue import Queue

T = TypeVar("T", bound=Hashable)


class DelayingQueue(Queue[T]):
    def __init__(
        self, name: str = "", *, metrics: QueueMetrics | None = None, clock: Clock | None = None
    ) -> None:
        super().__init__(name, metrics=metrics)
        self.clock: Clock = clock or REAL_CLOCK
        self._heap: list[tuple[float, int, T]] = []
        # item -> (ready time, sequence) of its live heap entry; other entries are stale.
        self._waiting: dict[T, tuple[float, int]] = {}
        self._seq = itertools.count()
        self._timer: TimerHandle | None = None
        self._timer_at: float | None = None

    def add_after(self, item: T, delay: float) -> None:
        """Add ``item`` once ``delay`` seconds have passed (immediately if ``delay <= 0``)."""
        if self.shutting_down:
            return
        self._metrics.retry()
        if delay <= 0:
            self.add(item)
            return
        ready = self.clock.now() + delay
        current = self._waiting.get(item)
        if current is not None and current[0] <= ready:
            return  # the earlier ready time wins
        seq = next(self._seq)
        self._waiting[item] = (ready, seq)
        heapq.heappush(self._heap, (ready, seq, item))
        if self._timer_at is None or ready < self._timer_at:
            self._arm(ready)

    def waiting(self) -> int:
        """Items scheduled for later (not yet in the queue)."""
        return len(self._waiting)

    def shutdown(self) -> None:
        super().shutdown()
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_at = None
        self._heap.clear()
        self._waiting.clear()

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self.clock.call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = None
        now = self.clock.now()
        while self._heap and self._heap[0][0] <= now:
            ready, seq, item = heapq.heappop(self._heap)
            if self._waiting.get(item) != (ready, seq):
                continue  # superseded by an earlier entry for the same item
            del self._waiting[item]
            self.add(item)
        while self._heap and self._waiting.get(self._heap[0][2]) != self._heap[0][:2]:
            heapq.heappop(self._heap)
        if self._heap:
            self._arm(self._heap[0][0])
