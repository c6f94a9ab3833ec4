"""``Json`` (one Kubernetes object as the API server sends it) and its metadata accessors.

The accessors read a missing or null field as its zero value, as Go reads a zero struct, and
never create anything (``labels_of``/``annotations_of`` return copies); ``metadata_of`` is the
one that creates ``metadata`` (for writers).
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

import orjson

__all__ = [
    "Json",
    "annotations_of",
    "controller_uid",
    "json_copy",
    "json_kind",
    "labels_of",
    "meta_of",
    "metadata_of",
    "name_of",
    "namespace_of",
]

#: An object (or any JSON object inside one) as a dict.
Json = dict[str, Any]
_T = TypeVar("_T")


def json_copy(value: _T) -> _T:
    """A deep copy of JSON-shaped data (dicts with string keys, lists, strings, numbers, bools,
    None): an orjson round trip, several times faster than ``copy.deepcopy``. What orjson
    refuses (nesting deeper than 254 levels, a non-string key, an int beyond 64 bits, another
    type) is copied by ``copy.deepcopy`` instead."""
    try:
        result: _T = orjson.loads(orjson.dumps(value))
    except TypeError:  # orjson.JSONEncodeError
        result = copy.deepcopy(value)
    return result


def json_kind(value: object) -> str:
    """The kind of a decoded JSON value as Go's encoding/json names it in its errors
    (``json: cannot unmarshal <kind> into ...``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def metadata_of(obj: Json) -> Json:
    """``obj["metadata"]``, created when absent or null."""
    if obj.get("metadata") is None:
        obj["metadata"] = {}
    result: Json = obj["metadata"]
    return result


def meta_of(obj: Json) -> Json:
    """``obj["metadata"]`` to read (an empty dict when absent, not stored)."""
    result: Json = obj.get("metadata") or {}
    return result


def name_of(obj: Json) -> str:
    return str(meta_of(obj).get("name") or "")


def namespace_of(obj: Json) -> str:
    return str(meta_of(obj).get("namespace") or "")


def labels_of(obj: Json) -> dict[str, str]:
    return dict(meta_of(obj).get("labels") or {})


def annotations_of(obj: Json) -> dict[str, str]:
    return dict(meta_of(obj).get("annotations") or {})


def controller_uid(obj: Json) -> str | None:
    """The uid of the controller owner reference (None without one)."""
    for ref in meta_of(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid") or "")
    return None
