"""TrainingRuntime and ClusterTrainingRuntime reconcilers (docs/behaviour/trainer.md §4, §12.7): the
``resource-in-use`` finalizer.

What the reconcile does with the finalizer is the API level's ``RuntimeFinalizer``
(``trainer/runtime/levels``): v2.1.0 adds it while TrainJobs reference the runtime and removes it
once the runtime is being deleted and no TrainJob references it; v2.3.0 only removes it.

Both kinds share one reconciler parametrised by ``RuntimeKind``. When the level's finalizer
follows TrainJobs, their events reach it through ``notify_trainjob_update`` (called by the
TrainJob controller's predicate) and a channel source that enqueues the referenced runtime
after one second, as upstream v2.1.0 does.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from manager import Builder, ChannelSource, Manager
from manager.client.errors import NotFound
from manager.controller.event import GenericEvent
from manager.controller.handler import Funcs, RequestQueue
from manager.controller.reconcile import Request, Result
from manager.meta.object import Json
from manager.scheme import GroupVersionKind
from trainer.api import trainer_constants as tc
from trainer.runtime import indexes
from trainer.runtime.levels import RuntimeFinalizer
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.objects import CLUSTER_TRAINING_RUNTIME_GVK, TRAINING_RUNTIME_GVK, TRAINJOB_GVK

__all__ = [
    "CLUSTER_TRAINING_RUNTIME",
    "NOTIFY_DELAY",
    "TRAINING_RUNTIME",
    "RuntimeKind",
    "RuntimeReconciler",
    "setup_runtime_controller",
]

NOTIFY_DELAY = 1.0
"""Seconds between a TrainJob event and the runtime reconcile it triggers (upstream ``AddAfter``)."""


@dataclass(frozen=True)
class RuntimeKind:
    """What differs between the two runtime reconcilers."""

    gvk: GroupVersionKind
    trainjob_index: str
    controller_name: str
    recorder_name: str
    namespaced: bool


TRAINING_RUNTIME = RuntimeKind(
    TRAINING_RUNTIME_GVK,
    indexes.TRAINJOB_RUNTIME_REF_KEY,
    "trainingruntime_controller",
    "trainer-trainingruntime-controller",
    namespaced=True,
)
CLUSTER_TRAINING_RUNTIME = RuntimeKind(
    CLUSTER_TRAINING_RUNTIME_GVK,
    indexes.TRAINJOB_CLUSTER_RUNTIME_REF_KEY,
    "clustertrainingruntime_controller",
    "trainer-clustertrainingruntime-controller",
    namespaced=False,
)


class RuntimeReconciler:
    """Keeps the finalizer of one runtime kind as the API level wants it (``finalizer``)."""

    def __init__(
        self, client: Any, kind: RuntimeKind, finalizer: RuntimeFinalizer = V2_1.runtime_finalizer
    ) -> None:
        self.client = client
        self.kind = kind
        self.finalizer = finalizer
        self.channel: asyncio.Queue[Json] = asyncio.Queue()
        """Keys of runtimes to reconcile, as ``{"metadata": {namespace, name}}`` (fed by TrainJob
        events when the level's finalizer follows them)."""

    async def reconcile(self, req: Request) -> Result | None:
        runtime = await self.get_runtime(req)
        if runtime is None:
            return None
        await self.finalizer.reconcile(self.client, runtime, lambda: self.list_referencing_trainjobs(runtime))
        return None

    async def get_runtime(self, req: Request) -> Json | None:
        try:
            obj: Json = await self.client.get(self.kind.gvk, req.name, req.namespace)
        except NotFound:
            return None
        obj.setdefault("apiVersion", self.kind.gvk.api_version)
        obj.setdefault("kind", self.kind.gvk.kind)
        return obj

    async def list_referencing_trainjobs(self, runtime: Json) -> list[Json]:
        """TrainJobs naming this runtime, through the runtimeRef field index (terminating ones count).

        Read-only: the cache's own objects, uncopied. A TrainJob burst reconciles a runtime about
        once a second (NOTIFY_DELAY) with every TrainJob referencing it, and copying them all
        each time was a tenth of the manager's CPU in a 1,000 TrainJob burst (docs/bench.md).
        """
        meta = runtime.get("metadata") or {}
        namespace = (meta.get("namespace") or None) if self.kind.namespaced else None
        trainjobs: list[Json] = await self.client.list(
            TRAINJOB_GVK,
            namespace=namespace,
            field_selector={self.kind.trainjob_index: meta.get("name", "")},
            unsafe_disable_deep_copy=True,
        )
        return trainjobs

    # -- TrainJob events ----------------------------------------------------------------------

    def notify_trainjob_update(self, old: Json | None, new: Json | None) -> None:
        """Queue the runtime the TrainJob references when it is of our kind (create/update: new; delete: old)."""
        trainjob = new if new is not None else old
        if trainjob is None:
            return
        ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
        if ref.get("apiGroup") != tc.GROUP or ref.get("kind") != self.kind.gvk.kind:
            return
        metadata: Json = {"name": ref.get("name") or ""}
        if self.kind.namespaced:
            metadata["namespace"] = (trainjob.get("metadata") or {}).get("namespace") or ""
        self.channel.put_nowait({"metadata": metadata})


def _enqueue_after_delay(event: GenericEvent, queue: RequestQueue) -> None:
    request = Request.for_object(event.object)
    add_after = getattr(queue, "add_after", None)
    if add_after is not None:
        add_after(request, NOTIFY_DELAY)
    else:
        queue.add(request)


def setup_runtime_controller(
    mgr: Manager, kind: RuntimeKind, finalizer: RuntimeFinalizer = V2_1.runtime_finalizer
) -> RuntimeReconciler:
    """The runtime kind itself, plus the channel of TrainJob notifications when the level's
    finalizer follows TrainJobs."""
    reconciler = RuntimeReconciler(mgr.client, kind, finalizer)
    builder = Builder(mgr).named(kind.controller_name).for_(kind.gvk)
    if finalizer.follows_trainjobs:
        builder.watches_raw_source(ChannelSource(reconciler.channel, Funcs(on_generic=_enqueue_after_delay)))
    builder.complete(reconciler)
    return reconciler
