"""Patch values: what to send and with which content type.

``merge_from(original, modified)`` computes an RFC 7386 merge patch the way controller-runtime's
``MergeFrom`` does, optionally carrying the resourceVersion so a stale patch fails with 409.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import overload

from manager.client import rest
from manager.meta.object import Json


@dataclass(frozen=True, slots=True)
class Patch:
    content_type: str
    data: Json | list[Json]
    """The patch document: an object (merge, strategic, apply) or JSON Patch operations."""

    @classmethod
    def merge(cls, data: Json) -> Patch:
        return cls(rest.MERGE_PATCH, data)

    @classmethod
    def json(cls, operations: list[Json]) -> Patch:
        return cls(rest.JSON_PATCH, operations)

    @classmethod
    def strategic(cls, data: Json) -> Patch:
        """Strategic merge patch: built-in kinds only (the server rejects it for CRDs)."""
        return cls(rest.STRATEGIC_MERGE_PATCH, data)


@overload
def merge_diff(original: Json, modified: Json) -> Json: ...


@overload
def merge_diff(original: object, modified: object) -> object: ...


def merge_diff(original: object, modified: object) -> object:
    """The JSON merge patch turning ``original`` into ``modified`` (None = delete a key)."""
    if not isinstance(original, dict) or not isinstance(modified, dict):
        return modified
    out: Json = {}
    for key in original.keys() - modified.keys():
        out[key] = None
    for key, value in modified.items():
        if key not in original:
            out[key] = value
        elif original[key] != value:
            if isinstance(value, dict) and isinstance(original[key], dict):
                out[key] = merge_diff(original[key], value)
            else:
                out[key] = value
    return out


def merge_from(original: Json, modified: Json, *, optimistic_lock: bool = False) -> Patch:
    data = merge_diff(original, modified)
    if optimistic_lock:
        rv = (original.get("metadata") or {}).get("resourceVersion")
        if rv:
            data.setdefault("metadata", {})["resourceVersion"] = rv
    return Patch.merge(data)
