"""``rest_client_requests_total``: the one client-go metric controller-runtime exports.

Name and labels match client-go's adapter exactly (``code``, ``method``, ``host``) so existing
dashboards work. The collector is created unregistered; the manager's metrics registry (built
elsewhere) registers it with ``register(registry)``, and tests read it directly.
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Histogram

REST_CLIENT_REQUESTS = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
    registry=None,
)


RATE_LIMITER_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)

REST_CLIENT_RATE_LIMITER_DURATION = Histogram(
    "rest_client_rate_limiter_duration_seconds",
    "Client side rate limiter latency in seconds. Broken down by verb, and host.",
    ["verb", "host"],
    buckets=RATE_LIMITER_BUCKETS,
    registry=None,
)
"""client-go's client-side throttling histogram (its name, labels and buckets): observed for
every request when ``qps`` is set, so a dashboard shows how long the token bucket held calls."""


def register(registry: CollectorRegistry) -> None:
    """Register the client metrics on ``registry`` (idempotent)."""
    for collector in (REST_CLIENT_REQUESTS, REST_CLIENT_RATE_LIMITER_DURATION):
        with contextlib.suppress(ValueError):  # already registered on this registry
            registry.register(collector)


def requests_count(code: str, method: str, host: str) -> float:
    """Current value of one series (for tests and diagnostics)."""
    value: float = REST_CLIENT_REQUESTS.labels(code=code, method=method, host=host)._value.get()
    return value
