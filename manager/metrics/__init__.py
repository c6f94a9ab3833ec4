"""Prometheus metrics with controller-runtime's and client-go's exact names, labels and buckets.

Importing the package registers the whole catalogue on ``REGISTRY`` (as Go's init() does), so
``/metrics`` lists every family even before anything has been counted.
"""

from manager.metrics import client, controller, leader, webhook, workqueue
from manager.metrics.registry import REGISTRY
from manager.metrics.server import metrics_app, metrics_server

__all__ = [
    "REGISTRY",
    "client",
    "controller",
    "leader",
    "metrics_app",
    "metrics_server",
    "webhook",
    "workqueue",
]
