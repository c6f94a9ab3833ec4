"""``rest_client_requests_total{code,method,host}``: the one client-go metric controller-runtime keeps.

The REST client increments it; if the client module defines the counter it is that one that is
registered here (see ``_adopt``), so the exported series are the counted ones.
"""

from __future__ import annotations

from prometheus_client import Counter

from manager.metrics._adopt import adopt

REST_CLIENT_REQUESTS = adopt(
    "manager.client.metrics",
    "REST_CLIENT_REQUESTS",
    Counter,
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
)


def observe_request(code: int | str, method: str, host: str) -> None:
    """Count one finished request; ``code`` is the HTTP status (or ``"<error>"`` if none came back)."""
    REST_CLIENT_REQUESTS.labels(str(code), method.upper(), host).inc()
