"""ResourceList arithmetic on exact quantities, shared by every controller that sums requests.

PodGroup ``minResources`` and ElasticQuota ``status.used`` are sums that upstream computes with
``resource.Quantity``; doing it once here keeps their printing identical (``1250m`` not
``1.2500000001``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from manager.meta.quantity import Quantity, QuantityError

ResourceQuantities = dict[str, Quantity]


def quantities(values: Mapping[str, Any] | None) -> ResourceQuantities:
    """A ResourceList as quantities; unparsable entries are skipped (the API server rejects them)."""
    out: ResourceQuantities = {}
    for name, value in (values or {}).items():
        try:
            out[name] = Quantity(value)
        except (QuantityError, TypeError):
            continue
    return out


def add_resources(total: ResourceQuantities, more: Mapping[str, Quantity]) -> None:
    """Key-wise sum, union of keys (Go's ``addResourceList`` / quota ``Add``)."""
    for name, quantity in more.items():
        total[name] = total[name] + quantity if name in total else quantity


def max_resources(total: ResourceQuantities, other: Mapping[str, Quantity]) -> None:
    """Key-wise maximum, union of keys (Go's quota ``Max``)."""
    for name, quantity in other.items():
        if name not in total or quantity.cmp(total[name]) > 0:
            total[name] = quantity


def scale_resources(values: Mapping[str, Quantity], count: int) -> ResourceQuantities:
    """Each quantity multiplied by ``count``."""
    return {name: quantity * count for name, quantity in values.items()}


def render_resources(values: Mapping[str, Quantity]) -> dict[str, str]:
    """Canonical strings, as the Go client serialises a ResourceList."""
    return {name: str(quantity) for name, quantity in sorted(values.items())}
