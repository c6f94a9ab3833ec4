"""client-go's workqueue metrics with controller-runtime's labels (``name`` and ``controller``).

``unfinished_work_seconds`` and ``longest_running_processor_seconds`` are computed when
Prometheus scrapes instead of by a 500 ms refresh loop: nothing wakes up while idle.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

from manager.metrics.registry import REGISTRY
from manager.metrics.unlocked import CounterFamily, GaugeFamily, HistogramFamily

# ExponentialBuckets(10e-9, 10, 12): 1e-8 ... 1e3 seconds
QUEUE_BUCKETS = tuple(10e-9 * 10**i for i in range(12))

LABELS = ["name", "controller"]

DEPTH = GaugeFamily("workqueue_depth", "Current depth of workqueue", [*LABELS, "priority"], registry=REGISTRY)
ADDS = CounterFamily(
    "workqueue_adds_total", "Total number of adds handled by workqueue", LABELS, registry=REGISTRY
)
QUEUE_LATENCY = HistogramFamily(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested",
    LABELS,
    buckets=QUEUE_BUCKETS,
    registry=REGISTRY,
)
WORK_DURATION = HistogramFamily(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes.",
    LABELS,
    buckets=QUEUE_BUCKETS,
    registry=REGISTRY,
)
UNFINISHED_WORK = GaugeFamily(
    "workqueue_unfinished_work_seconds",
    "How many seconds of work has been done that is in progress and hasn't been observed by "
    "work_duration. Large values indicate stuck threads. One can deduce the number of stuck "
    "threads by observing the rate at which this increases.",
    LABELS,
    registry=REGISTRY,
)
LONGEST_RUNNING = GaugeFamily(
    "workqueue_longest_running_processor_seconds",
    "How many seconds has the longest running processor for workqueue been running.",
    LABELS,
    registry=REGISTRY,
)
RETRIES = CounterFamily(
    "workqueue_retries_total", "Total number of retries handled by workqueue", LABELS, registry=REGISTRY
)


class PrometheusQueueMetrics:
    """``manager.workqueue.QueueMetrics`` reporting to the manager registry for one controller."""

    def __init__(self, name: str, *, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._added_at: dict[Hashable, float] = {}
        self._started_at: dict[Hashable, float] = {}
        labels = (name, name)
        self._depth = DEPTH.labels(name, name, "")
        self._adds = ADDS.labels(*labels)
        self._latency = QUEUE_LATENCY.labels(*labels)
        self._work = WORK_DURATION.labels(*labels)
        self._retries = RETRIES.labels(*labels)
        UNFINISHED_WORK.labels(*labels).set_function(self._unfinished)
        LONGEST_RUNNING.labels(*labels).set_function(self._longest)

    def add(self, item: Hashable) -> None:
        self._adds.inc()
        self._depth.inc()
        self._added_at.setdefault(item, self._now())

    def get(self, item: Hashable) -> None:
        self._depth.dec()
        now = self._now()
        added = self._added_at.pop(item, None)
        if added is not None:
            self._latency.observe(now - added)
        self._started_at[item] = now

    def done(self, item: Hashable) -> None:
        started = self._started_at.pop(item, None)
        if started is not None:
            self._work.observe(self._now() - started)

    def retry(self) -> None:
        self._retries.inc()

    # Called by a scrape, on the metrics server's thread, while the loop's workers change
    # ``_started_at``: list() copies it in one step, a generator over it could see it change.
    def _unfinished(self) -> float:
        now = self._now()
        return sum(now - started for started in list(self._started_at.values()))

    def _longest(self) -> float:
        now = self._now()
        return max((now - started for started in list(self._started_at.values())), default=0.0)
