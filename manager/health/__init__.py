"""Liveness and readiness probes."""

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
