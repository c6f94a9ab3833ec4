"""controller-runtime's controller metrics: names, labels and buckets as in v0.22 (updated on every
reconcile, so without locks: ``manager.metrics.unlocked``)."""

from __future__ import annotations

from manager.metrics.registry import REGISTRY
from manager.metrics.unlocked import CounterFamily, GaugeFamily, HistogramFamily

RECONCILE_RESULTS = ("success", "error", "requeue", "requeue_after")

RECONCILE_TIME_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
)  # fmt: skip

RECONCILE_TOTAL = CounterFamily(
    "controller_runtime_reconcile_total",
    "Total number of reconciliations per controller",
    ["controller", "result"],
    REGISTRY,
)
RECONCILE_ERRORS = CounterFamily(
    "controller_runtime_reconcile_errors_total",
    "Total number of reconciliation errors per controller",
    ["controller"],
    REGISTRY,
)
TERMINAL_RECONCILE_ERRORS = CounterFamily(
    "controller_runtime_terminal_reconcile_errors_total",
    "Total number of terminal reconciliation errors per controller",
    ["controller"],
    REGISTRY,
)
RECONCILE_PANICS = CounterFamily(
    "controller_runtime_reconcile_panics_total",
    "Total number of reconciliation panics per controller",
    ["controller"],
    REGISTRY,
)
RECONCILE_TIME = HistogramFamily(
    "controller_runtime_reconcile_time_seconds",
    "Length of time per reconciliation per controller",
    ["controller"],
    REGISTRY,
    buckets=RECONCILE_TIME_BUCKETS,
)
WORKER_COUNT = GaugeFamily(
    "controller_runtime_max_concurrent_reconciles",
    "Maximum number of concurrent reconciles per controller",
    ["controller"],
    REGISTRY,
)
ACTIVE_WORKERS = GaugeFamily(
    "controller_runtime_active_workers",
    "Number of currently used workers per controller",
    ["controller"],
    REGISTRY,
)


def initialize(controller: str, max_concurrent_reconciles: int) -> None:
    """Create every series of a controller at zero, as controller-runtime does at start."""
    for result in RECONCILE_RESULTS:
        RECONCILE_TOTAL.labels(controller, result).inc(0)
    RECONCILE_ERRORS.labels(controller).inc(0)
    TERMINAL_RECONCILE_ERRORS.labels(controller).inc(0)
    RECONCILE_PANICS.labels(controller).inc(0)
    WORKER_COUNT.labels(controller).set(max_concurrent_reconciles)
    ACTIVE_WORKERS.labels(controller).set(0)
