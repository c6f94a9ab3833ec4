"""A shared informer: one store, one or more reflectors feeding it, many handlers.

Handlers are called synchronously, in order, right after the store changes (the design in
docs/behaviour/framework.md D.5: natural backpressure, no per-handler buffers). A handler that raises is
logged and skipped; it never stops the reflector or the other handlers.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Iterable
from typing import Any

from manager.cache.interfaces import ResourceEventHandler
from manager.cache.reflector import ListWatchOptions, Reflector
from manager.cache.store import Store, object_key
from manager.cache.transform import Transform, strip_managed_fields
from manager.client.client import Client
from manager.client.restmapper import RESTMapping

log = logging.getLogger(__name__)
Object = dict[str, Any]


def _rv(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class SharedInformer:
    """Implements ``manager.cache.interfaces.Informer`` for one kind and one scope.

    ``namespaces`` (None = all) gives one reflector per namespace, all filling one store.
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
        scopes: list[str | None] = list(namespaces) if namespaces and mapping.namespaced else [None]
        self._pending_sync = set(range(len(scopes)))
        self.reflectors = [
            Reflector(
                client,
                mapping,
                _ScopedSink(self, i),
                ListWatchOptions(
                    namespace=ns,
                    label_selector=label_selector,
                    field_selector=field_selector,
                    page_size=page_size,
                    min_watch_timeout=min_watch_timeout,
                    inactivity_timeout=inactivity_timeout,
                ),
            )
            for i, ns in enumerate(scopes)
        ]
        self._synced = asyncio.Event()
        self.events_delivered = 0

    # -- Informer protocol -------------------------------------------------------------------

    def add_event_handler(self, handler: ResourceEventHandler) -> None:
        self._handlers.append(handler)
        for obj in self.store.values():
            self._call(handler.on_add, obj, True)

    def remove_event_handler(self, handler: ResourceEventHandler) -> None:
        self._handlers = [h for h in self._handlers if h is not handler]

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
            for obj in self.store.values():
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

    def upsert(self, obj: Object) -> None:
        obj = self._prepare(obj)
        old = self.store.put(obj)
        if old is None:
            self._dispatch_add(obj, False)
        else:
            self._dispatch_update(old, obj)

    def remove(self, obj: Object) -> None:
        old = self.store.delete(object_key(obj))
        # Deliver the final state the server sent; fall back to what we had.
        self._dispatch_delete(self._prepare(obj) if obj.get("metadata") else (old or obj))

    def replace(self, items: list[Object], namespace: str | None, initial: bool, scope: int = 0) -> None:
        """Make the store equal to a fresh list, emitting the differences as events.

        On the first list every object is an add with ``is_in_initial_list=True``. On a relist
        objects that vanished become deletes (with their last known state), new ones adds, and
        ones whose resourceVersion changed updates.
        """
        seen: set[str] = set()
        for raw in items:
            obj = self._prepare(raw)
            key = object_key(obj)
            seen.add(key)
            old = self.store.put(obj)
            if old is None:
                self._dispatch_add(obj, initial)
            elif _rv(old) != _rv(obj):
                self._dispatch_update(old, obj)
        in_scope = self.store.keys_in_namespace(namespace) if namespace else set(self.store.keys())
        for key in in_scope - seen:
            gone = self.store.delete(key)
            if gone is not None:
                self._dispatch_delete(gone)
        self._pending_sync.discard(scope)
        if not self._pending_sync:
            self._synced.set()


class _ScopedSink:
    """Tells the informer which reflector (namespace scope) a replace came from."""

    def __init__(self, informer: SharedInformer, scope: int) -> None:
        self._informer = informer
        self._scope = scope

    def replace(self, items: list[Object], namespace: str | None, initial: bool) -> None:
        self._informer.replace(items, namespace, initial, self._scope)

    def upsert(self, obj: Object) -> None:
        self._informer.upsert(obj)

    def remove(self, obj: Object) -> None:
        self._informer.remove(obj)
