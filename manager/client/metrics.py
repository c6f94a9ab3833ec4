"""``rest_client_requests_total``: the one client-go metric controller-runtime exports.

Name and labels match client-go's adapter exactly (``code``, ``method``, ``host``) so existing
dashboards work. The collector is created unregistered; the manager's metrics registry (built
elsewhere) registers it with ``register(registry)``, and tests read it directly.
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter

REST_CLIENT_REQUESTS = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
    registry=None,
)


def register(registry: CollectorRegistry) -> None:
    """Register the client metrics on ``registry`` (idempotent)."""
    with contextlib.suppress(ValueError):  # already registered on this registry
        registry.register(REST_CLIENT_REQUESTS)


def requests_count(code: str, method: str, host: str) -> float:
    """Current value of one series (for tests and diagnostics)."""
    value: float = REST_CLIENT_REQUESTS.labels(code=code, method=method, host=host)._value.get()
    return value
