"""Kubernetes Events for objects, with client-go style de-duplication.

``EventRecorder`` writes core/v1 Events (client-go ``tools/record``, controller-runtime's
``GetEventRecorderFor``): the same (object, type, reason, message) seen again within
``dedup_window`` seconds does not create a new Event: the existing one's ``count`` is
incremented and ``lastTimestamp`` moved (client-go's EventCorrelator does this, which keeps a
hot loop from flooding etcd).

``EventsV1Recorder`` writes events.k8s.io/v1 Events (client-go ``tools/events``,
controller-runtime's ``GetEventRecorder``): ``reportingController``/``reportingInstance``,
``action``, ``note``, a MicroTime ``eventTime``; an isomorphic event (same type, action, reason,
reporting controller and instance, and regarding object -- the note is not compared) within six
minutes of the last becomes a ``series`` of the first one instead of a new Event.

Recording is best effort: API errors are logged, never raised into the reconciler.
"""

from __future__ import annotations

import abc
import asyncio
import datetime
import logging
import re
import socket
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from manager import loops
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


class _BackgroundRecorder(abc.ABC):
    """What both recorders share: ``emit`` records in the background, in tasks this recorder
    owns, and ``flush`` (which ``Cluster.aclose`` calls) awaits them."""

    def __init__(self, tasks: str) -> None:
        self._pending = TaskSet(tasks)

    @abc.abstractmethod
    async def event(self, obj: object, event_type: EventType, reason: str, message: str) -> Json | None:
        """Record now; returns the Event as stored (None when it could not be written)."""

    def emit(self, obj: object, event_type: EventType, reason: str, message: str) -> None:
        """Record in the background (needs a running loop); errors are logged, never raised.
        From a guest loop (``manager.loops``) the write is started on the recorder's own loop."""
        loops.call_on_host(
            lambda: self._pending.spawn(self.event(obj, event_type, reason, message), name=f"event {reason}")
        )

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


class EventRecorder(_BackgroundRecorder):
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
        super().__init__(f"events:{component}")
        self._lock = asyncio.Lock()  # one write at a time keeps the dedup bookkeeping exact

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
        if loops.in_guest():  # the dedup lock and the series live on the recorder's loop
            return await loops.on_host(self.event(obj, event_type, reason, message))
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


EVENTS_V1_API_VERSION = "events.k8s.io/v1"
SERIES_FINISH_SECONDS = 6 * 60.0
"""client-go's ``finishTime``: an event series (or a single event) older than this is over."""
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def event_name(ref_name: str, unix_nano: int) -> str:
    """client-go's ``GenerateEventName``: ``<name>.<unix nanoseconds in hex>``, or a UUID when
    that is not a valid DNS subdomain."""
    name = f"{ref_name}.{unix_nano:x}"
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        return str(uuid.uuid4())
    return name


@dataclass
class _Isomorphic:
    """An event this recorder wrote, as client-go's ``eventCache`` keeps it."""

    name: str
    namespace: str
    event: Json
    """The Event as written (its ``series`` once it has one)."""
    last: float
    """When an isomorphic event was last seen (the clock's seconds)."""
    written_count: int = 1
    """The series count the API server has."""


class EventsV1Recorder(_BackgroundRecorder):
    """events.k8s.io/v1 Events: ``await recorder.event(obj, "Warning", reason, note)``.

    ``reporting_controller`` names the controller (controller-runtime's recorder name),
    ``reporting_instance`` defaults to ``<controller>-<hostname>`` as client-go's broadcaster
    sets it; ``action`` is what the controller was doing (``Eventf``'s action argument).

    Series: the second isomorphic event turns the first one's Event into a series (``series:
    {count: 2, lastObservedTime}``, a strategic merge patch; a create when that Event is gone);
    later ones count in memory. client-go writes those counts from a background loop (every 30
    minutes, and when a series ends after six quiet minutes); here the count is written when the
    next isomorphic event finds the series ended, right before that event starts a new Event.
    """

    def __init__(
        self,
        client: Writer,
        *,
        reporting_controller: str,
        action: str,
        reporting_instance: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_tracked: int = 4096,
    ) -> None:
        self.client = client
        self.reporting_controller = reporting_controller
        self.reporting_instance = reporting_instance or f"{reporting_controller}-{socket.gethostname()}"
        self.action = action
        self._clock = clock
        self.max_tracked = max_tracked
        self._cache: OrderedDict[tuple[str, ...], _Isomorphic] = OrderedDict()
        super().__init__(f"events.k8s.io:{reporting_controller}")
        self._lock = asyncio.Lock()

    @staticmethod
    def _regarding(obj: Json) -> Json:
        meta = obj.get("metadata") or {}
        ref = {
            "kind": obj.get("kind", ""),
            "namespace": meta.get("namespace", ""),
            "name": meta.get("name", ""),
            "uid": meta.get("uid", ""),
            "apiVersion": obj.get("apiVersion", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        }
        return {k: v for k, v in ref.items() if v}

    def make_event(self, regarding: Json, event_type: str, reason: str, note: str) -> Json:
        """client-go's ``makeEvent``: the Event as first written."""
        wall = time.time_ns()
        return {
            "apiVersion": EVENTS_V1_API_VERSION,
            "kind": "Event",
            "metadata": {
                "name": event_name(str(regarding.get("name", "")), wall),
                "namespace": regarding.get("namespace") or "default",
            },
            "eventTime": times.format_micro_time(_wall_now()),
            "reportingController": self.reporting_controller,
            "reportingInstance": self.reporting_instance,
            "action": self.action,
            "reason": reason,
            "regarding": regarding,
            "note": note,
            "type": event_type,
        }

    async def event(self, obj: object, event_type: EventType, reason: str, message: str) -> Json | None:
        """Record an event about ``obj``; returns the Event written (None: none was written,
        the count went to a series in memory, or the write failed)."""
        if loops.in_guest():  # the dedup lock and the series live on the recorder's loop
            return await loops.on_host(self.event(obj, event_type, reason, message))
        data = obj if isinstance(obj, dict) else to_dict(obj)
        regarding = self._regarding(data)
        key = (
            event_type,
            self.action,
            reason,
            self.reporting_controller,
            self.reporting_instance,
            *(f"{k}={v}" for k, v in sorted(regarding.items())),
        )
        async with self._lock:
            now = self._clock()
            try:
                seen = self._cache.get(key)
                if seen is not None and now - seen.last > SERIES_FINISH_SECONDS:
                    await self._finish(seen)
                    del self._cache[key]
                    seen = None
                if seen is not None:
                    return await self._observe(seen, now)
                event = self.make_event(regarding, event_type, reason, message)
                result: Json = await self.client.create(event)
            except RequestError as err:
                log.warning("could not record event %s/%s: %s", reason, message, err)
                return None
            meta = result.get("metadata") or {}
            self._cache[key] = _Isomorphic(
                meta.get("name", ""), meta.get("namespace", ""), {**event, "metadata": dict(meta)}, now
            )
            self._cache.move_to_end(key)
            while len(self._cache) > self.max_tracked:
                self._cache.popitem(last=False)
            return result

    async def _observe(self, seen: _Isomorphic, now: float) -> Json | None:
        """An isomorphic event: the series grows; only its start is written."""
        seen.last = now
        series = seen.event.get("series")
        observed = times.format_micro_time(_wall_now())
        if series is not None:
            series["count"] += 1
            series["lastObservedTime"] = observed
            return None
        seen.event["series"] = {"count": 2, "lastObservedTime": observed}
        result = await self._write_series(seen)
        seen.written_count = 2
        return result

    async def _write_series(self, seen: _Isomorphic) -> Json:
        target = {
            "apiVersion": EVENTS_V1_API_VERSION,
            "kind": "Event",
            "metadata": {"name": seen.name, "namespace": seen.namespace},
        }
        try:
            result: Json = await self.client.patch(target, Patch.strategic({"series": seen.event["series"]}))
        except NotFound:  # expired or deleted: written again, with its series
            fresh = {**seen.event, "metadata": {"name": seen.name, "namespace": seen.namespace}}
            result = await self.client.create(fresh)
        return result

    async def _finish(self, seen: _Isomorphic) -> None:
        """A series that ended: its last count is written (client-go's ``finishSeries``)."""
        series = seen.event.get("series")
        if series is None or series["count"] == seen.written_count:
            return
        await self._write_series(seen)
        seen.written_count = series["count"]


def _wall_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class Recorders(Protocol):
    """Where code gets its event recorders by component name (e.g. a controller set's setup
    context): core/v1 ones and events.k8s.io/v1 ones."""

    def event_recorder(self, component: str) -> EventRecorder:
        """A core/v1 Event recorder (client-go ``record``, ``GetEventRecorderFor``)."""
        ...

    def events_recorder(self, component: str, action: str) -> EventsV1Recorder:
        """An events.k8s.io/v1 Event recorder (client-go ``tools/events``, ``GetEventRecorder``)
        whose events carry ``action``."""
        ...
