"""Kinds: GroupVersionKind, object keys, and how a Python type names its kind.

A kind can be referred to by a ``GroupVersionKind`` or by a model class that declares
``api_version`` and ``kind`` class attributes (the typed API models do). Objects in the cache
are plain JSON dicts; typed models are built from them only where a caller asks for one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class GroupVersionKind:
    group: str
    version: str
    kind: str

    @classmethod
    def from_api_version(cls, api_version: str, kind: str) -> GroupVersionKind:
        if cls is GroupVersionKind:
            return _parsed_gvk(api_version, kind)
        group, _, version = api_version.rpartition("/")
        return cls(group, version, kind)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_kind(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def __str__(self) -> str:
        return f"{self.api_version}, Kind={self.kind}"


@lru_cache(maxsize=4096)
def _parsed_gvk(api_version: str, kind: str) -> GroupVersionKind:
    # Every write and every owner reference parses an apiVersion; a cluster has few distinct
    # ones, and building a frozen dataclass costs more than the lookup.
    group, _, version = api_version.rpartition("/")
    return GroupVersionKind(group, version, kind)


@dataclass(frozen=True, slots=True)
class ObjectKey:
    """Namespace and name; ``namespace`` is empty for cluster-scoped objects."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@runtime_checkable
class KindModel(Protocol):
    """A model class that knows its kind (``api_version`` and ``kind`` class attributes)."""

    api_version: str
    kind: str


KindRef = GroupVersionKind | type[object]
"""A kind by its GroupVersionKind or by a model class declaring ``api_version`` and ``kind``."""


def gvk_for(ref: KindRef) -> GroupVersionKind:
    """The GroupVersionKind of a GVK or of a model class declaring ``api_version`` and ``kind``."""
    if isinstance(ref, GroupVersionKind):
        return ref
    api_version = getattr(ref, "api_version", None)
    kind = getattr(ref, "kind", None)
    if not isinstance(api_version, str) or not isinstance(kind, str):
        raise TypeError(f"{ref!r} is neither a GroupVersionKind nor a model with api_version and kind")
    return GroupVersionKind.from_api_version(api_version, kind)


def gvk_of_object(obj: Mapping[str, object]) -> GroupVersionKind:
    """The GVK an object's ``apiVersion`` and ``kind`` name (empty strings when absent)."""
    return _parsed_gvk(_text(obj.get("apiVersion")), _text(obj.get("kind")))


def key_of(obj: Mapping[str, object]) -> ObjectKey:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return ObjectKey("", "")
    return ObjectKey(_text(meta.get("namespace")), _text(meta.get("name")))


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
