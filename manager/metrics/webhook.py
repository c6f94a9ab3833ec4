"""controller-runtime's webhook and certificate-watcher metrics.

The webhook server updates them; when its module defines a collector, that collector is the one
registered on the manager registry (see ``_adopt``).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from manager.metrics._adopt import adopt

_SERVER = "manager.webhook.metrics"

WEBHOOK_LATENCY = adopt(
    _SERVER,
    "WEBHOOK_LATENCY",
    Histogram,
    "controller_runtime_webhook_latency_seconds",
    "Histogram of the latency of processing admission requests",
    ["webhook"],
)  # Prometheus default buckets, as upstream
WEBHOOK_REQUESTS = adopt(
    _SERVER,
    "WEBHOOK_REQUESTS",
    Counter,
    "controller_runtime_webhook_requests_total",
    "Total number of admission requests by HTTP status code.",
    ["webhook", "code"],
)
WEBHOOK_IN_FLIGHT = adopt(
    _SERVER,
    "WEBHOOK_IN_FLIGHT",
    Gauge,
    "controller_runtime_webhook_requests_in_flight",
    "Current number of admission requests being served.",
    ["webhook"],
)
WEBHOOK_PANICS = adopt(
    _SERVER,
    "WEBHOOK_PANICS",
    Counter,
    "controller_runtime_webhook_panics_total",
    "Total number of webhook panics",
)
CONVERSION_WEBHOOK_PANICS = adopt(
    _SERVER,
    "CONVERSION_WEBHOOK_PANICS",
    Counter,
    "controller_runtime_conversion_webhook_panics_total",
    "Total number of conversion webhook panics",
)
CERT_READS = adopt(
    _SERVER, "CERT_READS", Counter, "certwatcher_read_certificate_total", "Total number of certificate reads"
)
CERT_READ_ERRORS = adopt(
    _SERVER,
    "CERT_READ_ERRORS",
    Counter,
    "certwatcher_read_certificate_errors_total",
    "Total number of certificate read errors",
)

RELAYED = (
    WEBHOOK_LATENCY,
    WEBHOOK_REQUESTS,
    WEBHOOK_IN_FLIGHT,
    WEBHOOK_PANICS,
    CONVERSION_WEBHOOK_PANICS,
    CERT_READS,
    CERT_READ_ERRORS,
)
"""What a webhook process's child relays to the manager (``manager.webhook.process``)."""


def initialize_webhook(path: str) -> None:
    """Create a webhook's series at zero (codes 200 and 500, as upstream pre-initialises)."""
    for code in ("200", "500"):
        WEBHOOK_REQUESTS.labels(path, code).inc(0)
    WEBHOOK_IN_FLIGHT.labels(path).set(0)
