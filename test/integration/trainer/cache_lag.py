"""A client that reads as a cache still behind on one kind, and a TrainJob reconciler run pass by
pass over it: for the tests that make an informer's lag deterministic (a pass that reads before
the object its predecessor created has arrived).

Importable by its module name from the tests of this folder (``test/`` is on ``sys.path``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from manager.cache.cache import not_found
from manager.client import Client
from manager.cluster import Cluster
from manager.controller.reconcile import Request
from manager.scheme import GroupVersionKind
from trainer.controllers.trainjob import TrainJobReconciler

Json = dict[str, Any]
EVENTS = GroupVersionKind("events.k8s.io", "v1", "Event")


class LaggingReads:
    """Reads live (a synced cache), except that while ``lagging`` a get of ``kind`` answers the
    cache's NotFound, as a cache whose informer for that kind has not delivered yet. Writes go to
    the API server. Field indexes are accepted and unused: reads are live, and no read of these
    tests lists through one."""

    def __init__(self, client: Client, kind: GroupVersionKind) -> None:
        self.client = client
        self.kind = kind
        self.lagging = False

    async def get(self, gvk: GroupVersionKind, name: str, namespace: str = "") -> Json:
        if self.lagging and gvk == self.kind:
            raise not_found(gvk, name)
        obj: Json = await self.client.get(gvk, name, namespace)
        return obj

    async def index_field(self, gvk: GroupVersionKind, name: str, extract: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Any:  # list, apply, patch, delete: as the client does
        return getattr(self.client, name)


@dataclass
class Passes:
    """A TrainJob reconciler run pass by pass in the test's process, reading through ``reads``."""

    api: Client
    namespace: str
    reads: LaggingReads
    reconciler: TrainJobReconciler
    cluster: Cluster

    async def reconcile(self, name: str) -> None:
        """One pass of the TrainJob reconciler, as the manager would run it."""
        await self.reconciler.reconcile(Request(self.namespace, name))

    async def warnings(self, name: str) -> list[str]:
        """The TrainJob's Warning events, reason and note (events.k8s.io/v1 serves the core/v1
        Events of level v2.1 too: one resource, two versions)."""
        await self.cluster.flush_events()
        events = await self.api.list(EVENTS, namespace=self.namespace)
        return [
            f"{e['reason']}: {e.get('note', '')}"
            for e in events
            if e.get("type") == "Warning" and (e.get("regarding") or {}).get("name") == name
        ]
