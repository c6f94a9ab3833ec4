"""Liveness and readiness probes: named checkers served on ``/healthz`` and ``/readyz`` in
upstream's response format."""

from manager.health.checks import Checker, CheckFailedError, flag_checker, ping
from manager.health.server import CheckSet, HealthProbeServer, health_app

__all__ = [
    "CheckFailedError",
    "CheckSet",
    "Checker",
    "HealthProbeServer",
    "flag_checker",
    "health_app",
    "ping",
]
