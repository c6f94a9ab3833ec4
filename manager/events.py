"""Kubernetes Events for objects, with client-go style de-duplication.

The same (object, type, reason, message) seen again within ``dedup_window`` seconds does not
create a new Event: the existing one's ``count`` is incremented and ``lastTimestamp`` moved
(client-go's EventCorrelator does this, which keeps a hot loop from flooding etcd). Recording is
best effort: API errors are logged, never raised into the reconciler.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from manager.client.errors import NotFound, RequestError
from manager.client.interfaces import Writer
from manager.client.objects import to_dict
from manager.client.patch import Patch
from manager.meta import times
from manager.meta.object import Json
from manager.tasks import TaskSet

log = logging.getLogger(__name__)
EventType = Literal["Normal", "Warning"]
EVENT_GVK_API_VERSION = "v1"


@dataclass
class _Seen:
    name: str
    namespace: str
    count: int
    last: float


def _now() -> str:
    return times.now()


class Recorder(Protocol):
    """What code that records Events needs (client-go's ``record.EventRecorder``):
    ``EventRecorder`` implements it; a test may pass its own."""

    async def event(self, obj: object, event_type: EventType, reason: str, message: str) -> Json | None:
        """Record now; returns the Event as stored (None when it could not be written)."""
        ...

    def emit(self, obj: object, event_type: EventType, reason: str, message: str) -> None:
        """Record in the background: the caller does not wait for the Event's POST."""
        ...


class EventRecorder:
    """``await recorder.event(obj, "Normal", "Created", "created pod x")``, or ``emit(...)`` to
    fire and forget from synchronous code (Go's recorder is non-blocking too); ``flush()``
    awaits what ``emit`` started."""

    def __init__(
        self,
        client: Writer,
        *,
        component: str,
        dedup_window: float = 600.0,
        max_tracked: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.component = component
        self.dedup_window = dedup_window
        self.max_tracked = max_tracked
        self._clock = clock
        self._seen: OrderedDict[tuple[str, ...], _Seen] = OrderedDict()
        self._pending = TaskSet(f"events:{component}")
        self._lock = asyncio.Lock()  # one write at a time keeps the dedup bookkeeping exact

    def emit(self, obj: object, event_type: EventType, reason: str, message: str) -> None:
        """Record in the background (needs a running loop); errors are logged, never raised. The
        task is owned by this recorder: ``flush`` (which ``Cluster.aclose`` calls) awaits it."""
        self._pending.spawn(self.event(obj, event_type, reason, message), name=f"event {reason}")

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait for every event started with ``emit``; after ``timeout`` seconds the rest are
        cancelled (dropped, as best-effort events are). True if all were written or failed."""
        if timeout is None:
            await self._pending.drain()
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._pending.drain()
        except TimeoutError:
            await self._pending.cancel()
            return False
        return True

    @staticmethod
    def _involved(obj: Json) -> Json:
        meta = obj.get("metadata") or {}
        ref = {
            "apiVersion": obj.get("apiVersion", ""),
            "kind": obj.get("kind", ""),
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        }
        return {k: v for k, v in ref.items() if v}

    async def event(self, obj: object, event_type: EventType, reason: str, message: str) -> Json | None:
        """Record an event about ``obj``; returns the Event written, or None if it failed."""
        # read only: a dict is not copied (the reference is built from a few fields)
        data = obj if isinstance(obj, dict) else to_dict(obj)
        involved = self._involved(data)
        namespace = involved.get("namespace") or "default"
        key = (
            involved.get("kind", ""),
            namespace,
            involved.get("name", ""),
            involved.get("uid", ""),
            event_type,
            reason,
            message,
        )
        now = self._clock()
        seen = self._seen.get(key)
        try:
            if seen is not None and now - seen.last <= self.dedup_window:
                try:
                    result = await self._bump(seen)
                    seen.count += 1
                    seen.last = now
                    self._seen.move_to_end(key)
                    return result
                except NotFound:
                    pass  # expired or deleted: create a fresh one below
            result = await self._create(involved, namespace, event_type, reason, message)
        except RequestError as err:
            log.warning("could not record event %s/%s: %s", reason, message, err)
            return None
        meta = result.get("metadata") or {}
        self._seen[key] = _Seen(meta.get("name", ""), namespace, int(result.get("count") or 1), now)
        self._seen.move_to_end(key)
        while len(self._seen) > self.max_tracked:
            self._seen.popitem(last=False)
        return result

    async def eventf(self, obj: object, event_type: EventType, reason: str, fmt: str, *args: object) -> None:
        await self.event(obj, event_type, reason, fmt % args if args else fmt)

    async def _create(
        self, involved: Json, namespace: str, event_type: str, reason: str, message: str
    ) -> Json:
        stamp = _now()
        name = f"{involved.get('name', 'object')}.{uuid.uuid4().hex[:16]}"
        event = {
            "apiVersion": EVENT_GVK_API_VERSION,
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": event_type,
            "count": 1,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "source": {"component": self.component},
            "reportingComponent": self.component,
        }
        result: Json = await self.client.create(event)
        return result

    async def _bump(self, seen: _Seen) -> Json:
        target = {
            "apiVersion": EVENT_GVK_API_VERSION,
            "kind": "Event",
            "metadata": {"name": seen.name, "namespace": seen.namespace},
        }
        result: Json = await self.client.patch(
            target, Patch.merge({"count": seen.count + 1, "lastTimestamp": _now()})
        )
        return result
