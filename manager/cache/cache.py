"""The informer cache: shared informers per kind, indexed reads, and the Runnable that runs them.

Reads (``get``/``list``) are served from the stores and return copies, so callers may mutate
what they get. Differences from controller-runtime, on purpose (docs/behaviour/framework.md D.8):
managedFields are stripped by default, and reading a kind nobody asked to cache raises ``ResourceNotCached``
unless ``fail_on_missing_informer=False`` (then an informer is started and awaited).

Deletions this process learned of first-hand (``observe_deleted``, called by the client: its own
DELETE went through, or a write was answered NotFound) hide the object from reads until the
watch delivers the delete, or the store holds another object under that name (D.8). Without
that, a reconcile woken in between, typically by the garbage collector deleting the object's
children, acts on an object that no longer exists: the JobSet controller made a deleted JobSet's
Jobs and PVCs again for as long as its watch was backing off (docs/divergences.md F-IO-16).
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from manager import _json, loops
from manager.cache import selectors
from manager.cache.informer import SharedInformer
from manager.cache.interfaces import Informers
from manager.cache.store import (
    ALL_NAMESPACES,
    NAMESPACE_INDEX,
    field_index_func,
    field_index_name,
    object_key,
)
from manager.cache.transform import Transform, strip_managed_fields
from manager.client.client import Client
from manager.client.errors import NotFound
from manager.client.interfaces import (
    DeletionObserver,
    FieldIndexer,
    ListQuery,
    Reader,
    TypedReader,
)
from manager.errors import Error
from manager.meta.gotext import go_quote
from manager.meta.object import Json as Object
from manager.scheme import GroupVersionKind, KindRef, gvk_for
from manager.tasks import TaskSet

log = logging.getLogger(__name__)

M = TypeVar("M")


class CacheError(Error):
    """Base of cache usage errors."""


def not_found(gvk: GroupVersionKind, name: str) -> NotFound:
    """The NotFound a cache read answers, worded as controller-runtime's cache reader builds it.

    controller-runtime puts the *Kind* where apimachinery expects a resource
    (``NewNotFound(GroupResource{Group, Resource: Kind}, name)``), so its text is
    ``TrainingRuntime.trainer.kubeflow.org "x" not found`` (``Pod "x" not found`` for the core
    group), not the API server's ``trainingruntimes.trainer.kubeflow.org "x" not found``.
    """
    qualified = f"{gvk.kind}.{gvk.group}" if gvk.group else gvk.kind
    message = f"{qualified} {go_quote(name)} not found"  # %q, as apierrors.NewNotFound quotes it
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": "NotFound",
        "details": {"name": name, "group": gvk.group, "kind": gvk.kind},
        "code": 404,
    }
    return NotFound(message, status=status, code=404)


class ResourceNotCached(CacheError):
    def __init__(self, gvk: GroupVersionKind) -> None:
        super().__init__(
            f"{gvk} is not cached: watch it (get_informer) first, read it with the api_reader, "
            "or build the cache with fail_on_missing_informer=False"
        )
        self.gvk = gvk


class CacheNotStarted(CacheError):
    pass


class CacheSyncTimeout(CacheError):
    pass


class FieldSelectorError(CacheError):
    """A field selector the cache cannot serve (no index, or not an exact match)."""


@dataclass
class ByObject:
    """Per-kind overrides (controller-runtime's ``cache.ByObject``)."""

    namespaces: list[str] | None = None
    label_selector: str | dict[str, str] | None = None
    label_selectors: list[str | dict[str, str]] | None = None
    """Cache the union of these selectors (one list+watch each); replaces ``label_selector``."""
    field_selector: str | dict[str, str] | None = None
    transform: Transform | None = None
    compact: bool | None = None
    """Keep this kind as JSON bytes (``None``: ``CacheOptions.compact_store``)."""


@dataclass
class CacheOptions:
    default_namespaces: list[str] | None = None
    default_label_selector: str | dict[str, str] | None = None
    default_field_selector: str | dict[str, str] | None = None
    default_transform: Transform | None = strip_managed_fields
    by_object: dict[GroupVersionKind, ByObject] = field(default_factory=dict)
    fail_on_missing_informer: bool = True
    sync_timeout: float = 120.0
    resync_period: float | None = 36000.0
    min_watch_timeout: float = 300.0
    inactivity_timeout: float | None = None
    unsafe_disable_deep_copy: bool = False
    compact_store: bool = False  # keep objects as JSON bytes: less memory, a decode per read


def _copy(obj: Object) -> Object:
    # orjson round trip: several times faster than copy.deepcopy on JSON-shaped dicts.
    result: Object = _json.loads(_json.dumps(obj))
    return result


class Cache(TypedReader):
    """Runnable (``needs_leader_election = False``): starts every informer asked for, before or
    after it starts, and sets ``started`` once all have synced."""

    needs_leader_election = False

    def __init__(self, client: Client, options: CacheOptions | None = None) -> None:
        self.client = client
        self.options = options or CacheOptions()
        self._informers: dict[GroupVersionKind, SharedInformer] = {}
        self._tasks: dict[GroupVersionKind, asyncio.Task[None]] = {}
        self._informer_tasks = TaskSet("informers", on_error=self._informer_failed)
        self._pending_indexes: dict[
            GroupVersionKind, list[tuple[str, Callable[[Object], Iterable[str]]]]
        ] = {}
        self._running = False
        self._lock = asyncio.Lock()
        self._deleted: dict[tuple[GroupVersionKind, str], str] = {}
        """(kind, store key) -> uid of an object the server deleted and the store still holds."""

    # -- informers ---------------------------------------------------------------------------

    async def get_informer(self, kind: KindRef) -> SharedInformer:
        """The shared informer for ``kind``, created (and started, if running) on first use.

        From a guest loop (``manager.loops``) a new informer is made on the cache's own loop."""
        gvk = gvk_for(kind)
        informer = self._informers.get(gvk)
        if informer is not None:
            return informer
        if loops.in_guest():
            return await loops.on_host(self.get_informer(gvk))
        async with self._lock:
            informer = self._informers.get(gvk)
            if informer is None:
                informer = await self._new_informer(gvk)
                self._informers[gvk] = informer
                if self._running:
                    self._start_informer(gvk, informer)
        return informer

    async def _new_informer(self, gvk: GroupVersionKind) -> SharedInformer:
        o = self.options
        per = o.by_object.get(gvk, ByObject())
        mapping = await self.client.mapper.mapping(gvk)
        label_selector = per.label_selector if per.label_selector is not None else o.default_label_selector
        return SharedInformer(
            self.client,
            mapping,
            namespaces=per.namespaces if per.namespaces is not None else o.default_namespaces,
            label_selector=None if per.label_selectors else label_selector,
            label_selectors=per.label_selectors,
            field_selector=per.field_selector if per.field_selector is not None else o.default_field_selector,
            transform=per.transform if per.transform is not None else o.default_transform,
            resync_period=o.resync_period,
            min_watch_timeout=o.min_watch_timeout,
            inactivity_timeout=o.inactivity_timeout,
            compact_store=per.compact if per.compact is not None else o.compact_store,
        )

    def _start_informer(self, gvk: GroupVersionKind, informer: SharedInformer) -> None:
        self._tasks[gvk] = self._informer_tasks.spawn(informer.run(), name=f"informer {gvk}")

    @staticmethod
    def _informer_failed(task: asyncio.Task[object], err: BaseException) -> None:
        log.error("informer %s stopped", task.get_name(), exc_info=err)

    async def remove_informer(self, kind: KindRef) -> None:
        if loops.in_guest():
            return await loops.on_host(self.remove_informer(kind))
        gvk = gvk_for(kind)
        self._informers.pop(gvk, None)
        task = self._tasks.pop(gvk, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def index_field(
        self, kind: KindRef, field_name: str, extract: Callable[[Object], Iterable[str]]
    ) -> None:
        """Index objects of ``kind`` by the values ``extract`` returns, so
        ``list(kind, field_selector={field_name: value})`` is one lookup."""
        if loops.in_guest():
            return await loops.on_host(self.index_field(kind, field_name, extract))
        informer = await self.get_informer(kind)
        informer.add_index(field_index_name(field_name), field_index_func(extract))

    # -- Runnable ----------------------------------------------------------------------------

    async def start(self, started: asyncio.Event) -> None:
        self._running = True
        try:
            for gvk, informer in list(self._informers.items()):
                if gvk not in self._tasks:
                    self._start_informer(gvk, informer)
            if await self.wait_for_cache_sync(self.options.sync_timeout):
                started.set()
            else:
                raise CacheSyncTimeout(f"caches not synced after {self.options.sync_timeout}s")
            await asyncio.Event().wait()  # run until cancelled
        finally:
            self._running = False
            self._tasks.clear()
            await self._informer_tasks.cancel()

    async def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        """True once every informer created so far has synced; False on timeout."""
        informers = list(self._informers.values())
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*(i.wait_for_sync() for i in informers))
        except TimeoutError:
            return False
        return True

    # -- reads -------------------------------------------------------------------------------

    async def _synced_informer(self, gvk: GroupVersionKind) -> SharedInformer:
        informer = self._informers.get(gvk)
        if informer is not None and informer.has_synced():
            return informer  # the read itself is served on the caller's thread (a locked store)
        if loops.in_guest():  # making an informer or waiting for its sync is the loop's own work
            return await loops.on_host(self._synced_informer(gvk))
        if informer is None:
            if self.options.fail_on_missing_informer:
                raise ResourceNotCached(gvk)
            informer = await self.get_informer(gvk)
        if not self._running and not informer.has_synced():
            raise CacheNotStarted(f"the cache is not started; cannot read {gvk}")
        if not informer.has_synced():
            try:
                async with asyncio.timeout(self.options.sync_timeout):
                    await informer.wait_for_sync()
            except TimeoutError:
                raise CacheSyncTimeout(f"informer for {gvk} did not sync") from None
        return informer

    # -- deletions learned before their watch event -------------------------------------------

    def observe_deleted(self, gvk: GroupVersionKind, namespace: str, name: str, uid: str) -> None:
        """The server no longer has the object ``uid`` (``DeletionObserver``): reads stop
        returning it while the store still holds it. Entries whose object has left the store
        (its delete arrived) or was replaced by another uid are dropped here, so the map holds
        only deletions still in flight."""
        informer = self._informers.get(gvk)
        if informer is None or not uid:
            return
        for (kind, key), gone in list(self._deleted.items()):
            if self._stored_uid(kind, key) != gone:
                del self._deleted[(kind, key)]
        key = f"{namespace}/{name}" if namespace and informer.mapping.namespaced else name
        if self._stored_uid(gvk, key) == uid:
            self._deleted[(gvk, key)] = uid

    def _stored_uid(self, gvk: GroupVersionKind, key: str) -> str | None:
        informer = self._informers.get(gvk)
        obj = informer.store.get(key) if informer is not None else None
        return None if obj is None else str((obj.get("metadata") or {}).get("uid") or "")

    def _is_deleted(self, gvk: GroupVersionKind, key: str, obj: Object) -> bool:
        uid = self._deleted.get((gvk, key))
        return uid is not None and uid == (obj.get("metadata") or {}).get("uid")

    def _out(self, obj: Object, informer: SharedInformer) -> Object:
        # a compact store decodes a private copy on every read already
        no_copy = self.options.unsafe_disable_deep_copy or informer.store.returns_copies
        return obj if no_copy else _copy(obj)

    async def _get_object(self, gvk: GroupVersionKind, name: str, namespace: str) -> Object:
        informer = self._informers.get(gvk)
        if informer is None or not informer.has_synced():
            informer = await self._synced_informer(gvk)
        store_key = f"{namespace}/{name}" if namespace and informer.mapping.namespaced else name
        obj = informer.store.get(store_key)
        if obj is None or (self._deleted and self._is_deleted(gvk, store_key, obj)):
            raise not_found(gvk, name)
        return self._out(obj, informer)

    async def _list_objects(self, gvk: GroupVersionKind, query: ListQuery) -> builtins.list[Object]:
        """Matching cached objects, each a copy; ``unsafe_disable_deep_copy`` (controller-runtime's
        ``client.UnsafeDisableDeepCopy``) returns the cached objects themselves, for callers that
        only read them: mutating one corrupts the cache. ``limit`` pages live lists only: the
        cache returns every match."""
        informer = await self._synced_informer(gvk)
        store = informer.store
        namespace = query.namespace if informer.mapping.namespaced else None
        if query.field_selector:
            candidates = self._by_fields(informer, namespace, query.field_selector)
        elif namespace:
            candidates = store.by_index(NAMESPACE_INDEX, namespace)
        else:
            candidates = store.values()
        selector = selectors.to_selector(query.label_selector)
        if self._deleted:
            candidates = [o for o in candidates if not self._is_deleted(gvk, object_key(o), o)]
        out = [
            o if query.unsafe_disable_deep_copy else self._out(o, informer)
            for o in candidates
            if selector.empty() or selector.matches((o.get("metadata") or {}).get("labels"))
        ]
        out.sort(key=lambda o: ((o["metadata"].get("namespace") or ""), o["metadata"].get("name", "")))
        return out

    @staticmethod
    def _by_fields(
        informer: SharedInformer, namespace: str | None, fields: Mapping[str, str]
    ) -> builtins.list[Object]:
        result: dict[str, Object] | None = None
        for name, value in fields.items():
            # a mapping is exact by construction (controller-runtime's MatchingFields): a value may
            # hold "=", "!" or "," (a pod name built from label values, found by admission fuzzing)
            if name.endswith("!"):
                raise FieldSelectorError(f"field selector {name}={value}: only exact matches are supported")
            index = field_index_name(name)
            if not informer.store.has_index(index):
                raise FieldSelectorError(
                    f"field selector {name!r} on {informer.gvk}: no index; call index_field first"
                )
            lookup = f"{namespace}/{value}" if namespace else f"{ALL_NAMESPACES}/{value}"
            found = {
                f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": o
                for o in informer.store.by_index(index, lookup)
            }
            result = found if result is None else {k: v for k, v in result.items() if k in found}
        return list((result or {}).values())


if TYPE_CHECKING:  # mypy proves the cache satisfies the seams the controllers consume

    def _conforms(cache: Cache) -> tuple[Informers, Reader, FieldIndexer, DeletionObserver]:
        return cache, cache, cache, cache
