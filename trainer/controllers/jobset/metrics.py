"""The two JobSet counters (docs/behaviour/jobset.md §4), on the framework's registry so ``/metrics`` serves
them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from manager.metrics.registry import REGISTRY


class JobSetMetrics:
    """``jobset_failed_total`` and ``jobset_completed_total`` by ``jobset_name`` and ``namespace``.

    A registry other than the manager's can be given, so tests count in isolation.
    """

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.failed = Counter(
            "failed_total",
            "The total number of failed JobSets",
            ["jobset_name", "namespace"],
            subsystem="jobset",
            registry=registry,
        )
        self.completed = Counter(
            "completed_total",
            "The total number of completed JobSets",
            ["jobset_name", "namespace"],
            subsystem="jobset",
            registry=registry,
        )

    def jobset_failed(self, name: str, namespace: str) -> None:
        self.failed.labels(jobset_name=name, namespace=namespace).inc()

    def jobset_completed(self, name: str, namespace: str) -> None:
        self.completed.labels(jobset_name=name, namespace=namespace).inc()


_DEFAULT: JobSetMetrics | None = None


def default_metrics() -> JobSetMetrics:
    """The counters on the manager's registry, registered once per process."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = JobSetMetrics()
    return _DEFAULT
