"""TrainingRuntime and ClusterTrainingRuntime reconcilers (docs/behaviour/trainer.md §4): the
``resource-in-use`` finalizer.

Why: a runtime must not vanish while TrainJobs still point at it (their JobSets would no longer
be rebuildable). The finalizer is added as soon as one TrainJob references the runtime and
removed only when the runtime is being deleted and no TrainJob references it any more; it is
never removed from a live runtime (upstream asserts this).

Both kinds share one reconciler parametrised by ``RuntimeKind``. TrainJob events reach it
through ``notify_trainjob_update`` (called by the TrainJob controller's predicate) and a
channel source that enqueues the referenced runtime after one second, as upstream does.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import structlog

from manager import Builder, ChannelSource, Manager
from manager.client.errors import Conflict, NotFound
from manager.controller.event import GenericEvent
from manager.controller.handler import Funcs, RequestQueue
from manager.controller.reconcile import Request, Result
from manager.controller_util import add_finalizer, contains_finalizer, remove_finalizer
from manager.scheme import GroupVersionKind
from trainer.api import gocodec
from trainer.api import trainer_constants as tc
from trainer.runtime import indexes
from trainer.runtime.objects import CLUSTER_TRAINING_RUNTIME_GVK, TRAINING_RUNTIME_GVK, TRAINJOB_GVK

Json = dict[str, Any]
log = structlog.get_logger("trainer.runtime_reconciler")

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
    """Keeps the finalizer of one runtime kind in step with the TrainJobs that reference it."""

    def __init__(self, client: Any, kind: RuntimeKind) -> None:
        self.client = client
        self.kind = kind
        self.channel: asyncio.Queue[Json] = asyncio.Queue()
        """Keys of runtimes to reconcile, as ``{"metadata": {namespace, name}}`` (fed by TrainJob events)."""

    async def reconcile(self, req: Request) -> Result | None:
        runtime = await self.get_runtime(req)
        if runtime is None:
            return None
        trainjobs = await self.list_referencing_trainjobs(runtime)
        try:
            if not contains_finalizer(runtime, tc.ResourceInUseFinalizer) and trainjobs:
                add_finalizer(runtime, tc.ResourceInUseFinalizer)
                await self.client.update(self.typed(runtime))
            elif (
                (runtime.get("metadata") or {}).get("deletionTimestamp")
                and not trainjobs
                and remove_finalizer(runtime, tc.ResourceInUseFinalizer)
            ):
                await self.client.update(self.typed(runtime))
        except Conflict:
            # the cache holds an older runtime (typically before our own finalizer update): the
            # newer version's watch event reconciles it again -- cache lag, no error, no back-off
            log.debug("finalizer update conflict: waiting for the newer runtime")
        return None

    def typed(self, runtime: Json) -> Json:
        """The runtime as upstream's typed ``client.Update`` sends it: Go's re-encoded struct.

        Upstream writes the whole decoded object back, so fields Go always writes
        (``metadata: {}`` of pod templates, ``resources: {}``, ``name: ""``...) are stored with
        their zero values and, the spec having changed, ``generation`` goes to 2.
        """
        return gocodec.codec_for(self.kind.gvk.api_version, self.kind.gvk.kind).encode(runtime)

    async def get_runtime(self, req: Request) -> Json | None:
        try:
            obj: Json = await self.client.get(self.kind.gvk, req.name, req.namespace)
        except NotFound:
            return None
        obj.setdefault("apiVersion", self.kind.gvk.api_version)
        obj.setdefault("kind", self.kind.gvk.kind)
        return obj

    async def list_referencing_trainjobs(self, runtime: Json) -> list[Json]:
        """TrainJobs naming this runtime, through the runtimeRef field index (terminating ones count)."""
        meta = runtime.get("metadata") or {}
        namespace = (meta.get("namespace") or None) if self.kind.namespaced else None
        trainjobs: list[Json] = await self.client.list(
            TRAINJOB_GVK, namespace=namespace, field_selector={self.kind.trainjob_index: meta.get("name", "")}
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


def setup_runtime_controller(mgr: Manager, kind: RuntimeKind) -> RuntimeReconciler:
    """The runtime kind itself plus the channel of TrainJob notifications."""
    reconciler = RuntimeReconciler(mgr.client, kind)
    (
        Builder(mgr)
        .named(kind.controller_name)
        .for_(kind.gvk)
        .watches_raw_source(ChannelSource(reconciler.channel, Funcs(on_generic=_enqueue_after_delay)))
        .complete(reconciler)
    )
    return reconciler
