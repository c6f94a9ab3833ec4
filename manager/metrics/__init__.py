"""Prometheus metrics with controller-runtime's and client-go's exact names, labels and buckets."""

from manager.metrics.registry import REGISTRY
from manager.metrics.server import metrics_app, metrics_server

__all__ = ["REGISTRY", "metrics_app", "metrics_server"]
