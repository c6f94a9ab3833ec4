"""The manager's own Prometheus registry (not the global default one), as controller-runtime has.

Every framework metric is registered here, plus Python's process/platform/GC collectors as the
counterparts of Go's ``process_*``/``go_*``. ``*_created`` series are disabled so the output
matches what Go exporters print and existing dashboards expect.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, disable_created_metrics
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

disable_created_metrics()  # type: ignore[no-untyped-call]

REGISTRY = CollectorRegistry(auto_describe=True)
"""Where every framework metric lives; ``/metrics`` serves exactly this registry."""

ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)

__all__ = ["REGISTRY"]
