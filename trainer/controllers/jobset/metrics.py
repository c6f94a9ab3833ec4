"""The two JobSet counters (docs/behaviour/jobset.md §4), on the framework's registry so ``/metrics`` serves
them."""

from __future__ import annotations

import functools

from prometheus_client import CollectorRegistry, Counter

from manager.metrics.registry import REGISTRY


def _jobset_counter(name: str, documentation: str, registry: CollectorRegistry) -> Counter:
    """A ``jobset_<name>`` counter by ``jobset_name`` and ``namespace``."""
    return Counter(name, documentation, ["jobset_name", "namespace"], subsystem="jobset", registry=registry)


class JobSetMetrics:
    """``jobset_failed_total`` and ``jobset_completed_total`` by ``jobset_name`` and ``namespace``.

    A registry other than the manager's can be given, so tests count in isolation.
    """

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.failed = _jobset_counter("failed_total", "The total number of failed JobSets", registry)
        self.completed = _jobset_counter("completed_total", "The total number of completed JobSets", registry)

    def jobset_failed(self, name: str, namespace: str) -> None:
        self.failed.labels(jobset_name=name, namespace=namespace).inc()

    def jobset_completed(self, name: str, namespace: str) -> None:
        self.completed.labels(jobset_name=name, namespace=namespace).inc()


# Cached: the manager's registry refuses a second registration of the same names.
@functools.cache
def default_metrics() -> JobSetMetrics:
    """The counters on the manager's registry, registered once per process."""
    return JobSetMetrics()
