"""Level v2.1's ``resource-in-use`` finalizer of TrainingRuntimes and ClusterTrainingRuntimes
(Trainer v2.1.0 ``pkg/controller/{,cluster}trainingruntime_controller.go``;
docs/behaviour/trainer.md §4).

Why: a runtime must not vanish while TrainJobs still point at it (their JobSets would no longer
be rebuildable). The finalizer is added as soon as one TrainJob references the runtime and
removed only when the runtime is being deleted and no TrainJob references it any more; it is
never removed from a live runtime (upstream asserts this). TrainJob events reconcile the
runtime they reference (the TrainJob controller's watchers).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from manager.client.errors import Conflict
from manager.controller_util import add_finalizer, contains_finalizer, remove_finalizer
from manager.meta.object import Json
from trainer.api import gocodec
from trainer.api import trainer_constants as tc

__all__ = ["KEEP_WHILE_REFERENCED", "KeepWhileReferenced"]

log = structlog.get_logger("trainer.runtime_reconciler")


class KeepWhileReferenced:
    """``RuntimeFinalizer`` of v2.1."""

    follows_trainjobs = True
    """TrainJob events reconcile the runtime they reference (v2.1.0's ``WithWatchers``)."""

    async def reconcile(
        self, client: Any, runtime: Json, referencing: Callable[[], Awaitable[list[Json]]]
    ) -> None:
        trainjobs = await referencing()
        try:
            if not contains_finalizer(runtime, tc.ResourceInUseFinalizer) and trainjobs:
                add_finalizer(runtime, tc.ResourceInUseFinalizer)
                await client.update(typed(runtime))
            elif (
                (runtime.get("metadata") or {}).get("deletionTimestamp")
                and not trainjobs
                and remove_finalizer(runtime, tc.ResourceInUseFinalizer)
            ):
                await client.update(typed(runtime))
        except Conflict:
            # the cache holds an older runtime (typically before our own finalizer update): the
            # newer version's watch event reconciles it again -- cache lag, no error, no back-off
            log.debug("finalizer update conflict: waiting for the newer runtime")


def typed(runtime: Json) -> Json:
    """The runtime as upstream's typed ``client.Update`` sends it: Go's re-encoded struct.

    Upstream writes the whole decoded object back, so fields Go always writes
    (``metadata: {}`` of pod templates, ``resources: {}``, ``name: ""``...) are stored with
    their zero values and, the spec having changed, ``generation`` goes to 2.
    """
    return gocodec.codec_for(str(runtime.get("apiVersion")), str(runtime.get("kind"))).encode(runtime)


KEEP_WHILE_REFERENCED = KeepWhileReferenced()
