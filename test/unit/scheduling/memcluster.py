"""An in-process cluster for running the real controllers on the real informer cache.

The framework's ``Cache`` (stores, field indexes, shared informers) is used as is; only the
API server is replaced: informers are filled with ``seed``/``put``/``remove`` (what a watch
would deliver), and the controllers' status patches are applied to the stores, so a write
comes back as a watch event exactly as it would from a real server. Every read and write is
counted, and the stores count full scans and index lookups, which is what the scaling tests
assert on.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from manager.cache.cache import Cache
from manager.cache.informer import SharedInformer
from manager.client.client import Client
from manager.client.errors import NotFound
from manager.client.patch import Patch
from manager.client.restmapper import RESTMapper, RESTMapping
from manager.controller.controller import Controller
from manager.controller.controller import Options as ControllerOptions
from manager.metrics import REGISTRY
from manager.scheme import GroupVersionKind, KindRef, gvk_for, gvk_of_object
from manager.testing.fake import merge_patch
from trainer.controllers import elasticquota, podgroup

Object = dict[str, Any]
EVENT = GroupVersionKind("", "v1", "Event")
MAPPINGS = (
    RESTMapping(podgroup.POD, "pods", True),
    RESTMapping(podgroup.PODGROUP, "podgroups", True),
    RESTMapping(elasticquota.ELASTICQUOTA, "elasticquotas", True),
)


class _NoServer:
    """Discovery of any group-version not registered up front answers 404 (kind not served)."""

    async def request(self, method: str, path: str, **_: Any) -> Any:
        raise NotFound(f"{path} not found", status={"reason": "NotFound", "code": 404}, code=404)


class CountingStore:
    """Wraps a store's read paths to count full scans and index lookups."""

    def __init__(self, informer: SharedInformer, counts: Counter[str]) -> None:
        store = informer.store
        original_values, original_by_index = store.values, store.by_index

        def values() -> list[Object]:
            counts["full_scan"] += 1
            return original_values()

        def by_index(name: str, value: str) -> list[Object]:
            counts[f"index:{name}"] += 1
            found = original_by_index(name, value)
            counts["objects_read"] += len(found)
            return found

        store.values = values  # type: ignore[method-assign]
        store.by_index = by_index  # type: ignore[method-assign]


class _StatusWriter:
    def __init__(self, cluster: MemCluster) -> None:
        self._cluster = cluster

    async def patch(self, obj: Object, patch: Patch, **_: Any) -> Object:
        return await self._cluster.patch_status(obj, patch)


class MemClient:
    """The controllers' client: reads from the cache, writes applied to the informer stores."""

    def __init__(self, cluster: MemCluster) -> None:
        self._cluster = cluster
        self.mapper = cluster.mapper
        self.status = _StatusWriter(cluster)

    async def get(self, kind: KindRef, name: str, namespace: str = "") -> Object:
        gvk = gvk_for(kind)
        self._cluster.requests[f"get {gvk.kind}"] += 1
        self._cluster.gets[(gvk.kind, namespace, name)] += 1
        return await self._cluster.cache.get(gvk, name, namespace)

    async def list(
        self,
        kind: KindRef,
        *,
        namespace: str | None = None,
        label_selector: Any = None,
        field_selector: Mapping[str, str] | None = None,
        **_: Any,
    ) -> list[Object]:
        gvk = gvk_for(kind)
        self._cluster.requests[f"list {gvk.kind}"] += 1
        return await self._cluster.cache.list(
            gvk,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=dict(field_selector) if field_selector else None,
        )

    async def create(self, obj: Object, **_: Any) -> Object:
        """Only Events are created by these controllers; they are kept in a list."""
        self._cluster.requests[f"create {obj.get('kind')}"] += 1
        stored = copy.deepcopy(obj)
        self._cluster.events.append(stored)
        return stored

    async def patch(self, obj: Object, patch: Patch, **_: Any) -> Object:
        """Event count bumps from the recorder's de-duplication."""
        self._cluster.requests[f"patch {obj.get('kind')}"] += 1
        name = obj["metadata"]["name"]
        for event in self._cluster.events:
            if event["metadata"]["name"] == name:
                event.update(merge_patch(event, patch.data))
                return event
        raise NotFound(f"{name} not found", code=404)


class MemCluster:
    """``served``: the kinds discovery finds (the others answer "not served")."""

    def __init__(self, served: Iterable[RESTMapping] = MAPPINGS) -> None:
        self.mapper = RESTMapper(_NoServer())
        for mapping in served:
            self.mapper.add(mapping)
        self.cache = Cache(Client(_NoServer(), self.mapper))  # type: ignore[arg-type]
        self.client = MemClient(self)
        self.requests: Counter[str] = Counter()
        self.gets: Counter[tuple[str, str, str]] = Counter()
        self.store_counts: Counter[str] = Counter()
        self.events: list[Object] = []
        self._rv = itertools.count(1)

    async def informer(self, kind: KindRef) -> SharedInformer:
        informer: SharedInformer = await self.cache.get_informer(kind)
        return informer

    def _stamp(self, obj: Object) -> Object:
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        return obj

    async def seed(self, kind: KindRef, objects: Iterable[Object]) -> None:
        """The informer's initial list (marks it synced)."""
        informer = await self.informer(kind)
        informer.replace([self._stamp(o) for o in objects], None, True)

    async def put(self, obj: Object) -> Object:
        """A watch ADDED/MODIFIED event for ``obj``."""
        stamped = self._stamp(obj)
        (await self.informer(gvk_of_object(obj))).upsert(stamped)
        return stamped

    async def remove(self, obj: Object) -> None:
        (await self.informer(gvk_of_object(obj))).remove(obj)

    async def current(self, kind: KindRef, namespace: str, name: str) -> Object:
        informer = await self.informer(kind)
        found = informer.store.get(f"{namespace}/{name}")
        if found is None:
            raise NotFound(f"{name} not found", code=404)
        return found

    async def patch_status(self, obj: Object, patch: Patch) -> Object:
        gvk = gvk_of_object(obj)
        meta = obj["metadata"]
        self.requests[f"status.patch {gvk.kind}"] += 1
        current = await self.current(gvk, meta["namespace"], meta["name"])
        new = copy.deepcopy(current)
        patched = merge_patch(current.get("status") or {}, patch.data.get("status") or {})
        new["status"] = patched
        return await self.put(new)

    async def count_store_reads(self, kind: KindRef) -> None:
        CountingStore(await self.informer(kind), self.store_counts)


class MemManager:
    """What ``setup`` and the builder need from a manager, over a ``MemCluster``.

    ``cluster`` has no ``event_recorder``, so ``setup`` takes its documented fallback.
    """

    def __init__(self, cluster: MemCluster) -> None:
        self.mem = cluster
        self.client = cluster.client
        self.mapper = cluster.mapper
        self.api_reader = cluster.client
        self.cache = cluster.cache
        self.informers = cluster.cache
        self.cluster = object()
        self.controllers: list[Controller] = []
        self._names: set[str] = set()

    def add(self, runnable: Any) -> None:
        self.controllers.append(runnable)

    def claim_controller_name(self, name: str) -> None:
        if name in self._names:
            raise ValueError(f"controller with name {name!r} already exists")
        self._names.add(name)

    def controller_options(self, group_kind: str) -> ControllerOptions:
        return ControllerOptions()

    def controller(self, name: str) -> Controller:
        return next(c for c in self.controllers if c.name == name)

    def idle(self) -> bool:
        """No controller has queued, delayed or in-flight work."""
        for ctrl in self.controllers:
            queue = ctrl.queue
            if queue is None or len(queue) or queue.waiting():
                return False
            active = REGISTRY.get_sample_value("controller_runtime_active_workers", {"controller": ctrl.name})
            if active:
                return False
        return True

    async def wait_idle(self, timeout: float = 30.0) -> None:
        from manager.testing import eventually

        async def check() -> None:
            assert self.idle(), "controllers still busy"
            await asyncio.sleep(0)  # a second look after the loop turns: nothing woke up meanwhile
            assert self.idle(), "controllers still busy"

        await eventually(check, timeout=timeout, interval=0.01)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[MemManager]:
        tasks = []
        for ctrl in self.controllers:
            started = asyncio.Event()
            task = asyncio.create_task(ctrl.start(started))
            tasks.append(task)
            waiter = asyncio.create_task(started.wait())
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if task.done():
                task.result()  # a controller that failed to start fails the test here
        try:
            yield self
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
