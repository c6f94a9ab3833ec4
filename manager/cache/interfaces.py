"""The seams between the cache and its consumers (sources, controllers, the manager).

Reads go through ``manager.client.interfaces.Reader`` (the cache implements it); this module holds
the informer side: event handlers, informers and the ``Informers`` a source needs.

Objects are plain JSON dicts owned by the store: handlers must not mutate them (no deep copy
is made per event, for speed); a consumer that wants to change one copies it first.
"""

from __future__ import annotations

from typing import Protocol

from manager.meta.object import Json as Object
from manager.scheme import GroupVersionKind


class ResourceEventHandler(Protocol):
    """Called synchronously by the informer for each change, in order; must not block."""

    def on_add(self, obj: Object, is_in_initial_list: bool) -> None: ...

    def on_update(self, old: Object, new: Object) -> None: ...

    def on_delete(self, obj: Object) -> None:
        """``obj`` is the last state the informer knew (a relist may synthesise the delete)."""
        ...


class HandlerRegistration(Protocol):
    """What ``add_event_handler`` returns (client-go's ``ResourceEventHandlerRegistration``)."""

    def has_synced(self) -> bool:
        """Whether the handler has been given every object cached when it was added."""
        ...

    async def wait_synced(self) -> None: ...


class Informer(Protocol):
    def add_event_handler(self, handler: ResourceEventHandler) -> HandlerRegistration:
        """Register a handler; it is first called with ``on_add`` for every object already cached
        (at once, or shortly after: the registration says when)."""
        ...

    def remove_event_handler(self, handler: ResourceEventHandler) -> None: ...

    def has_synced(self) -> bool: ...


class Informers(Protocol):
    """What a source needs from the cache."""

    async def get_informer(self, gvk: GroupVersionKind) -> Informer: ...

    async def wait_for_cache_sync(self) -> bool: ...
