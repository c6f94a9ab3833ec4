"""Webhook and certwatcher metrics with controller-runtime's exact names (docs/behaviour/framework.md A.14).

Created unregistered; ``register(registry)`` puts them on the manager's registry.
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

WEBHOOK_LATENCY = Histogram(
    "controller_runtime_webhook_latency_seconds",
    "Histogram of the latency of processing admission requests",
    ["webhook"],
    registry=None,
)
WEBHOOK_REQUESTS = Counter(
    "controller_runtime_webhook_requests_total",
    "Total number of admission requests by HTTP status code.",
    ["webhook", "code"],
    registry=None,
)
WEBHOOK_IN_FLIGHT = Gauge(
    "controller_runtime_webhook_requests_in_flight",
    "Current number of admission requests being served.",
    ["webhook"],
    registry=None,
)
WEBHOOK_PANICS = Counter(
    "controller_runtime_webhook_panics_total",
    "Total number of webhook panics",
    registry=None,
)
CERT_READS = Counter(
    "certwatcher_read_certificate_total",
    "Total number of certificate reads",
    registry=None,
)
CERT_READ_ERRORS = Counter(
    "certwatcher_read_certificate_errors_total",
    "Total number of certificate read errors",
    registry=None,
)

ALL = (WEBHOOK_LATENCY, WEBHOOK_REQUESTS, WEBHOOK_IN_FLIGHT, WEBHOOK_PANICS, CERT_READS, CERT_READ_ERRORS)


def init_path(path: str) -> None:
    """Pre-initialise a webhook's series (codes 200 and 500), as controller-runtime does."""
    WEBHOOK_LATENCY.labels(webhook=path)
    WEBHOOK_IN_FLIGHT.labels(webhook=path)
    for code in ("200", "500"):
        WEBHOOK_REQUESTS.labels(webhook=path, code=code)


def register(registry: CollectorRegistry) -> None:
    for collector in ALL:
        with contextlib.suppress(ValueError):  # already registered
            registry.register(collector)
