"""``rest_client_requests_total{code,method,host}``: the one client-go metric controller-runtime keeps.

The REST client increments it; if the client module defines the counter it is that one that is
registered here (see ``_adopt``), so the exported series are the counted ones.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from manager.metrics._adopt import adopt

REST_CLIENT_REQUESTS = adopt(
    "manager.client.metrics",
    "REST_CLIENT_REQUESTS",
    Counter,
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
)


REST_CLIENT_RATE_LIMITER_DURATION = adopt(
    "manager.client.metrics",
    "REST_CLIENT_RATE_LIMITER_DURATION",
    Histogram,
    "rest_client_rate_limiter_duration_seconds",
    "Client side rate limiter latency in seconds. Broken down by verb, and host.",
    ["verb", "host"],
    buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0),
)


def observe_request(code: int | str, method: str, host: str) -> None:
    """Count one finished request; ``code`` is the HTTP status (or ``"<error>"`` if none came back)."""
    REST_CLIENT_REQUESTS.labels(str(code), method.upper(), host).inc()
