"""The unlocked metric families print what prometheus_client's own families print for the same
updates, so replacing one by the other changes nothing a scrape, a dashboard or an alert sees."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from manager.metrics.unlocked import CounterFamily, GaugeFamily, HistogramFamily

pytestmark = pytest.mark.unit

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 1.0, 2.5, 5, 10, 60)
LABELS = ["controller", "result"]


def _pair() -> tuple[CollectorRegistry, CollectorRegistry]:
    disable_created_metrics()  # type: ignore[no-untyped-call]  # as manager.metrics.registry does
    return CollectorRegistry(auto_describe=True), CollectorRegistry(auto_describe=True)


updates = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(["success", "error"]),
        st.floats(min_value=0, max_value=100, allow_nan=False),
    ),
    max_size=40,
)


@given(updates)
@settings(max_examples=60, deadline=None)
def test_the_same_text_as_prometheus_client(ops: list[tuple[str, str, float]]) -> None:
    theirs, ours = _pair()
    counter = Counter("x_reconcile_total", "Reconciles.", LABELS, registry=theirs)
    gauge = Gauge("x_active", "Active.", LABELS, registry=theirs)
    histogram = Histogram("x_time_seconds", "Time.", LABELS, buckets=BUCKETS, registry=theirs)
    our_counter = CounterFamily("x_reconcile_total", "Reconciles.", LABELS, ours)
    our_gauge = GaugeFamily("x_active", "Active.", LABELS, ours)
    our_histogram = HistogramFamily("x_time_seconds", "Time.", LABELS, ours, buckets=BUCKETS)
    for controller, result, amount in ops:
        counter.labels(controller, result).inc(amount)
        our_counter.labels(controller, result).inc(amount)
        gauge.labels(controller, result).inc(amount)
        gauge.labels(controller, result).dec(amount / 2)
        our_gauge.labels(controller, result).inc(amount)
        our_gauge.labels(controller, result).dec(amount / 2)
        histogram.labels(controller, result).observe(amount)
        our_histogram.labels(controller, result).observe(amount)
    assert generate_latest(ours).decode() == generate_latest(theirs).decode()


def test_a_bucket_bound_counts_in_its_own_bucket_and_a_function_gauge_is_read_at_scrape() -> None:
    theirs, ours = _pair()
    histogram = Histogram("q_seconds", "Q.", ["name"], buckets=BUCKETS, registry=theirs)
    gauge = Gauge("q_longest", "L.", ["name"], registry=theirs)
    our_histogram = HistogramFamily("q_seconds", "Q.", ["name"], ours, buckets=BUCKETS)
    our_gauge = GaugeFamily("q_longest", "L.", ["name"], ours)
    for bound in (*BUCKETS, 0.0, 1e9):
        histogram.labels("w").observe(bound)
        our_histogram.labels("w").observe(bound)
    reading = [1.5]
    gauge.labels("w").set_function(lambda: reading[0])
    our_gauge.labels("w").set_function(lambda: reading[0])
    reading[0] = 7.25
    assert generate_latest(ours).decode() == generate_latest(theirs).decode()
    assert ours.get_sample_value("q_seconds_bucket", {"name": "w", "le": "0.005"}) == 2.0
    assert ours.get_sample_value("q_longest", {"name": "w"}) == 7.25


def test_misuse_is_refused_as_prometheus_client_refuses_it() -> None:
    _, ours = _pair()
    counter = CounterFamily("m_total", "M.", ["a", "b"], ours)
    with pytest.raises(ValueError, match="expected labels"):
        counter.labels("only-one")
    with pytest.raises(ValueError, match="non-negative"):
        counter.labels("x", "y").inc(-1)
    with pytest.raises(ValueError, match="increasing"):
        HistogramFamily("h_seconds", "H.", [], ours, buckets=(2, 1))
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        CounterFamily("m_total", "M again.", ["a", "b"], ours)
