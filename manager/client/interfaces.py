"""The client seams, as Protocols: ``Reader``, ``Writer``, ``StatusWriter`` and ``ClientProtocol``.

controller-runtime's ``client.Reader``/``client.Writer``/``client.Client`` in Python form. Three
implementations share them: ``manager.client.Client`` (cache-backed reads when built with a cache,
live otherwise), ``manager.cache.Cache`` (a ``Reader``) and ``manager.testing.fake.FakeClient``.
Code that only reads takes a ``Reader``; a reconciler that writes takes a ``ClientProtocol``.

``kind`` is a ``GroupVersionKind`` (objects are JSON dicts) or a model class with ``api_version``
and ``kind`` (objects come back as instances of it). Writes return the object as the server
stored it, as the same type the caller passed.
"""

from __future__ import annotations

import abc
import builtins
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, TypedDict, TypeVar, Unpack, cast, overload, runtime_checkable

from manager.client import objects
from manager.client.patch import Patch
from manager.meta.object import Json as Object
from manager.scheme import GroupVersionKind, KindRef, gvk_for

"""An API object as JSON (``apiVersion``, ``kind``, ``metadata``, ...)."""

LabelSelector = str | Mapping[str, str] | None
"""``"app=x,tier!=db"`` or ``{"app": "x"}`` (equality only)."""

FieldSelector = Mapping[str, str] | None
"""``{"metadata.name": "x", "spec.nodeName": "n"}``: equality on indexed fields."""

PropagationPolicy = Literal["Orphan", "Background", "Foreground"]


@dataclass(frozen=True, slots=True)
class Preconditions:
    """Delete only if the object still has this uid / resourceVersion (else 409 Conflict)."""

    uid: str | None = None
    resource_version: str | None = None


class DeleteOptions(TypedDict, total=False):
    """How a delete is carried out (controller-runtime's ``client.DeleteOption``s); all optional."""

    propagation_policy: PropagationPolicy
    """What happens to the dependents: ``Background`` (the server's default for most kinds),
    ``Foreground`` or ``Orphan``."""
    preconditions: Preconditions
    grace_period_seconds: int
    dry_run: bool


M = TypeVar("M")
"""A model class's instances (``get(TrainJob, ...) -> TrainJob``)."""

O = TypeVar("O")  # noqa: E741
"""The object a write is given and returns (a dict or a model instance)."""


class ListOptions(TypedDict, total=False):
    """What a ``list`` selects, and how (controller-runtime's ``client.ListOption``s); all optional."""

    namespace: str | None
    """One namespace; absent or None: every namespace."""
    label_selector: LabelSelector
    field_selector: FieldSelector
    limit: int
    """Page size of a live list (limit/continue); a cache returns every match at once."""
    unsafe_disable_deep_copy: bool
    """Cached objects themselves, uncopied, for read-only use (``client.UnsafeDisableDeepCopy``)."""


class Reader(Protocol):
    """Reads one object or a list of objects of a kind (``client.Reader``)."""

    @overload
    async def get(self, kind: GroupVersionKind, name: str, namespace: str = "") -> Object: ...

    @overload
    async def get(self, kind: type[M], name: str, namespace: str = "") -> M: ...

    async def get(self, kind: GroupVersionKind | type[M], name: str, namespace: str = "") -> Object | M:
        """One object; ``NotFound`` if absent."""
        ...

    @overload
    async def list(self, kind: GroupVersionKind, **options: Unpack[ListOptions]) -> builtins.list[Object]: ...

    @overload
    async def list(self, kind: type[M], **options: Unpack[ListOptions]) -> builtins.list[M]: ...

    async def list(
        self, kind: GroupVersionKind | type[M], **options: Unpack[ListOptions]
    ) -> builtins.list[Object] | builtins.list[M]:
        """Every object the options select."""
        ...


@runtime_checkable
class DeletionObserver(Protocol):
    """Told by the client when the server says an object no longer exists: a DELETE of it went
    through (not one left pending on finalizers or a grace period), or a write of it was
    answered NotFound. The cache stops returning that object (that uid) before its watch
    delivers the delete (``manager.cache.Cache.observe_deleted``)."""

    def observe_deleted(self, gvk: GroupVersionKind, namespace: str, name: str, uid: str) -> None: ...


@dataclass(frozen=True, slots=True)
class ListQuery:
    """One list request as a ``TypedReader`` implementation receives it: ``ListOptions`` with
    their defaults filled in."""

    namespace: str | None = None
    label_selector: LabelSelector = None
    field_selector: FieldSelector = None
    limit: int = 500
    unsafe_disable_deep_copy: bool = False

    def selection(self) -> ListOptions:
        """Only what selects objects, to pass on to another ``Reader``."""
        return ListOptions(
            namespace=self.namespace, label_selector=self.label_selector, field_selector=self.field_selector
        )


class TypedReader(abc.ABC):
    """A ``Reader`` written over JSON objects: the typed ``get``/``list`` (a GVK reads dicts, a
    model class reads models) are here once; a subclass implements ``_get_object`` and
    ``_list_objects`` for a GroupVersionKind (and a ``ListQuery``)."""

    @abc.abstractmethod
    async def _get_object(self, gvk: GroupVersionKind, name: str, namespace: str) -> Object: ...

    @abc.abstractmethod
    async def _list_objects(self, gvk: GroupVersionKind, query: ListQuery) -> builtins.list[Object]: ...

    @overload
    async def get(self, kind: GroupVersionKind, name: str, namespace: str = "") -> Object: ...

    @overload
    async def get(self, kind: type[M], name: str, namespace: str = "") -> M: ...

    async def get(self, kind: GroupVersionKind | type[M], name: str, namespace: str = "") -> Object | M:
        """One object; ``NotFound`` if absent. Returns a model instance when ``kind`` is a model."""
        if type(kind) is GroupVersionKind:  # the JSON object itself, no conversion to look for
            return await self._get_object(kind, name, namespace)
        return cast("Object | M", objects.like(kind, await self._get_object(gvk_for(kind), name, namespace)))

    @overload
    async def list(self, kind: GroupVersionKind, **options: Unpack[ListOptions]) -> builtins.list[Object]: ...

    @overload
    async def list(self, kind: type[M], **options: Unpack[ListOptions]) -> builtins.list[M]: ...

    async def list(
        self, kind: GroupVersionKind | type[M], **options: Unpack[ListOptions]
    ) -> builtins.list[Object] | builtins.list[M]:
        """Every object the options select, as models for a model class."""
        items = await self._list_objects(gvk_for(kind), ListQuery(**options))
        if isinstance(kind, GroupVersionKind):
            return items
        return cast("builtins.list[M]", [objects.like(kind, item) for item in items])


class Writer(Protocol):
    """Writes whole objects (``client.Writer``); ``field_owner`` overrides the client's default."""

    async def create(self, obj: O, *, field_owner: str | None = None, dry_run: bool = False) -> O:
        """``AlreadyExists`` if the name is taken, ``Invalid`` (with causes) if rejected."""
        ...

    async def update(self, obj: O, *, field_owner: str | None = None, dry_run: bool = False) -> O:
        """Replace; ``Conflict`` if ``metadata.resourceVersion`` is stale."""
        ...

    async def patch(
        self, obj: O, patch: Patch, *, field_owner: str | None = None, dry_run: bool = False
    ) -> O: ...

    async def apply(
        self, obj: O, *, field_owner: str | None = None, force: bool = False, dry_run: bool = False
    ) -> O:
        """Server-side apply ``obj`` as the full intent of ``field_owner``."""
        ...

    async def delete(self, obj: object, **options: Unpack[DeleteOptions]) -> None:
        """``NotFound`` if absent, ``Conflict`` if a precondition no longer holds."""
        ...

    async def delete_by_name(
        self, kind: KindRef, name: str, namespace: str = "", **options: Unpack[DeleteOptions]
    ) -> None:
        """``delete`` by kind and name, without the object at hand."""
        ...


class StatusWriter(Protocol):
    """Writes to the ``status`` subresource only (``client.SubResourceWriter``)."""

    async def update(self, obj: O, *, field_owner: str | None = None, dry_run: bool = False) -> O: ...

    async def patch(
        self, obj: O, patch: Patch, *, field_owner: str | None = None, dry_run: bool = False
    ) -> O: ...

    async def apply(
        self, obj: O, *, field_owner: str | None = None, force: bool = False, dry_run: bool = False
    ) -> O: ...


class ClientProtocol(Reader, Writer, Protocol):
    """Reads, writes and the status subresource (``client.Client``)."""

    @property
    def status(self) -> StatusWriter: ...


class FieldIndexer(Protocol):
    """Registers a field index (``client.FieldIndexer``): lists can then select on ``field_name``
    (``field_selector={field_name: value}``) without a scan. Async: the cache may have to create
    the kind's informer first."""

    async def index_field(
        self, kind: KindRef, field_name: str, extract: Callable[[Object], Iterable[str]]
    ) -> None: ...
