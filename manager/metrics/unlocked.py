"""Metric families whose series are plain attributes: the counters, gauges and histograms a
controller and its work queue update on every event and every reconcile.

prometheus_client guards every series with a lock and checks on every call that it is a child
of a labelled family: a reconcile updates thirteen series, and those calls were the largest
share of the framework's own cost per reconcile (``make bench-framework``). These series are
written from the manager's event loop only (controllers, their queues and the informers'
handlers all run there), so they need no lock; a scrape, from the metrics server, reads them as
they are. The families implement prometheus_client's collector protocol and are registered on
``REGISTRY`` like any other, so what ``/metrics`` prints (names, help, labels, buckets, order)
is what prometheus_client's own families would print.
"""

from __future__ import annotations

import abc
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from typing import Generic, TypeVar, cast

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import INF, floatToGoString

C = TypeVar("C")


class CounterChild:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("counters can only be incremented by non-negative amounts")
        self.value += amount


class GaugeChild:
    __slots__ = ("_function", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self._function: Callable[[], float] | None = None

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount

    def set(self, value: float) -> None:
        self.value = float(value)

    def set_function(self, function: Callable[[], float]) -> None:
        """Read ``function()`` at every scrape instead of a stored value."""
        self._function = function

    def get(self) -> float:
        return float(self._function()) if self._function is not None else self.value


class HistogramChild:
    __slots__ = ("_bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        # the first bucket whose upper bound is >= amount ("le")
        self.counts[bisect_left(self._bounds, amount)] += 1
        self.sum += amount


class _Family(abc.ABC, Generic[C]):
    """A labelled family: ``labels(*values)`` gives (and keeps) the series of those values."""

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], registry: CollectorRegistry | None
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._series: dict[tuple[str, ...], C] = {}
        if registry is not None:
            registry.register(self)

    @abc.abstractmethod
    def _new(self) -> C:
        """A new series of this family's kind."""

    def labels(self, *values: str) -> C:
        key = tuple(str(v) for v in values)
        series = self._series.get(key)
        if series is None:
            if len(key) != len(self.labelnames):
                raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {key}")
            series = self._series[key] = self._new()
        return series

    def series(self) -> Iterable[tuple[tuple[str, ...], C]]:
        return list(self._series.items())  # a copy: a scrape may run while series are added

    def describe(self) -> list[Metric]:
        return [self._family()]

    def collect(self) -> list[Metric]:
        family = self._family()
        for values, child in self.series():
            self._add(family, values, child)
        return [family]

    @abc.abstractmethod
    def _family(self) -> Metric:
        """An empty metric family of this family's name, help and type."""

    @abc.abstractmethod
    def _add(self, family: Metric, values: tuple[str, ...], child: C) -> None:
        """Add ``child``'s samples to ``family``."""


class CounterFamily(_Family[CounterChild]):
    def _new(self) -> CounterChild:
        return CounterChild()

    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def _add(self, family: Metric, values: tuple[str, ...], child: CounterChild) -> None:
        cast(CounterMetricFamily, family).add_metric(values, child.value)


class GaugeFamily(_Family[GaugeChild]):
    def _new(self) -> GaugeChild:
        return GaugeChild()

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def _add(self, family: Metric, values: tuple[str, ...], child: GaugeChild) -> None:
        cast(GaugeMetricFamily, family).add_metric(values, child.get())


class HistogramFamily(_Family[HistogramChild]):
    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        registry: CollectorRegistry | None,
        *,
        buckets: Sequence[float],
    ) -> None:
        bounds = tuple(float(b) for b in buckets)
        if bounds and bounds[-1] == INF:
            bounds = bounds[:-1]
        if list(bounds) != sorted(bounds):
            raise ValueError(f"{name}: buckets must be in increasing order")
        self.bounds = bounds
        self._les = [*(floatToGoString(b) for b in bounds), "+Inf"]  # type: ignore[no-untyped-call]
        super().__init__(name, documentation, labelnames, registry)

    def _new(self) -> HistogramChild:
        return HistogramChild(self.bounds)

    def _family(self) -> HistogramMetricFamily:
        return HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def _add(self, family: Metric, values: tuple[str, ...], child: HistogramChild) -> None:
        counts, total = list(child.counts), child.sum
        cumulative, buckets = 0, []
        for le, count in zip(self._les, counts, strict=True):
            cumulative += count
            buckets.append((le, float(cumulative)))
        cast(HistogramMetricFamily, family).add_metric(list(values), buckets, total)
