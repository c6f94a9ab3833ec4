"""What the manager needs from a cluster connection, as a Protocol.

The concrete ``Cluster`` (client + cache + live reader, built from a kubeconfig) lives in
``manager.cluster``; the manager only relies on this shape, so tests can pass a small stub.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from manager.cache.interfaces import Informers, Reader
from manager.runtime.runnable import Runnable
from manager.scheme import KindRef


class ClusterCache(Informers, Reader, Runnable, Protocol):
    """The shared informer cache: informers for sources, reads for reconcilers, and a runnable
    whose ``started`` event is set once every informer known at start has synced."""

    async def index_field(
        self, kind: KindRef, field_name: str, extract: Callable[[dict[str, Any]], Iterable[str]]
    ) -> None:
        """Index objects of ``kind`` by what ``extract`` returns (``IndexField``); lists can then
        select on ``field_name`` without a scan."""
        ...


class Cluster(Protocol):
    @property
    def client(self) -> Any:
        """The default client (reads from the cache, writes to the API server)."""
        ...

    @property
    def cache(self) -> ClusterCache: ...

    @property
    def api_reader(self) -> Any:
        """A client that always reads live from the API server."""
        ...

    def event_recorder(self, component: str | None = None) -> Any:
        """The event recorder for ``component`` (``GetEventRecorderFor``)."""
        ...
