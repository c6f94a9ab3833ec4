"""The ``trainer`` component's controllers: TrainingRuntime, ClusterTrainingRuntime and TrainJob.

Why one function: upstream's start-up registers the runtimes (indexes, plugins) before the
manager starts, then the TrainingRuntime, ClusterTrainingRuntime and TrainJob controllers; this
is that sequence. The runtimes come from the ``SetupContext`` (built once by the entry point);
the webhooks are registered by ``webhooks.setup_trainer``.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from trainer.controllers.trainingruntime import (
    CLUSTER_TRAINING_RUNTIME,
    TRAINING_RUNTIME,
    RuntimeReconciler,
    setup_runtime_controller,
)
from trainer.controllers.trainjob import RECORDER_NAME, TrainJobReconciler, setup_trainjob_controller
from trainer.runtime.context import SetupContext
from trainer.runtime.objects import TRAINJOB_GVK
from trainer.runtime.registry import Runtime

log = structlog.get_logger("trainer.setup")

__all__ = ["TrainerControllers", "setup", "setup_controllers"]


@dataclass
class TrainerControllers:
    """What ``setup_controllers`` registered (handy for tests)."""

    runtimes: dict[str, Runtime]
    training_runtime: RuntimeReconciler
    cluster_training_runtime: RuntimeReconciler
    trainjob: TrainJobReconciler


async def setup_controllers(context: SetupContext) -> TrainerControllers:
    """Runtimes and indexes first, then the TR, CTR and TrainJob controllers (upstream order)."""
    mgr = context.manager
    runtimes = await context.runtimes()
    finalizer = context.level.runtime_finalizer
    training_runtime = setup_runtime_controller(mgr, TRAINING_RUNTIME, finalizer)
    cluster_training_runtime = setup_runtime_controller(mgr, CLUSTER_TRAINING_RUNTIME, finalizer)
    # v2.1.0's TrainJob controller tells the runtime reconcilers of every TrainJob event;
    # v2.3.0's has no watchers
    watchers = [training_runtime, cluster_training_runtime] if finalizer.follows_trainjobs else []
    trainjob = await setup_trainjob_controller(
        mgr,
        runtimes,
        context.reader(),
        watchers,
        context.level.trainjob_event_recorder(context, RECORDER_NAME),
        level=context.level,
    )
    return TrainerControllers(runtimes, training_runtime, cluster_training_runtime, trainjob)


async def setup(context: SetupContext) -> bool:
    """False (registering nothing) when the Trainer CRDs are not installed."""
    if not await context.require_kinds(TRAINJOB_GVK):
        log.error("the TrainJob CRD is not installed: the trainer controllers are skipped")
        return False
    await setup_controllers(context)
    return True
