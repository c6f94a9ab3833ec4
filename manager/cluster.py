"""The connection to one API server: what the manager needs from it, and the real one.

``ClusterProtocol`` (with ``ClusterCache``) is the shape the manager relies on, so tests can pass
a small stub. ``Cluster`` is the concrete one built from a ``RestConfig``: it bundles the HTTP
transport, the REST mapper, the informer cache, the default client (reads from the cache, writes
to the server), the live ``api_reader`` and the event recorder. It is an async context manager so
the HTTP session is always closed; as a Runnable it runs the cache.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Protocol

from manager.cache.cache import Cache, CacheOptions
from manager.cache.interfaces import Informers
from manager.client.client import Client
from manager.client.interfaces import ClientProtocol, FieldIndexer, Reader
from manager.client.rest import RestTransport
from manager.client.restmapper import RESTMapper
from manager.config import RestConfig
from manager.events import EventRecorder, EventsV1Recorder
from manager.runnable import Runnable

EVENT_FLUSH_TIMEOUT = 5.0
"""Seconds ``Cluster.aclose`` waits for background event emits before dropping the rest."""


class ClusterCache(Informers, Reader, FieldIndexer, Runnable, Protocol):
    """The shared informer cache: informers for sources, reads for reconcilers, field indexes,
    and a runnable whose ``started`` event is set once every informer known at start has synced."""


class ClusterProtocol(Protocol):
    """What the manager needs from a cluster connection (``Cluster`` is the real one)."""

    @property
    def client(self) -> ClientProtocol:
        """The default client (reads from the cache, writes to the API server)."""
        ...

    @property
    def cache(self) -> ClusterCache: ...

    @property
    def mapper(self) -> RESTMapper:
        """Kind -> resource discovery (``GetRESTMapper``); ``NoKindMatch`` when a kind is not served."""
        ...

    @property
    def api_reader(self) -> ClientProtocol:
        """A client that always reads live from the API server (writes too, like ``client``)."""
        ...

    def event_recorder(self, component: str | None = None) -> EventRecorder:
        """The event recorder for ``component`` (``GetEventRecorderFor``)."""
        ...

    def events_recorder(self, component: str, action: str) -> EventsV1Recorder:
        """The events.k8s.io/v1 recorder for ``component`` writing ``action`` (``GetEventRecorder``)."""
        ...


class Cluster:
    needs_leader_election = False

    def __init__(
        self,
        config: RestConfig,
        *,
        cache_options: CacheOptions | None = None,
        field_owner: str | None = None,
        event_source: str = "controller-manager",
    ) -> None:
        self.config = config
        self.transport = RestTransport(config)
        self.mapper = RESTMapper(self.transport)
        self.api_reader = Client(self.transport, self.mapper, field_owner=field_owner)
        self.cache = Cache(self.api_reader, cache_options)
        self.client = Client(self.transport, self.mapper, cache=self.cache, field_owner=field_owner)
        self.event_source = event_source
        self._recorders: dict[str, EventRecorder] = {}
        self._events_recorders: dict[tuple[str, str], EventsV1Recorder] = {}

    def event_recorder(self, component: str | None = None) -> EventRecorder:
        """One recorder per component name (``GetEventRecorderFor``), sharing the client."""
        name = component or self.event_source
        recorder = self._recorders.get(name)
        if recorder is None:
            recorder = self._recorders[name] = EventRecorder(self.api_reader, component=name)
        return recorder

    def events_recorder(self, component: str, action: str) -> EventsV1Recorder:
        """One events.k8s.io/v1 recorder per (component, action) (``GetEventRecorder``): the
        component is the events' ``reportingController``."""
        recorder = self._events_recorders.get((component, action))
        if recorder is None:
            recorder = self._events_recorders[component, action] = EventsV1Recorder(
                self.api_reader, reporting_controller=component, action=action
            )
        return recorder

    async def start(self, started: asyncio.Event) -> None:
        """Run the cache until cancelled (``Cluster.Start`` = ``cache.Start``)."""
        await self.cache.start(started)

    async def flush_events(self, timeout: float | None = EVENT_FLUSH_TIMEOUT) -> None:
        """Wait for the events every recorder has emitted in the background (bounded)."""
        recorders: list[EventRecorder | EventsV1Recorder] = [
            *self._recorders.values(),
            *self._events_recorders.values(),
        ]
        await asyncio.gather(*(r.flush(timeout) for r in recorders))

    async def aclose(self) -> None:
        """Flush pending event emits, then close the HTTP session they need."""
        try:
            await self.flush_events()
        finally:
            await self.transport.aclose()

    async def __aenter__(self) -> Cluster:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
