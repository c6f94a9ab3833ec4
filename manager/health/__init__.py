"""Liveness and readiness probes."""

from manager.health.checks import Checker, NotReadyError, flag_checker, ping
from manager.health.server import CheckSet, HealthProbeServer, health_app

__all__ = ["CheckSet", "Checker", "HealthProbeServer", "NotReadyError", "flag_checker", "health_app", "ping"]
