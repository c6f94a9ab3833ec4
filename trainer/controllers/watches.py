"""Event handlers for the TrainJob controller's extra watches (docs/behaviour/trainer.md §3.1).

Why an async handler: the runtime plugins describe their watches as data with *async* mappers
(they read the cache, e.g. "every suspended TrainJob using this RuntimeClass"), while the
framework's handlers are synchronous. ``AsyncMapHandler`` runs the mapper in a task and adds
the resulting keys to the queue; a failing mapper is logged and drops that one event, as a
failing map function does upstream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import structlog

from manager.client.interfaces import Reader
from manager.controller.event import CreateEvent, DeleteEvent, GenericEvent, UpdateEvent
from manager.controller.handler import RequestQueue
from manager.controller.reconcile import Request
from manager.meta.object import Json as Object
from manager.tasks import TaskSet
from trainer.runtime.plugins.base import Mapper

log = structlog.get_logger("trainer.watches")

__all__ = ["AsyncMapHandler"]


class AsyncMapHandler:
    """Enqueue the TrainJobs ``mapper`` returns for an event's object, for the listed event types."""

    def __init__(
        self, reader: Reader, mapper: Mapper, events: Iterable[str], *, map_old_on_update: bool = False
    ) -> None:
        self._reader = reader
        self._mapper = mapper
        self._events = frozenset(events)
        self._map_old_on_update = map_old_on_update
        self._tasks = TaskSet("trainjob-watch-mapping", on_error=self._failed)

    async def _map(self, objects: tuple[Object, ...], queue: RequestQueue) -> None:
        seen: set[Request] = set()
        for obj in objects:
            for key in await self._mapper(self._reader, obj):
                req = Request(key.namespace, key.name)
                if req not in seen:
                    seen.add(req)
                    queue.add(req)

    def _spawn(self, event_type: str, queue: RequestQueue, *objects: Object) -> None:
        if event_type not in self._events:
            return
        self._tasks.spawn(self._map(objects, queue))

    @staticmethod
    def _failed(_task: asyncio.Task[object], err: BaseException) -> None:
        log.error("mapping an event to TrainJobs failed", error=str(err))

    async def drain(self) -> None:
        """Wait for the mappings started so far (tests)."""
        await self._tasks.drain()

    def create(self, event: CreateEvent, queue: RequestQueue) -> None:
        self._spawn("create", queue, event.object)

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        if self._map_old_on_update:
            self._spawn("update", queue, event.object_old, event.object_new)
        else:
            self._spawn("update", queue, event.object_new)

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None:
        self._spawn("delete", queue, event.object)

    def generic(self, event: GenericEvent, queue: RequestQueue) -> None:
        self._spawn("generic", queue, event.object)
