"""Share one collector per metric name between the registry and the module that updates it.

The client and the webhook server may define their own collectors (created unregistered) for
the metrics they update. Two collectors with one name cannot live on one registry, so when such a
module exists we register *its* collector on the manager registry instead of defining ours;
without it (this package used alone) we define the collector here. Either way exactly one
collector per name is exported and it is the one that is incremented.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import TypeVar

from prometheus_client.registry import Collector

from manager.metrics.registry import REGISTRY

C = TypeVar("C", bound=Collector)


def adopt(module: str, attribute: str, fallback: type[C], *args: object, **kwargs: object) -> C:
    """``module.attribute`` if that module defines it, else a new ``fallback(*args, **kwargs)``;
    the result is registered on ``REGISTRY`` (once)."""
    collector: C | None = None
    try:
        found = getattr(importlib.import_module(module), attribute, None)
    except ImportError:
        found = None
    if isinstance(found, fallback):
        collector = found
    if collector is None:
        collector = fallback(*args, registry=None, **kwargs)  # type: ignore[call-arg]
    with contextlib.suppress(ValueError):  # already registered by an earlier import
        REGISTRY.register(collector)
    return collector
