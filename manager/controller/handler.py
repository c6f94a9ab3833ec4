"""Event handlers: turn an event about one object into the requests to reconcile.

* ``enqueue_for_object()``: the object itself (the ``for_`` kind of a controller).
* ``enqueue_for_owner(Owner)``: the owner named in the object's ownerReferences (the ``owns``
  kind) -- a change to a Deployment reconciles the Widget that controls it. For updates both the
  old and the new references count, so an owner that was just removed is told too.
* ``enqueue_from_map(fn)``: whatever ``fn`` maps the object to (old and new on updates).

Handlers are synchronous: they run inside the informer's dispatch and only add keys to the queue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from manager.controller.event import CreateEvent, DeleteEvent, GenericEvent, Object, UpdateEvent
from manager.controller.reconcile import Request
from manager.scheme import KindRef, gvk_for


class RequestQueue(Protocol):
    def add(self, item: Request) -> None: ...


class EventHandler(Protocol):
    def create(self, event: CreateEvent, queue: RequestQueue) -> None: ...

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None: ...

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None: ...

    def generic(self, event: GenericEvent, queue: RequestQueue) -> None: ...


class _ByObjects:
    """A handler defined by which requests an object maps to; updates use old and new."""

    def requests(self, obj: Object) -> Iterable[Request]:
        raise NotImplementedError

    def _add_all(self, queue: RequestQueue, *objects: Object) -> None:
        seen: set[Request] = set()
        for obj in objects:
            for req in self.requests(obj):
                if req not in seen:
                    seen.add(req)
                    queue.add(req)

    def create(self, event: CreateEvent, queue: RequestQueue) -> None:
        self._add_all(queue, event.object)

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        self._add_all(queue, event.object_old, event.object_new)

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None:
        self._add_all(queue, event.object)

    def generic(self, event: GenericEvent, queue: RequestQueue) -> None:
        self._add_all(queue, event.object)


class EnqueueRequestForObject(_ByObjects):
    def requests(self, obj: Object) -> Iterable[Request]:
        return (Request.for_object(obj),)

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        # old and new name the same object; controller-runtime enqueues the new one only
        self._add_all(queue, event.object_new)


def enqueue_for_object() -> EventHandler:
    return EnqueueRequestForObject()


def _group_of(api_version: str) -> str:
    group, _, _version = api_version.rpartition("/")
    return group


class EnqueueRequestForOwner(_ByObjects):
    """Reconcile the owner of type ``owner`` listed in the object's ownerReferences.

    Owners match by group and kind (any version). A cluster-scoped owner gets a request without
    a namespace; a namespaced owner lives in the object's namespace (owner references cannot
    cross namespaces).
    """

    def __init__(
        self, owner: KindRef, *, only_controller: bool = True, namespaced: bool | None = None
    ) -> None:
        gvk = gvk_for(owner)
        self.group = gvk.group
        self.kind = gvk.kind
        self.only_controller = only_controller
        self.namespaced = namespaced if namespaced is not None else bool(getattr(owner, "namespaced", True))

    def requests(self, obj: Object) -> Iterable[Request]:
        meta = obj.get("metadata") or {}
        namespace = (meta.get("namespace") or "") if self.namespaced else ""
        for ref in meta.get("ownerReferences") or ():
            if self.only_controller and not ref.get("controller"):
                continue
            if ref.get("kind") != self.kind or _group_of(ref.get("apiVersion", "")) != self.group:
                continue
            yield Request(namespace, ref.get("name", ""))


def enqueue_for_owner(
    owner: KindRef, *, only_controller: bool = True, namespaced: bool | None = None
) -> EventHandler:
    """Owner-based requeue: changes to an owned object reconcile its (controller) owner."""
    return EnqueueRequestForOwner(owner, only_controller=only_controller, namespaced=namespaced)


MapFunc = Callable[[Object], Iterable[Request]]


class EnqueueRequestsFromMapFunc(_ByObjects):
    def __init__(self, fn: MapFunc) -> None:
        self.fn = fn

    def requests(self, obj: Object) -> Iterable[Request]:
        return self.fn(obj)


def enqueue_from_map(fn: MapFunc) -> EventHandler:
    """Reconcile whatever ``fn`` maps an object to (e.g. every TrainJob using a runtime)."""
    return EnqueueRequestsFromMapFunc(fn)


@dataclass
class Funcs:
    """An ad-hoc handler: only the callbacks that are set do anything."""

    on_create: Callable[[CreateEvent, RequestQueue], None] | None = None
    on_update: Callable[[UpdateEvent, RequestQueue], None] | None = None
    on_delete: Callable[[DeleteEvent, RequestQueue], None] | None = None
    on_generic: Callable[[GenericEvent, RequestQueue], None] | None = None

    def create(self, event: CreateEvent, queue: RequestQueue) -> None:
        if self.on_create:
            self.on_create(event, queue)

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        if self.on_update:
            self.on_update(event, queue)

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None:
        if self.on_delete:
            self.on_delete(event, queue)

    def generic(self, event: GenericEvent, queue: RequestQueue) -> None:
        if self.on_generic:
            self.on_generic(event, queue)
