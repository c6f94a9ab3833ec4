"""``rest_client_requests_total{code,method,host}``: the one client-go metric controller-runtime keeps.

Defined here so the REST client increments it without owning a registry.
"""

from __future__ import annotations

from prometheus_client import Counter

from manager.metrics.registry import REGISTRY

REST_CLIENT_REQUESTS = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
    registry=REGISTRY,
)


def observe_request(code: int | str, method: str, host: str) -> None:
    """Count one finished request; ``code`` is the HTTP status (or ``"<error>"`` if none came back)."""
    REST_CLIENT_REQUESTS.labels(str(code), method.upper(), host).inc()
