"""The ``trainer`` component: runtimes, field indexes, the three controllers and the three webhooks.

Why one function: upstream's start-up registers the runtimes (indexes, plugins) before the
manager starts, then the TrainingRuntime, ClusterTrainingRuntime and TrainJob controllers, then
the ClusterTrainingRuntime, TrainingRuntime and TrainJob webhooks; this is that sequence. The
component skips itself when the Trainer CRDs are not installed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import structlog

from manager import Manager
from manager.events import EventRecorder
from manager.scheme import GroupVersionKind
from manager.webhook import validating_handler
from manager.webhook.custom import Decode
from manager.webhook.server import WebhookServer
from trainer.api import trainer_constants as tc
from trainer.controllers.readers import CacheReader
from trainer.controllers.trainingruntime import (
    CLUSTER_TRAINING_RUNTIME,
    TRAINING_RUNTIME,
    RuntimeReconciler,
    setup_runtime_controller,
)
from trainer.controllers.trainjob import RECORDER_NAME, TrainJobReconciler, setup_trainjob_controller
from trainer.controllers.watches import kind_served
from trainer.runtime.objects import TRAINJOB_GVK
from trainer.runtime.registry import Runtime, new_runtimes
from webhooks import trainingruntime as runtime_webhooks
from webhooks import trainjob as trainjob_webhook
from webhooks import typed

log = structlog.get_logger("trainer.setup")

__all__ = [
    "DeferredIndexer",
    "TrainerControllers",
    "register_webhooks",
    "setup",
    "setup_controllers",
    "webhook_runtimes",
]

IndexFunc = Callable[[Any], list[str] | None]


@dataclass
class DeferredIndexer:
    """Collects the runtime framework's index registrations so they can be awaited on the cache.

    The framework registers indexes through a synchronous ``index_field``; the cache's is async
    (it creates the informer). Registering through this and then ``await apply(cache)`` keeps the
    upstream error texts of ``new_runtimes`` for bad names and still indexes the real cache.
    """

    registered: list[tuple[GroupVersionKind, str, IndexFunc]] = field(default_factory=list)

    def index_field(self, gvk: GroupVersionKind, name: str, fn: IndexFunc) -> None:
        if not name:
            raise ValueError("field name cannot be empty")
        self.registered.append((gvk, name, fn))

    async def apply(self, cache: Any) -> None:
        for gvk, name, fn in self.registered:
            await cache.index_field(gvk, name, _never_none(fn))


def _never_none(fn: IndexFunc) -> Callable[[Any], Iterable[str]]:
    return lambda obj: fn(obj) or []


def webhook_runtimes(mgr: Manager) -> dict[str, Runtime]:
    """Runtimes for the webhooks: same plugins, a cache miss confirmed live (divergence T-3).

    Their index registrations are dropped: the controllers' runtimes registered the same ones.
    """
    return new_runtimes(CacheReader(mgr.cache, mgr.api_reader, confirm_misses=True), DeferredIndexer())


@dataclass
class TrainerControllers:
    """What ``setup_controllers`` registered (handy for tests)."""

    runtimes: dict[str, Runtime]
    training_runtime: RuntimeReconciler
    cluster_training_runtime: RuntimeReconciler
    trainjob: TrainJobReconciler


def _recorder(mgr: Manager, name: str) -> Any:
    cluster = mgr.cluster
    factory = getattr(cluster, "event_recorder", None)
    if factory is not None:
        return factory(name)
    return EventRecorder(mgr.api_reader, component=name)


async def setup_controllers(mgr: Manager) -> TrainerControllers:
    """Runtimes and indexes first, then the TR, CTR and TrainJob controllers (upstream order)."""
    indexer = DeferredIndexer()
    reader = CacheReader(mgr.cache, mgr.api_reader)
    runtimes = new_runtimes(reader, indexer)
    await indexer.apply(mgr.cache)
    training_runtime = setup_runtime_controller(mgr, TRAINING_RUNTIME)
    cluster_training_runtime = setup_runtime_controller(mgr, CLUSTER_TRAINING_RUNTIME)
    trainjob = await setup_trainjob_controller(
        mgr,
        runtimes,
        reader,
        [training_runtime, cluster_training_runtime],
        _recorder(mgr, RECORDER_NAME),
    )
    return TrainerControllers(runtimes, training_runtime, cluster_training_runtime, trainjob)


def register_webhooks(server: WebhookServer, runtimes: dict[str, Runtime]) -> None:
    """The three validating webhooks at upstream's paths, in upstream's order (CTR, TR, TrainJob)."""
    api_version = f"{tc.GROUP}/{tc.VERSION}"

    def decode(kind: str) -> Decode:
        return typed.decoder(api_version, kind)

    server.register(
        runtime_webhooks.CLUSTER_TRAINING_RUNTIME_PATH,
        validating_handler(
            runtime_webhooks.ClusterTrainingRuntimeValidator(), decode=decode(tc.ClusterTrainingRuntimeKind)
        ),
    )
    server.register(
        runtime_webhooks.TRAINING_RUNTIME_PATH,
        validating_handler(
            runtime_webhooks.TrainingRuntimeValidator(), decode=decode(tc.TrainingRuntimeKind)
        ),
    )
    server.register(
        trainjob_webhook.PATH,
        validating_handler(trainjob_webhook.TrainJobValidator(runtimes), decode=decode(tc.TrainJobKind)),
    )


async def setup(mgr: Manager, webhook_server: WebhookServer | None) -> bool:
    """Component entry (``trainer.components``): False when the Trainer CRDs are not installed."""
    if not await kind_served(mgr.client, TRAINJOB_GVK):
        log.error("the TrainJob CRD is not installed: the trainer controllers are skipped")
        return False
    await setup_controllers(mgr)
    if webhook_server is not None:
        register_webhooks(webhook_server, webhook_runtimes(mgr))
    return True
