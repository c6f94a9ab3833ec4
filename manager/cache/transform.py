"""Transforms applied to every object before it is stored (memory is the point).

``strip_managed_fields`` is on by default in this port (controller-runtime makes it opt-in):
managedFields are often the largest part of an object and controllers never read them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Transform = Callable[[dict[str, Any]], dict[str, Any]]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def strip_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if meta is not None:
        meta.pop("managedFields", None)
    return obj


def strip_last_applied(obj: dict[str, Any]) -> dict[str, Any]:
    annotations = (obj.get("metadata") or {}).get("annotations")
    if annotations:
        annotations.pop(LAST_APPLIED, None)
    return obj


def compose(*transforms: Transform) -> Transform:
    def run(obj: dict[str, Any]) -> dict[str, Any]:
        for t in transforms:
            obj = t(obj)
        return obj

    return run


def identity(obj: dict[str, Any]) -> dict[str, Any]:
    return obj
