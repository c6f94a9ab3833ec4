"""A keyed object store with secondary indexes (client-go's ``ThreadSafeStore``).

The informer writes it on the manager's loop; reads may also come from another thread (the
admission webhook server's guest loop, ``manager.loops``). One lock makes each write and each
multi-key read whole: a reader never sees an object between its removal from an index and its
re-indexing. Reads take what they need under the lock and decode outside it.

Keys are ``namespace/name`` (just ``name`` for cluster-scoped objects). The ``namespace`` index
is always present; field indexes registered with ``add_index`` store each value twice, as
``<namespace>/<value>`` and ``__all_namespaces/<value>``, so namespaced and cluster-wide lookups
are both one dict access (controller-runtime's ``IndexField`` layout).

``compact=True`` keeps each object as its orjson bytes instead of a dict (docs/behaviour/framework.md
D.6 item 5): several times less memory per object, at the cost of a decode per read, and every read is
then a private copy for free.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from manager import _json
from manager.meta.object import Json as Object

IndexFunc = Callable[[Object], Iterable[str]]

NAMESPACE_INDEX = "namespace"
ALL_NAMESPACES = "__all_namespaces"


def object_key(obj: Object) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name', '')}" if ns else str(meta.get("name", ""))


def field_index_name(field: str) -> str:
    return f"field:{field}"


def field_index_func(extract: Callable[[Object], Iterable[str]]) -> IndexFunc:
    """Wrap a value extractor into the namespaced + all-namespaces index layout."""

    def index(obj: Object) -> list[str]:
        ns = (obj.get("metadata") or {}).get("namespace") or ""
        out = []
        for value in extract(obj):
            out.append(f"{ALL_NAMESPACES}/{value}")
            if ns:
                out.append(f"{ns}/{value}")
        return out

    return index


def _namespace_index(obj: Object) -> list[str]:
    ns = (obj.get("metadata") or {}).get("namespace")
    return [ns] if ns else []


class Store:
    def __init__(self, *, compact: bool = False) -> None:
        self.compact = compact
        self._items: dict[str, Any] = {}  # key -> dict, or its JSON bytes when compact
        self._indexers: dict[str, IndexFunc] = {NAMESPACE_INDEX: _namespace_index}
        # index -> value -> the keys under it: a dict used as an ordered set, which costs ~40
        # bytes a member where a set that grew to 100k members costs ~100
        self._indices: dict[str, dict[str, dict[str, None]]] = {NAMESPACE_INDEX: {}}
        # What each key is indexed under, so updates and deletes touch only those buckets.
        self._keys_of: dict[str, dict[str, tuple[str, ...]]] = {NAMESPACE_INDEX: {}}
        # Index values shared by many objects (a namespace, a phase) are kept once: each key
        # points at one shared tuple, counted so a tuple goes when its last object does.
        self._shared: dict[tuple[str, ...], list[Any]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: str) -> bool:
        return key in self._items

    @property
    def returns_copies(self) -> bool:
        """Whether reads hand out private copies (compact stores decode a fresh dict each time)."""
        return self.compact

    def _decode(self, stored: Any) -> Object:
        if self.compact:
            decoded: Object = _json.loads(stored)
            return decoded
        result: Object = stored
        return result

    def get(self, key: str) -> Object | None:
        stored = self._items.get(key)  # one dict read: whole without the lock
        return None if stored is None else self._decode(stored)

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._items)

    def values(self) -> list[Object]:
        with self._lock:
            stored = list(self._items.values())
        return [self._decode(v) for v in stored]

    def iter_values(self) -> Iterator[Object]:
        """Every object, decoded one at a time (a compact store of 100k objects never holds
        100k decoded copies at once); the objects stored when the iteration began."""
        with self._lock:
            stored = list(self._items.values())
        for item in stored:
            yield self._decode(item)

    def add_index(self, name: str, func: IndexFunc) -> None:
        """Add an index; existing objects are indexed at once. Re-adding a name is an error."""
        with self._lock:
            if name in self._indexers:
                raise ValueError(f"index {name!r} already exists")
            self._indexers[name] = func
            self._indices[name] = {}
            self._keys_of[name] = {}
            for key, stored in self._items.items():
                self._index_one(name, key, self._decode(stored))

    def has_index(self, name: str) -> bool:
        return name in self._indexers

    def _index_one(self, name: str, key: str, obj: Object) -> None:
        values = tuple(self._indexers[name](obj))
        if not values:
            return  # most objects are in no bucket of a narrow index: keep nothing for them
        entry = self._shared.get(values)
        if entry is None:
            self._shared[values] = [values, 1]
        else:
            entry[1] += 1
            values = entry[0]
        self._keys_of[name][key] = values
        bucket = self._indices[name]
        for value in values:
            bucket.setdefault(value, {})[key] = None

    def _unindex(self, key: str) -> None:
        for name, keys_of in self._keys_of.items():
            bucket = self._indices[name]
            values = keys_of.pop(key, ())
            for value in values:
                members = bucket.get(value)
                if members is not None:
                    members.pop(key, None)
                    if not members:
                        del bucket[value]
            entry = self._shared.get(values) if values else None
            if entry is not None:
                entry[1] -= 1
                if entry[1] <= 0:
                    del self._shared[values]

    @staticmethod
    def encode(obj: Object) -> bytes:
        """The form a compact store keeps ``obj`` in (``put(obj, encoded=)`` takes it as is)."""
        # orjson's result sits in a ~4 KiB buffer; an exact-size copy is what makes this compact.
        return bytes(memoryview(_json.dumps(obj)))

    def decode(self, encoded: bytes) -> Object:
        """A private copy of what :meth:`encode` made."""
        decoded: Object = _json.loads(encoded)
        return decoded

    def put(self, obj: Object, *, encoded: bytes | None = None) -> Object | None:
        """Insert or replace; returns the previous object.

        ``encoded``: ``obj`` already encoded (:meth:`encode`), for a compact store.
        """
        key = object_key(obj)
        if self.compact and encoded is None:
            encoded = self.encode(obj)
        with self._lock:
            stored = self._items.get(key)
            if stored is not None:
                self._unindex(key)
            self._items[key] = encoded if self.compact else obj
            for name in self._indexers:
                self._index_one(name, key, obj)
        return None if stored is None else self._decode(stored)

    def delete(self, key: str) -> Object | None:
        with self._lock:
            stored = self._items.pop(key, None)
            if stored is None:
                return None
            self._unindex(key)
        return self._decode(stored)

    def by_index(self, name: str, value: str) -> list[Object]:
        with self._lock:
            if name not in self._indices:
                raise KeyError(f"no index named {name!r}")
            stored = [self._items[k] for k in self._indices[name].get(value, ())]
        return [self._decode(v) for v in stored]

    def keys_in_namespace(self, namespace: str) -> set[str]:
        with self._lock:
            return set(self._indices[NAMESPACE_INDEX].get(namespace, ()))
