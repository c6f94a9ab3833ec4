"""Level v2.3's ``resource-in-use`` finalizer of TrainingRuntimes and ClusterTrainingRuntimes
(Trainer v2.3.0 ``pkg/controller/{,cluster}trainingruntime_controller.go``;
docs/behaviour/trainer.md §12.7): only removed.

v2.3.0's TrainJob controller has no runtime watchers and nothing adds the finalizer any more
(the TrainJobs keep a snapshot of their runtime from their creation instead, the ConfigMap of
``v2_3_snapshot.py``; §12.7, §12.10). The
runtime reconcilers, triggered by the runtimes' own events only, remove a finalizer a v2.1
manager left, from a live runtime as from one being deleted, whether TrainJobs reference it or
not: ``Patch(ctx, &runtime, client.MergeFrom(prev))``, a JSON merge patch of the finalizers
alone, without resourceVersion (so never a conflict), which leaves the spec and its
``generation`` as they are.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from manager.client.patch import Patch
from manager.controller_util import remove_finalizer
from manager.meta.object import Json
from trainer.api import trainer_constants as tc

__all__ = ["REMOVE_ONLY", "RemoveOnly", "finalizer_patch"]


def finalizer_patch(runtime: Json) -> Json | None:
    """The merge patch removing ``resource-in-use`` from ``runtime`` (None: it has none).

    What ``MergeFrom`` computes between the runtime and a copy without the finalizer: only
    ``metadata.finalizers`` differs, sent whole (a merge patch replaces lists), or as null when
    none is left (Go's ``omitempty`` drops the emptied list)."""
    modified: Json = {
        "metadata": {"finalizers": list((runtime.get("metadata") or {}).get("finalizers") or ())}
    }
    if not remove_finalizer(modified, tc.ResourceInUseFinalizer):
        return None
    return {"metadata": {"finalizers": modified["metadata"]["finalizers"] or None}}


class RemoveOnly:
    """``RuntimeFinalizer`` of v2.3."""

    follows_trainjobs = False
    """No TrainJob watchers: only the runtimes' own events reconcile them."""

    async def reconcile(
        self, client: Any, runtime: Json, referencing: Callable[[], Awaitable[list[Json]]]
    ) -> None:
        patch = finalizer_patch(runtime)
        if patch is not None:
            await client.patch(runtime, Patch.merge(patch))


REMOVE_ONLY = RemoveOnly()
