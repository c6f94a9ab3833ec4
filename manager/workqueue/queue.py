"""The base work queue, with client-go's dirty/processing semantics on one event loop.

Three structures: ``_queue`` (FIFO of items ready to hand out), ``_dirty`` (items that need
processing) and ``_processing`` (items handed out and not yet ``done``). From them follow the
rules controllers rely on:

* adding an item that is already waiting does nothing (de-duplication);
* an item is never handed to two workers at once;
* adding an item while it is being processed makes it come back exactly once after ``done``.

Everything runs on one thread, so there are no locks: ``add``/``done`` are plain methods and
``get`` awaits a future that ``add`` resolves.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from manager.errors import Error
from manager.workqueue.metrics import NoopQueueMetrics, QueueMetrics

T = TypeVar("T", bound=Hashable)


class ShutDownError(Error):
    """``get`` on a queue that is shut down and has nothing left to hand out."""


class Queue(Generic[T]):
    """De-duplicating FIFO whose items are processed by at most one worker at a time."""

    def __init__(self, name: str = "", *, metrics: QueueMetrics | None = None) -> None:
        self.name = name
        self._metrics: QueueMetrics = metrics or NoopQueueMetrics()
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        self._drain = False
        self._drained: asyncio.Event | None = None

    def add(self, item: T) -> None:
        """Mark ``item`` as needing processing; ignored while shutting down."""
        if self._shutting_down or item in self._dirty:
            return
        self._dirty.add(item)
        self._metrics.add(item)
        if item in self._processing:
            return  # comes back once the current worker calls done()
        self._push(item)

    def __len__(self) -> int:
        """Items waiting to be handed out (client-go's ``Len``)."""
        return len(self._queue)

    def get_nowait(self) -> T:
        """Hand out the next item, or raise ``asyncio.QueueEmpty`` / ``ShutDownError``."""
        if not self._queue:
            if self._shutting_down:
                raise ShutDownError(self.name)
            raise asyncio.QueueEmpty
        item = self._queue.popleft()
        self._dirty.discard(item)
        self._processing.add(item)
        self._metrics.get(item)
        return item

    async def get(self) -> T:
        """Wait for an item. Items already queued are still handed out after ``shutdown``."""
        while not self._queue:
            if self._shutting_down:
                raise ShutDownError(self.name)
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # we were woken but will not take the item: pass it on
                else:
                    self._remove_getter(waiter)
                raise
        return self.get_nowait()

    def done(self, item: T) -> None:
        """The worker finished ``item``; if it was re-added meanwhile, queue it again now."""
        self._processing.discard(item)
        self._metrics.done(item)
        if item in self._dirty:
            self._push(item)  # counted by metrics when it was added
        elif not self._processing and self._drained is not None:
            self._drained.set()

    def shutdown(self) -> None:
        """Stop accepting items and wake every waiting ``get`` (they raise ``ShutDownError``)."""
        self._shutting_down = True
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    async def shutdown_with_drain(self) -> None:
        """Shut down, then wait until every item handed out has been marked ``done``."""
        self._drain = True
        self.shutdown()
        if not self._processing:
            return
        self._drained = asyncio.Event()
        await self._drained.wait()

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def is_processing(self, item: T) -> bool:
        return item in self._processing

    def _push(self, item: T) -> None:
        self._queue.append(item)
        self._wake_one()

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _remove_getter(self, waiter: asyncio.Future[None]) -> None:
        with contextlib.suppress(ValueError):
            self._getters.remove(waiter)
