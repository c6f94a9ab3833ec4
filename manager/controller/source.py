"""Sources feed events into a controller's queue.

A source's ``run(queue, synced)`` runs for the controller's lifetime inside the controller's
task: it registers with whatever produces events, sets ``synced`` once the initial state has
been delivered, and cleans up when cancelled.

* ``KindSource``: a shared informer of one kind from the cache (``for_``/``owns``/``watches``).
* ``ChannelSource``: objects put on an ``asyncio.Queue`` by anything in the process become
  generic events -- the hook for external triggers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

import structlog

from manager.cache.interfaces import Informer, Informers
from manager.controller.event import CreateEvent, DeleteEvent, GenericEvent, UpdateEvent
from manager.controller.handler import EventHandler, RequestQueue, SourceRunHandler
from manager.controller.predicate import Predicate
from manager.meta.object import Json as Object
from manager.scheme import GroupVersionKind, KindRef, gvk_for
from manager.tasks import TaskSet

log = structlog.get_logger("manager.source")

GET_INFORMER_RETRY = 10.0
"""Seconds between attempts to get an informer for a kind the API server does not serve yet."""

SYNC_POLL = 0.1


class Source(Protocol):
    async def run(self, queue: RequestQueue, synced: asyncio.Event) -> None:
        """Deliver events to ``queue`` until cancelled; set ``synced`` after the initial state."""
        ...


class _Dispatch:
    """The informer-side adapter: events -> predicates -> handler -> queue (all synchronous)."""

    def __init__(self, handler: EventHandler, predicates: Sequence[Predicate], queue: RequestQueue) -> None:
        self.handler = handler
        self.predicates = tuple(predicates)
        self.queue = queue

    # each on_*: ``not self.predicates or`` first, as most sources have none and every event
    # of the informer comes through here
    def on_add(self, obj: Object, is_in_initial_list: bool) -> None:
        event = CreateEvent(obj, is_in_initial_list)
        if not self.predicates or all(p.create(event) for p in self.predicates):
            self.handler.create(event, self.queue)

    def on_update(self, old: Object, new: Object) -> None:
        event = UpdateEvent(old, new)
        if not self.predicates or all(p.update(event) for p in self.predicates):
            self.handler.update(event, self.queue)

    def on_delete(self, obj: Object) -> None:
        event = DeleteEvent(obj)
        if not self.predicates or all(p.delete(event) for p in self.predicates):
            self.handler.delete(event, self.queue)


class KindSource:
    def __init__(
        self,
        informers: Informers,
        kind: KindRef,
        handler: EventHandler,
        predicates: Sequence[Predicate] = (),
    ) -> None:
        self.informers = informers
        self.gvk: GroupVersionKind = gvk_for(kind)
        self.handler = handler
        self.predicates = tuple(predicates)

    async def run(self, queue: RequestQueue, synced: asyncio.Event) -> None:
        informer = await self._get_informer()
        dispatch = _Dispatch(self.handler, self.predicates, queue)
        # a handler with work to do outside the informer's synchronous dispatch (async mapping)
        # gets a task for the source's lifetime
        owned = TaskSet(f"source {self.gvk}")
        mapper = (
            owned.spawn(self.handler.run_in_source()) if isinstance(self.handler, SourceRunHandler) else None
        )
        registration = informer.add_event_handler(dispatch)
        try:
            await _wait_synced(informer)
            await registration.wait_synced()  # the handler has every object cached when it was added
            synced.set()
            if mapper is not None:
                await mapper  # only returns by raising; a failure ends the source (and the controller)
            await asyncio.Event().wait()
        finally:
            informer.remove_event_handler(dispatch)
            await owned.cancel()

    async def _get_informer(self) -> Informer:
        while True:
            try:
                return await self.informers.get_informer(self.gvk)
            except Exception as err:
                # a CRD installed after the manager started: keep trying, as controller-runtime does
                log.error(
                    "failed to get informer; if kind is a CRD, it should be installed before calling Start",
                    kind=str(self.gvk),
                    error=str(err),
                )
                await asyncio.sleep(GET_INFORMER_RETRY)

    def __repr__(self) -> str:
        return f"kind source: {self.gvk}"


async def _wait_synced(informer: Informer) -> None:
    """Use the informer's own ``wait_for_sync`` if it has one, else poll ``has_synced``."""
    wait = getattr(informer, "wait_for_sync", None)
    if wait is not None:
        await wait()
        return
    while True:
        if informer.has_synced():
            return
        await asyncio.sleep(SYNC_POLL)


class ChannelSource:
    """Objects put on ``channel`` are delivered as generic events (after ``predicates``)."""

    def __init__(
        self,
        channel: asyncio.Queue[Object],
        handler: EventHandler,
        predicates: Sequence[Predicate] = (),
    ) -> None:
        self.channel = channel
        self.handler = handler
        self.predicates = tuple(predicates)

    async def run(self, queue: RequestQueue, synced: asyncio.Event) -> None:
        synced.set()
        while True:
            obj = await self.channel.get()
            event = GenericEvent(obj)
            if all(p.generic(event) for p in self.predicates):
                self.handler.generic(event, queue)

    def __repr__(self) -> str:
        return "channel source"
