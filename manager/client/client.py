"""The framework's client: reads (from the cache when there is one), writes to the API server.

Signatures follow controller-runtime's client, in Python form:
``get(kind, name, namespace)``, ``list(kind, ...)``, ``create/update/patch/apply/delete(obj)``,
``status.update/patch/apply(obj)``. ``kind`` is a ``GroupVersionKind`` or a model class; objects
are dicts or pydantic models, and results come back as the type the caller used.

When the client reads from a cache that is a ``DeletionObserver`` (``manager.cache.Cache``), what
its writes learn of deletions is passed on: a DELETE that went through, a write answered NotFound
for the object it names. The cache then stops returning that object before its watch delivers
the delete, so a reconcile woken meanwhile does not act on it (docs/behaviour/framework.md D.8).
"""

from __future__ import annotations

import asyncio
import builtins
import re
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict, TypeVar, Unpack, cast, overload

from manager import _json
from manager.client import objects, rest
from manager.client.errors import ApiError, Gone, NotFound
from manager.client.interfaces import (
    ClientProtocol,
    DeleteOptions,
    DeletionObserver,
    LabelSelector,
    ListQuery,
    Preconditions,
    PropagationPolicy,
    Reader,
    TypedReader,
)
from manager.client.patch import Patch
from manager.client.restmapper import RESTMapper, RESTMapping
from manager.meta.object import Json as Object
from manager.scheme import GroupVersionKind, KindRef, gvk_for

M = TypeVar("M")
O = TypeVar("O")  # noqa: E741

__all__ = [
    "Client",
    "LabelSelector",
    "Preconditions",
    "PropagationPolicy",
    "StatusSubresourceWriter",
    "encode_field_selector",
    "encode_label_selector",
    "ignore_not_found",
]


def encode_label_selector(selector: LabelSelector) -> str | None:
    if selector is None or isinstance(selector, str):
        return selector or None
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or None


def encode_field_selector(selector: str | Mapping[str, str] | None) -> str | None:
    if selector is None or isinstance(selector, str):
        return selector or None
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or None


_LIST_META = re.compile(
    rb'^\s*\{\s*(?:"(?:kind|apiVersion)"\s*:\s*"[^"\\]*"\s*,\s*){0,2}"metadata"\s*:\s*(\{[^{}]*\})'
)


def peek_continue(raw: bytes) -> str | None:
    """The continue token of a LIST answer read from its first bytes, without decoding its items:
    the API server writes ``kind``, ``apiVersion`` and the list's ``metadata`` first. None when
    there is none or the answer does not start that way (the caller then waits for the decode)."""
    match = _LIST_META.match(raw, 0, 4096)
    if match is None:
        return None
    try:
        meta = _json.loads(match.group(1))
    except _json.JSONDecodeError:
        return None
    token = meta.get("continue")
    return token if isinstance(token, str) and token else None


async def _discard(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` unless it is done, and wait for it; its outcome is of no interest."""
    if not task.done():
        task.cancel()
    await asyncio.gather(task, return_exceptions=True)  # a cancel of the caller still propagates


class RawListOptions(TypedDict, total=False):
    """The options of ``Client.list_raw``: a live LIST, paged."""

    namespace: str | None
    label_selector: LabelSelector
    field_selector: str | Mapping[str, str] | None
    limit: int
    """Page size (limit/continue); 500 when absent, 0 for one unpaged LIST."""
    resource_version: str | None
    """List at least as new as this (``resourceVersionMatch=NotOlderThan``; "0": any cached)."""


class _Writes:
    """The writes an object and its subresource share (update, patch, apply), written once;
    ``subresource`` is "" for the object itself, "status" for ``client.status``."""

    subresource: ClassVar[str] = ""

    def __init__(
        self,
        transport: rest.RestTransport,
        mapper: RESTMapper,
        field_owner: str | None,
        deletions: DeletionObserver | None = None,
    ) -> None:
        self.transport = transport
        self.mapper = mapper
        self.field_owner = field_owner
        self.deletions = deletions

    def _write_not_found(self, gvk: GroupVersionKind, data: Object, err: NotFound, dry_run: bool) -> None:
        """A write answered NotFound for the very object it names (not a missing subresource or
        API): the server deleted that object; tell the cache, by the uid the caller held."""
        meta = data.get("metadata") or {}
        uid = meta.get("uid")
        details = err.status.get("details") or {}
        if self.deletions is not None and uid and not dry_run and details.get("name") == meta.get("name"):
            self.deletions.observe_deleted(gvk, meta.get("namespace") or "", meta["name"], str(uid))

    async def _mapping(self, gvk: GroupVersionKind) -> RESTMapping:
        return await self.mapper.mapping(gvk)

    def _write_params(self, field_owner: str | None, dry_run: bool) -> Object:
        params: Object = {}
        owner = field_owner or self.field_owner
        if owner:
            params["fieldManager"] = owner
        if dry_run:
            params["dryRun"] = "All"
        return params

    async def _target(self, obj: object) -> tuple[Object, RESTMapping, str, str]:
        data = objects.to_dict(obj)
        mapping = await self._mapping(objects.gvk_of(obj))
        meta = data.get("metadata") or {}
        name = meta.get("name") or ""
        if not name:
            raise ValueError("object has no metadata.name")
        return data, mapping, name, meta.get("namespace") or ""

    async def update(self, obj: O, *, field_owner: str | None = None, dry_run: bool = False) -> O:
        """Replace; ``Conflict`` if ``metadata.resourceVersion`` is stale."""
        data, mapping, name, namespace = await self._target(obj)
        try:
            result = await self.transport.request(
                "PUT",
                mapping.object_path(name, namespace, self.subresource),
                params=self._write_params(field_owner, dry_run),
                body=data,
            )
        except NotFound as err:
            self._write_not_found(mapping.gvk, data, err, dry_run)
            raise
        return cast(O, objects.like(obj, result))

    async def patch(
        self, obj: O, patch: Patch, *, field_owner: str | None = None, dry_run: bool = False
    ) -> O:
        """Patch the object named by ``obj`` (its kind, namespace and name) with ``patch``."""
        return await self._patch(obj, patch, field_owner, dry_run, force=False)

    async def apply(
        self, obj: O, *, field_owner: str | None = None, force: bool = False, dry_run: bool = False
    ) -> O:
        """Server-side apply ``obj`` as its full intent for ``field_owner``; ``force`` takes over
        fields owned by other managers instead of failing with a 409 conflict."""
        owner = field_owner or self.field_owner
        if not owner:
            raise ValueError("server-side apply needs a field_owner")
        data = objects.to_dict(obj)
        data.get("metadata", {}).pop("managedFields", None)
        return await self._patch(obj, Patch(rest.APPLY_PATCH, data), owner, dry_run, force=force)

    async def _patch(self, obj: O, patch: Patch, field_owner: str | None, dry_run: bool, *, force: bool) -> O:
        data, mapping, name, namespace = await self._target(obj)
        params = self._write_params(field_owner, dry_run)
        if force:
            params["force"] = True
        try:
            result = await self.transport.request(
                "PATCH",
                mapping.object_path(name, namespace, self.subresource),
                params=params,
                body=patch.data,
                content_type=patch.content_type,
            )
        except NotFound as err:
            self._write_not_found(mapping.gvk, data, err, dry_run)
            raise
        return cast(O, objects.like(obj, result))


class StatusSubresourceWriter(_Writes):
    """Writes to the ``status`` subresource only (``client.status``)."""

    subresource = "status"


class Client(_Writes, TypedReader):
    """Async Kubernetes client over one shared HTTP session.

    With a ``cache`` (any ``manager.client.interfaces.Reader``, normally ``manager.cache.Cache``), ``get``/``list`` read from it,
    except for kinds in ``uncached``; ``api_reader`` is the same client reading live.
    Writes always go to the API server.
    """

    def __init__(
        self,
        transport: rest.RestTransport,
        mapper: RESTMapper,
        *,
        cache: Reader | None = None,
        uncached: set[GroupVersionKind] | None = None,
        field_owner: str | None = None,
    ) -> None:
        deletions = cache if isinstance(cache, DeletionObserver) else None
        super().__init__(transport, mapper, field_owner, deletions)
        self._cache = cache
        # A TypedReader cache (manager.cache.Cache) is read at its GVK level: the same object as
        # its typed ``get`` returns for a GVK, two coroutines and a kind check fewer per read;
        # not when its class has a ``get`` of its own, which every read must go through.
        self._cached_object = (
            cache._get_object
            if isinstance(cache, TypedReader) and type(cache).get is TypedReader.get
            else None
        )
        self.uncached = set(uncached or ())
        self.status = StatusSubresourceWriter(transport, mapper, field_owner, deletions)

    @property
    def cache(self) -> Reader | None:
        """The reader ``get`` and ``list`` use for cached kinds, fixed when the client is made."""
        return self._cache

    @property
    def api_reader(self) -> Client:
        """A client that always reads from the API server."""
        if self.cache is None:
            return self
        return Client(self.transport, self.mapper, field_owner=self.field_owner)

    def with_field_owner(self, field_owner: str) -> Client:
        """The same client stamping ``fieldManager`` on every write (``client.WithFieldOwner``)."""
        return Client(
            self.transport, self.mapper, cache=self.cache, uncached=self.uncached, field_owner=field_owner
        )

    # -- reads -------------------------------------------------------------------------------

    async def _get_object(self, gvk: GroupVersionKind, name: str, namespace: str) -> Object:
        # ``not self.uncached or``: a GVK's hash is its generated __hash__, and most clients
        # have no uncached kind
        if self.cache is not None and (not self.uncached or gvk not in self.uncached):
            if self._cached_object is not None:
                return await self._cached_object(gvk, name, namespace)
            return await self.cache.get(gvk, name, namespace)
        mapping = await self._mapping(gvk)
        data: Object = await self.transport.request("GET", mapping.object_path(name, namespace))
        return data

    async def _list_objects(self, gvk: GroupVersionKind, query: ListQuery) -> builtins.list[Object]:
        """All matching objects; live lists are fetched in pages of ``limit`` (limit/continue).

        ``unsafe_disable_deep_copy``: cached kinds return the cache's own objects, uncopied (for
        read-only use; controller-runtime's ``client.UnsafeDisableDeepCopy``); live lists are fresh
        objects anyway."""
        if self.cache is not None and (not self.uncached or gvk not in self.uncached):
            options = query.selection()
            options["unsafe_disable_deep_copy"] = query.unsafe_disable_deep_copy
            return await self.cache.list(gvk, **options)
        items, _ = await self.list_raw(
            gvk,
            namespace=query.namespace,
            label_selector=query.label_selector,
            field_selector=query.field_selector,
            limit=query.limit,
        )
        return items

    @overload
    async def list_raw(
        self, gvk: GroupVersionKind, *, transform: None = None, **options: Unpack[RawListOptions]
    ) -> tuple[builtins.list[Object], str]: ...

    @overload
    async def list_raw(
        self, gvk: GroupVersionKind, *, transform: Callable[[Object], O], **options: Unpack[RawListOptions]
    ) -> tuple[builtins.list[O], str]: ...

    async def list_raw(
        self,
        gvk: GroupVersionKind,
        *,
        transform: Callable[[Object], object] | None = None,
        **options: Unpack[RawListOptions],
    ) -> tuple[builtins.list[Any], str]:  # the overloads above type it
        """Paged live LIST; returns the items (with apiVersion/kind set) and the list's resourceVersion.

        ``transform`` is applied to each item as its page arrives (an informer's transform, or
        its stored form), so a list of 100k objects never holds them all whole at once; the
        items are then whatever it returns.

        If a continue token expires mid-way (410), the list restarts from scratch, as client-go's
        pager falls back to a full list. Each next page is asked for before the current one is
        decoded (its continue token read from the first bytes, ``peek_continue``; F-IO-14).
        """
        mapping = await self._mapping(gvk)
        path = mapping.collection_path(options.get("namespace"))
        base: Object = {
            "labelSelector": encode_label_selector(options.get("label_selector")),
            "fieldSelector": encode_field_selector(options.get("field_selector")),
            "limit": options.get("limit", 500) or None,
        }

        async def page(token: str | None, rv: str | None) -> asyncio.Task[bytes]:
            params = dict(base, **{"continue": token})
            if token is None and rv is not None:
                params["resourceVersion"] = rv
                if rv != "0":
                    params["resourceVersionMatch"] = "NotOlderThan"
            fetch = asyncio.ensure_future(self.transport.request_bytes("GET", path, params=params))
            try:
                # one turn of the loop: the task's first step writes the request (on a pooled
                # connection nothing before the write waits), then waits for the answer
                await asyncio.sleep(0)
            except BaseException:
                await _discard(fetch)
                raise
            return fetch

        # The next page is asked for as soon as this one's continue token is read from its first
        # bytes, so the API server serves it while this one is decoded and transformed.
        items: builtins.list[Any] = []
        rv = options.get("resource_version")
        token: str | None = None
        fetching: asyncio.Task[bytes] | None = None
        try:
            fetching = await page(None, rv)
            while True:
                try:
                    raw = await fetching
                except Gone:
                    if token is None:
                        raise
                    # the continue token expired: list again from scratch, as client-go's pager does
                    items, token, rv = [], None, None
                    fetching = await page(None, rv)
                    continue
                peeked = peek_continue(raw)
                if peeked:
                    fetching = await page(peeked, rv)
                body = rest.decode_object(raw, "GET", path)
                for item in body.get("items") or []:
                    item.setdefault("apiVersion", gvk.api_version)
                    item.setdefault("kind", gvk.kind)
                    items.append(transform(item) if transform is not None else item)
                meta = body.get("metadata") or {}
                token = meta.get("continue") or None
                if not token:
                    return items, str(meta.get("resourceVersion") or "")
                if token != peeked:  # a page whose metadata could not be read ahead
                    await _discard(fetching)
                    fetching = await page(token, rv)
        finally:
            if fetching is not None:
                await _discard(fetching)

    def watch(
        self,
        mapping: RESTMapping,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: LabelSelector = None,
        field_selector: str | Mapping[str, str] | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
        inactivity_timeout: float | None = None,
        send_initial_events: bool = False,
    ) -> AsyncIterator[Object]:
        """Raw watch events; an in-stream ERROR is raised as its ``ApiError`` (410 -> ``Gone``).

        ``send_initial_events``: a watch-list (every object as ADDED first, not older than
        ``resource_version`` or, without one, the current state; then a bookmark annotated
        ``k8s.io/initial-events-end``; then the changes)."""
        params: Object = {
            "watch": True,
            "resourceVersion": resource_version,
            "allowWatchBookmarks": allow_bookmarks or None,
            "labelSelector": encode_label_selector(label_selector),
            "fieldSelector": encode_field_selector(field_selector),
            "timeoutSeconds": timeout_seconds,
        }
        if send_initial_events:
            params["sendInitialEvents"] = True
            params["resourceVersionMatch"] = "NotOlderThan"
        return _watch_events(
            self.transport.stream(
                mapping.collection_path(namespace), params=params, inactivity_timeout=inactivity_timeout
            )
        )

    # -- writes ------------------------------------------------------------------------------

    async def create(self, obj: O, *, field_owner: str | None = None, dry_run: bool = False) -> O:
        """Create; ``AlreadyExists`` if the name is taken, ``Invalid`` with causes if rejected."""
        data = objects.to_dict(obj)
        mapping = await self._mapping(objects.gvk_of(obj))
        namespace = (data.get("metadata") or {}).get("namespace")
        if mapping.namespaced and not namespace:
            raise ValueError(f"{mapping.gvk.kind} is namespaced: metadata.namespace is required")
        result = await self.transport.request(
            "POST",
            mapping.collection_path(namespace),
            params=self._write_params(field_owner, dry_run),
            body=data,
        )
        return cast(O, objects.like(obj, result))

    async def delete(self, obj: object, **options: Unpack[DeleteOptions]) -> None:
        """Delete; ``NotFound`` if absent, ``Conflict`` if a precondition no longer holds."""
        data, mapping, name, namespace = await self._target(obj)
        uid = str((data.get("metadata") or {}).get("uid") or "")
        await self._delete(mapping, name, namespace, uid, options)

    async def delete_by_name(
        self, kind: KindRef, name: str, namespace: str = "", **options: Unpack[DeleteOptions]
    ) -> None:
        """``delete`` by kind and name, without the object at hand."""
        await self._delete(await self._mapping(gvk_for(kind)), name, namespace, "", options)

    async def _delete(
        self, mapping: RESTMapping, name: str, namespace: str, uid: str, options: DeleteOptions
    ) -> None:
        body: Object = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if options.get("propagation_policy"):
            body["propagationPolicy"] = options["propagation_policy"]
        if "grace_period_seconds" in options:
            body["gracePeriodSeconds"] = options["grace_period_seconds"]
        if options.get("dry_run"):
            body["dryRun"] = ["All"]
        preconditions = options.get("preconditions")
        if preconditions is not None:
            pre = {"uid": preconditions.uid, "resourceVersion": preconditions.resource_version}
            body["preconditions"] = {k: v for k, v in pre.items() if v}
            uid = preconditions.uid or uid
        try:
            result = await self.transport.request("DELETE", mapping.object_path(name, namespace), body=body)
        except NotFound:
            if self.deletions is not None and uid:
                self.deletions.observe_deleted(mapping.gvk, namespace, name, uid)
            raise
        gone = _deleted_uid(result, uid)
        if self.deletions is not None and gone and not options.get("dry_run"):
            self.deletions.observe_deleted(mapping.gvk, namespace, name, gone)


def _deleted_uid(answer: object, uid: str) -> str:
    """The uid a DELETE's answer says is gone from the server, or "": a ``Status`` (the object
    was removed; its details name the uid) or the removed object itself, without a
    ``deletionTimestamp`` (an object that has one is still there, waiting for its finalizers or
    its grace period)."""
    if not isinstance(answer, dict):
        return ""
    if answer.get("kind") == "Status":
        return str((answer.get("details") or {}).get("uid") or uid)
    meta = answer.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return ""
    return str(meta.get("uid") or uid)


def ignore_not_found(err: BaseException) -> None:
    """Re-raise ``err`` unless it is ``NotFound`` (controller-runtime's ``IgnoreNotFound``)."""
    if not isinstance(err, NotFound):
        raise err


async def _watch_events(stream: AsyncIterator[Object]) -> AsyncIterator[Object]:
    async for event in stream:
        if event.get("type") == "ERROR":
            status = event.get("object") or {}
            raise ApiError.from_status(int(status.get("code") or 500), status)
        yield event


if TYPE_CHECKING:  # mypy proves the client has the shape its consumers are typed against

    def _conforms(client: Client) -> ClientProtocol:
        return client
