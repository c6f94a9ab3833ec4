"""controller-runtime's webhook and certificate-watcher metrics, for the webhook server to use."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from manager.metrics.registry import REGISTRY

WEBHOOK_LATENCY = Histogram(
    "controller_runtime_webhook_latency_seconds",
    "Histogram of the latency of processing admission requests",
    ["webhook"],
    registry=REGISTRY,
)  # Prometheus default buckets, as upstream
WEBHOOK_REQUESTS = Counter(
    "controller_runtime_webhook_requests_total",
    "Total number of admission requests by HTTP status code.",
    ["webhook", "code"],
    registry=REGISTRY,
)
WEBHOOK_IN_FLIGHT = Gauge(
    "controller_runtime_webhook_requests_in_flight",
    "Current number of admission requests being served.",
    ["webhook"],
    registry=REGISTRY,
)
WEBHOOK_PANICS = Counter(
    "controller_runtime_webhook_panics_total",
    "Total number of webhook panics",
    registry=REGISTRY,
)
CONVERSION_WEBHOOK_PANICS = Counter(
    "controller_runtime_conversion_webhook_panics_total",
    "Total number of conversion webhook panics",
    registry=REGISTRY,
)
CERT_READS = Counter(
    "certwatcher_read_certificate_total",
    "Total number of certificate reads",
    registry=REGISTRY,
)
CERT_READ_ERRORS = Counter(
    "certwatcher_read_certificate_errors_total",
    "Total number of certificate read errors",
    registry=REGISTRY,
)


def initialize_webhook(path: str) -> None:
    """Create a webhook's series at zero (codes 200 and 500, as upstream pre-initialises)."""
    for code in ("200", "500"):
        WEBHOOK_REQUESTS.labels(path, code).inc(0)
    WEBHOOK_IN_FLIGHT.labels(path).set(0)
