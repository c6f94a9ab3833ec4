"""Transforms applied to every object before it is stored (memory is the point).

``strip_managed_fields`` is on by default in this port (controller-runtime makes it opt-in):
managedFields are often the largest part of an object and controllers never read them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from manager.meta.object import Json

Transform = Callable[[Json], Json]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def strip_managed_fields(obj: Json) -> Json:
    meta = obj.get("metadata")
    if meta is not None:
        meta.pop("managedFields", None)
    return obj


def strip_last_applied(obj: Json) -> Json:
    annotations = (obj.get("metadata") or {}).get("annotations")
    if annotations:
        annotations.pop(LAST_APPLIED, None)
    return obj


def compose(*transforms: Transform) -> Transform:
    def run(obj: Json) -> Json:
        for t in transforms:
            obj = t(obj)
        return obj

    return run


def identity(obj: Json) -> Json:
    return obj


FieldSpec = Mapping[str, "FieldSpec | bool"]
"""Which fields :func:`project` keeps: ``True`` keeps a field whole, a nested spec keeps those
fields of it (applied to every element when the field is a list)."""


def _keep(value: Any, spec: FieldSpec | bool) -> Any:
    if spec is True:
        return value
    if isinstance(value, list):
        return [_keep(item, spec) for item in value]
    if isinstance(value, dict) and isinstance(spec, Mapping):
        return {key: _keep(value[key], sub) for key, sub in spec.items() if key in value}
    return value


def project(spec: FieldSpec) -> Transform:
    """A transform keeping only the fields ``spec`` names (a metadata-and-a-few-fields view).

    What it drops is gone for every reader of the informer: use it for objects whose readers
    are known to read nothing else (see :func:`by_predicate` to keep some objects whole).
    """

    def run(obj: Json) -> Json:
        kept: Json = _keep(obj, spec)
        return kept

    return run


def by_predicate(predicate: Callable[[Json], bool], matched: Transform, other: Transform) -> Transform:
    """``matched`` for the objects ``predicate`` accepts, ``other`` for the rest."""

    def run(obj: Json) -> Json:
        return matched(obj) if predicate(obj) else other(obj)

    return run
