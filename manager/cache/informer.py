"""A shared informer: one store, one or more reflectors feeding it, many handlers.

Handlers are called synchronously, in order, right after the store changes (the design in
docs/behaviour/framework.md D.5: natural backpressure, no per-handler buffers). A handler that raises is
logged and skipped; it never stops the reflector or the other handlers.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from manager.cache.interfaces import HandlerRegistration, ResourceEventHandler
from manager.cache.reflector import ListWatchOptions, Reflector
from manager.cache.store import Store, object_key
from manager.cache.transform import Transform, strip_managed_fields
from manager.client.client import Client
from manager.client.restmapper import RESTMapping
from manager.meta.object import Json as Object

log = logging.getLogger(__name__)

REPLAY_GATHER_SECONDS = 0.05
"""How long a compact store waits before replaying its objects to a newly added handler, so the
handlers of controllers that start together share one decode of every stored object."""


def _rv(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class Registration:
    """A handler's registration: synced once its replay of the cached objects was delivered."""

    def __init__(self, handler: ResourceEventHandler, *, synced: bool = False) -> None:
        self.handler = handler
        self._synced = asyncio.Event()
        if synced:
            self._synced.set()

    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def mark_synced(self) -> None:
        self._synced.set()


class SharedInformer:
    """Implements ``manager.cache.interfaces.Informer`` for one kind and one scope.

    ``namespaces`` (None = all) gives one reflector per namespace, all filling one store;
    ``label_selectors`` (instead of ``label_selector``) caches the union of several selectors
    (the API has no "or"), one reflector per selector and namespace, one store.
    ``resync_period`` re-delivers every cached object as ``on_update(obj, obj)`` (local only,
    no API call), jittered by +-10 % like controller-runtime's 10 h default.
    """

    def __init__(
        self,
        client: Client,
        mapping: RESTMapping,
        *,
        namespaces: Iterable[str] | None = None,
        label_selector: str | dict[str, str] | None = None,
        label_selectors: Sequence[str | dict[str, str]] | None = None,
        field_selector: str | dict[str, str] | None = None,
        transform: Transform | None = strip_managed_fields,
        resync_period: float | None = 36000.0,
        min_watch_timeout: float = 300.0,
        inactivity_timeout: float | None = None,
        page_size: int = 500,
        compact_store: bool = False,
    ) -> None:
        self.mapping = mapping
        self.gvk = mapping.gvk
        self.store = Store(compact=compact_store)
        self.transform = transform
        self.resync_period = resync_period
        self._handlers: list[ResourceEventHandler] = []
        if label_selector is not None and label_selectors:
            raise ValueError("give label_selector or label_selectors, not both")
        spaces: list[str | None] = list(namespaces) if namespaces and mapping.namespaced else [None]
        selected: list[str | dict[str, str] | None] = (
            list(label_selectors) if label_selectors else [label_selector]
        )
        scopes = [(ns, sel) for ns in spaces for sel in selected]
        self._pending_sync = set(range(len(scopes)))
        # With several label selectors an object may be in more than one scope: each key keeps
        # a bit per scope that holds it, and it leaves the store when the last one lets it go.
        self._members: dict[str, int] | None = {} if len(selected) > 1 else None
        self.reflectors = [
            Reflector(
                client,
                mapping,
                _ScopedSink(self, i),
                ListWatchOptions(
                    namespace=ns,
                    label_selector=sel,
                    field_selector=field_selector,
                    page_size=page_size,
                    min_watch_timeout=min_watch_timeout,
                    inactivity_timeout=inactivity_timeout,
                ),
            )
            for i, (ns, sel) in enumerate(scopes)
        ]
        self._synced = asyncio.Event()
        self.events_delivered = 0
        # handlers added to a filled compact store, waiting for their shared replay
        self._joining: list[Registration] = []
        self._replay: asyncio.TimerHandle | None = None

    # -- Informer protocol -------------------------------------------------------------------

    def add_event_handler(self, handler: ResourceEventHandler) -> HandlerRegistration:
        """Register ``handler``; it first gets ``on_add(obj, True)`` for every cached object.

        A dict store replays at once. A compact store must decode every object it replays, so
        the handlers added within ``REPLAY_GATHER_SECONDS`` of each other (the controllers of
        one manager, started together once the caches synced) share one replay: each object is
        decoded once for all of them, one at a time. Until then such a handler gets no event;
        its replay is the state at that moment, and the registration is synced after it.
        """
        if not self.store.compact or not len(self.store):
            self._handlers.append(handler)
            for obj in self.store.values():
                self._call(handler.on_add, obj, True)
            return Registration(handler, synced=True)
        registration = Registration(handler)
        self._joining.append(registration)
        if self._replay is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no event loop (a synchronous caller): replay now
                self._replay_to_joining()
            else:
                self._replay = loop.call_later(REPLAY_GATHER_SECONDS, self._replay_to_joining)
        return registration

    def remove_event_handler(self, handler: ResourceEventHandler) -> None:
        self._handlers = [h for h in self._handlers if h is not handler]
        self._joining = [r for r in self._joining if r.handler is not handler]
        if not self._joining and self._replay is not None:
            self._replay.cancel()
            self._replay = None

    def _replay_to_joining(self) -> None:
        joining, self._joining, self._replay = self._joining, [], None
        for obj in self.store.iter_values():
            for registration in joining:
                self._call(registration.handler.on_add, obj, True)
        for registration in joining:
            self._handlers.append(registration.handler)
            registration.mark_synced()

    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def wait_for_sync(self) -> None:
        await self._synced.wait()

    def add_index(self, name: str, func: Callable[[Object], Iterable[str]]) -> None:
        self.store.add_index(name, func)

    # -- running -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Run the reflectors (and the resync timer) until cancelled."""
        async with asyncio.TaskGroup() as tg:
            for reflector in self.reflectors:
                tg.create_task(reflector.run(), name=f"reflector {self.gvk} {reflector.options.namespace}")
            if self.resync_period:
                tg.create_task(self._resync_loop())

    async def _resync_loop(self) -> None:
        assert self.resync_period
        await self._synced.wait()
        while True:
            await asyncio.sleep(self.resync_period * random.uniform(0.9, 1.1))
            for obj in self.store.iter_values():
                self._dispatch_update(obj, obj)

    # -- store changes (called by reflectors) ------------------------------------------------

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("event handler for %s failed", self.gvk)
        self.events_delivered += 1

    def _dispatch_add(self, obj: Object, initial: bool) -> None:
        for h in self._handlers:
            self._call(h.on_add, obj, initial)

    def _dispatch_update(self, old: Object, new: Object) -> None:
        for h in self._handlers:
            self._call(h.on_update, old, new)

    def _dispatch_delete(self, obj: Object) -> None:
        for h in self._handlers:
            self._call(h.on_delete, obj)

    def _prepare(self, obj: Object) -> Object:
        return self.transform(obj) if self.transform else obj

    def prepare_listed(self, obj: Object) -> Object | bytes:
        """What a list keeps of ``obj`` until its last page arrived: the transformed object, or
        for a compact store its encoded form (a list of 100k objects then holds 100k small
        byte strings, not 100k dicts, at its peak; :meth:`replace` takes either)."""
        prepared = self._prepare(obj)
        return self.store.encode(prepared) if self.store.compact else prepared

    def upsert(self, obj: Object, scope: int = 0) -> None:
        obj = self._prepare(obj)
        if self._members is not None:
            key = object_key(obj)
            self._members[key] = self._members.get(key, 0) | (1 << scope)
            current = self.store.get(key)
            if current is not None and _older(obj, current):
                return  # another scope's watch already delivered a newer state
        old = self.store.put(obj)
        if old is None:
            self._dispatch_add(obj, False)
        else:
            self._dispatch_update(old, obj)

    def remove(self, obj: Object, scope: int = 0) -> None:
        key = object_key(obj)
        if self._members is not None:
            left = self._members.get(key, 0) & ~(1 << scope)
            if left:
                self._members[key] = left
                return  # still selected by another scope, whose watch keeps it current
            self._members.pop(key, None)
        old = self.store.delete(key)
        # Deliver the final state the server sent; fall back to what we had.
        self._dispatch_delete(self._prepare(obj) if obj.get("metadata") else (old or obj))

    def replace(
        self,
        items: Sequence[Object | bytes],
        namespace: str | None,
        initial: bool,
        scope: int = 0,
        *,
        prepared: bool = False,
    ) -> None:
        """Make the store equal to a fresh list, emitting the differences as events.

        ``prepared``: the items went through :meth:`_prepare` or :meth:`prepare_listed`
        already (an encoded item is stored as it is and decoded once for the handlers).

        On the first list every object is an add with ``is_in_initial_list=True``. On a relist
        objects that vanished become deletes (with their last known state), new ones adds, and
        ones whose resourceVersion changed updates.
        """
        seen: set[str] = set()
        members = self._members
        bit = 1 << scope
        for raw in items:
            encoded: bytes | None = None
            if isinstance(raw, bytes):
                encoded, obj = raw, self.store.decode(raw)
            else:
                obj = raw if prepared else self._prepare(raw)
            key = object_key(obj)
            seen.add(key)
            if members is not None:
                members[key] = members.get(key, 0) | bit
            old = self.store.put(obj, encoded=encoded)
            if old is None:
                self._dispatch_add(obj, initial)
            elif _rv(old) != _rv(obj):
                self._dispatch_update(old, obj)
        if members is not None:
            in_scope = {k for k, m in members.items() if m & bit}
        else:
            in_scope = self.store.keys_in_namespace(namespace) if namespace else set(self.store.keys())
        for key in in_scope - seen:
            if members is not None:
                left = members.get(key, 0) & ~bit
                if left:
                    members[key] = left
                    continue
                members.pop(key, None)
            gone = self.store.delete(key)
            if gone is not None:
                self._dispatch_delete(gone)
        self._pending_sync.discard(scope)
        if not self._pending_sync:
            self._synced.set()


def _older(new: Object, current: Object) -> bool:
    """Whether ``new`` is an older state than ``current`` (resourceVersions compared as numbers,
    which the API server's are; anything else is never called older)."""
    a, b = _rv(new), _rv(current)
    return a.isdigit() and b.isdigit() and int(a) < int(b)


class _ScopedSink:
    """Tells the informer which reflector (namespace scope) a replace came from."""

    def __init__(self, informer: SharedInformer, scope: int) -> None:
        self._informer = informer
        self._scope = scope

    def prepare(self, obj: Object) -> Object | bytes:
        return self._informer.prepare_listed(obj)

    def replace(
        self,
        items: Sequence[Object | bytes],
        namespace: str | None,
        initial: bool,
        *,
        prepared: bool = False,
    ) -> None:
        self._informer.replace(items, namespace, initial, self._scope, prepared=prepared)

    def upsert(self, obj: Object) -> None:
        self._informer.upsert(obj, self._scope)

    def remove(self, obj: Object) -> None:
        self._informer.remove(obj, self._scope)
