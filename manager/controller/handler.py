"""Event handlers: turn an event about one object into the requests to reconcile.

* ``enqueue_for_object()``: the object itself (the ``for_`` kind of a controller).
* ``enqueue_for_owner(Owner)``: the owner named in the object's ownerReferences (the ``owns``
  kind) -- a change to a Deployment reconciles the Widget that controls it. For updates both the
  old and the new references count, so an owner that was just removed is told too.
* ``enqueue_from_map(fn)``: whatever ``fn`` maps the object to (old and new on updates).

Handlers are synchronous: they run inside the informer's dispatch and only add keys to the queue.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import structlog

from manager.controller.event import CreateEvent, DeleteEvent, GenericEvent, UpdateEvent
from manager.controller.reconcile import Request, is_routine
from manager.meta.object import Json as Object
from manager.scheme import KindRef, ObjectKey, gvk_for

log = structlog.get_logger("manager.handler")


class RequestQueue(Protocol):
    def add(self, item: Request) -> None: ...


class EventHandler(Protocol):
    def create(self, event: CreateEvent, queue: RequestQueue) -> None: ...

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None: ...

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None: ...

    def generic(self, event: GenericEvent, queue: RequestQueue) -> None: ...


@runtime_checkable
class SourceRunHandler(EventHandler, Protocol):
    """A handler with work of its own outside the informer's synchronous dispatch (an async map):
    the source runs ``run_in_source`` as a task it owns, for as long as the source runs."""

    async def run_in_source(self) -> None: ...


class _ByObjects(abc.ABC):
    """A handler defined by which requests an object maps to; updates use old and new."""

    @abc.abstractmethod
    def requests(self, obj: Object) -> Iterable[Request]:
        """The requests ``obj`` maps to."""

    @staticmethod
    def _add_new(queue: RequestQueue, requests: Iterable[Request], seen: set[Request]) -> None:
        for req in requests:
            if req not in seen:
                seen.add(req)
                queue.add(req)

    def _add_all(self, queue: RequestQueue, *objects: Object) -> None:
        """The objects' requests, each once."""
        seen: set[Request] = set()
        for obj in objects:
            self._add_new(queue, self.requests(obj), seen)

    def _add(self, queue: RequestQueue, obj: Object) -> None:
        """One object's requests, each once; the object itself (a one-request tuple, every event
        of a ``for_`` kind) without building a set."""
        requests = self.requests(obj)
        if isinstance(requests, tuple) and len(requests) == 1:
            queue.add(requests[0])
        else:
            self._add_new(queue, requests, set())

    def create(self, event: CreateEvent, queue: RequestQueue) -> None:
        self._add(queue, event.object)

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        self._add_all(queue, event.object_old, event.object_new)

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None:
        self._add(queue, event.object)

    def generic(self, event: GenericEvent, queue: RequestQueue) -> None:
        self._add(queue, event.object)


class EnqueueRequestForObject(_ByObjects):
    def requests(self, obj: Object) -> Iterable[Request]:
        return (Request.for_object(obj),)

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        # old and new name the same object; controller-runtime enqueues the new one only
        self._add(queue, event.object_new)


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


MapResult = Iterable["Request | ObjectKey"]
MapFunc = Callable[[Object], MapResult]
AsyncMapFunc = Callable[[Object], Awaitable[MapResult]]


def _as_requests(keys: MapResult) -> Iterable[Request]:
    for key in keys:
        yield key if isinstance(key, Request) else Request(key.namespace, key.name)


class EnqueueRequestsFromMapFunc(_ByObjects):
    def __init__(self, fn: MapFunc, *, map_old_on_update: bool = True) -> None:
        self.fn = fn
        self.map_old_on_update = map_old_on_update

    def requests(self, obj: Object) -> Iterable[Request]:
        return _as_requests(self.fn(obj))

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        if self.map_old_on_update:
            self._add_all(queue, event.object_old, event.object_new)
        else:
            self._add_all(queue, event.object_new)


def enqueue_from_map(fn: MapFunc, *, map_old_on_update: bool = True) -> EventHandler:
    """Reconcile whatever ``fn`` maps an object to (``Request``s or ``ObjectKey``s).

    On updates both the old and the new object are mapped, as controller-runtime does, unless
    ``map_old_on_update=False`` (handlers that only care about the current state).
    """
    return EnqueueRequestsFromMapFunc(fn, map_old_on_update=map_old_on_update)


class EnqueueRequestsFromAsyncMapFunc:
    """Like ``enqueue_from_map`` for a coroutine (e.g. one that lists dependants from the cache).

    The informer calls handlers synchronously, so events are buffered here and mapped by a task
    that the source runs next to the informer registration (``run_in_source``). The buffer is
    unbounded, as client-go's per-handler notification buffer is: an event is never dropped.
    """

    def __init__(self, fn: AsyncMapFunc, *, map_old_on_update: bool = True) -> None:
        self.fn = fn
        self.map_old_on_update = map_old_on_update
        self._pending: asyncio.Queue[tuple[Object, RequestQueue]] | None = None

    def _buffer(self) -> asyncio.Queue[tuple[Object, RequestQueue]]:
        if self._pending is None:
            self._pending = asyncio.Queue()
        return self._pending

    def _push(self, queue: RequestQueue, *objects: Object) -> None:
        for obj in objects:
            self._buffer().put_nowait((obj, queue))

    def create(self, event: CreateEvent, queue: RequestQueue) -> None:
        self._push(queue, event.object)

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        if self.map_old_on_update:
            self._push(queue, event.object_old, event.object_new)
        else:
            self._push(queue, event.object_new)

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None:
        self._push(queue, event.object)

    def generic(self, event: GenericEvent, queue: RequestQueue) -> None:
        self._push(queue, event.object)

    async def run_in_source(self) -> None:
        """Map buffered objects until cancelled; a failing map is logged and skipped."""
        pending = self._buffer()
        while True:
            obj, queue = await pending.get()
            try:
                keys = await self.fn(obj)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                # a failed read is routine (one line); anything else keeps its traceback
                if is_routine(err):
                    log.error("map function failed", error=str(err), error_type=type(err).__name__)
                else:
                    log.error("map function failed", error=str(err), exc_info=err)
                continue
            for req in _as_requests(keys):
                queue.add(req)


def enqueue_from_async_map(fn: AsyncMapFunc, *, map_old_on_update: bool = True) -> EventHandler:
    """``enqueue_from_map`` for an ``async def fn(obj)``; the source runs the mapping task."""
    return EnqueueRequestsFromAsyncMapFunc(fn, map_old_on_update=map_old_on_update)


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
