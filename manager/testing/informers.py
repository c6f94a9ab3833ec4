"""In-memory informers for unit-testing controllers without an API server.

``FakeInformers`` satisfies the cache's ``Informers`` seam. A test seeds or changes objects with
``create``/``update``/``delete`` and every registered handler is called synchronously, exactly
as the real informer dispatches watch events; a handler added later first receives ``on_add``
for every object already stored (``is_in_initial_list=True``).
"""

from __future__ import annotations

import copy

from manager.cache.informer import Registration
from manager.cache.interfaces import HandlerRegistration, ResourceEventHandler
from manager.meta.object import Json as Object
from manager.scheme import GroupVersionKind, KindRef, ObjectKey, gvk_for, key_of


class FakeInformer:
    def __init__(self, gvk: GroupVersionKind, *, synced: bool = True) -> None:
        self.gvk = gvk
        self.objects: dict[ObjectKey, Object] = {}
        self.handlers: list[ResourceEventHandler] = []
        self.synced = synced
        self._rv = 0

    def add_event_handler(self, handler: ResourceEventHandler) -> HandlerRegistration:
        self.handlers.append(handler)
        for obj in list(self.objects.values()):
            handler.on_add(obj, True)
        return Registration(handler, synced=True)

    def remove_event_handler(self, handler: ResourceEventHandler) -> None:
        self.handlers.remove(handler)

    def has_synced(self) -> bool:
        return self.synced

    def _stamp(self, obj: Object) -> Object:
        obj = copy.deepcopy(obj)
        obj.setdefault("apiVersion", self.gvk.api_version)
        obj.setdefault("kind", self.gvk.kind)
        self._rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
        return obj

    def create(self, obj: Object) -> Object:
        obj = self._stamp(obj)
        self.objects[key_of(obj)] = obj
        for handler in list(self.handlers):
            handler.on_add(obj, False)
        return obj

    def update(self, obj: Object) -> Object:
        new = self._stamp(obj)
        old = self.objects[key_of(new)]
        self.objects[key_of(new)] = new
        for handler in list(self.handlers):
            handler.on_update(old, new)
        return new

    def resync(self) -> None:
        """Re-deliver every object as an update with identical old and new (a periodic resync)."""
        for obj in list(self.objects.values()):
            for handler in list(self.handlers):
                handler.on_update(obj, obj)

    def delete(self, obj: Object) -> None:
        old = self.objects.pop(key_of(obj))
        for handler in list(self.handlers):
            handler.on_delete(old)


class FakeInformers:
    """One ``FakeInformer`` per kind, created on first use."""

    def __init__(self) -> None:
        self.informers: dict[GroupVersionKind, FakeInformer] = {}

    def informer(self, kind: KindRef) -> FakeInformer:
        gvk = gvk_for(kind)
        if gvk not in self.informers:
            self.informers[gvk] = FakeInformer(gvk)
        return self.informers[gvk]

    async def get_informer(self, gvk: GroupVersionKind) -> FakeInformer:
        return self.informer(gvk)

    async def wait_for_cache_sync(self) -> bool:
        return all(i.has_synced() for i in self.informers.values())
