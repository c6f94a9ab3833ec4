"""The TrainingRuntime / ClusterTrainingRuntime reconcilers at level v2.3 (Trainer v2.3.0
``pkg/controller/{,cluster}trainingruntime_controller.go``; docs/behaviour/trainer.md §12.7):
the ``resource-in-use`` finalizer is never added and, where a v2.1 manager left it, removed by a
merge patch of the finalizers alone; TrainJob events no longer reach the runtime reconcilers."""

from __future__ import annotations

from typing import Any

import pytest
from trainer_unit_fixtures import fake_client, runtime, trainjob

from manager.client.errors import Conflict, NotFound
from manager.controller.reconcile import Request
from trainer.controllers.trainingruntime import CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME, RuntimeReconciler
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.levels.v2_3 import V2_3
from trainer.runtime.levels.v2_3_finalizer import finalizer_patch
from trainer.runtime.objects import CLUSTER_TRAINING_RUNTIME_GVK, TRAINING_RUNTIME_GVK

Json = dict[str, Any]
FINALIZER = "trainer.kubeflow.org/resource-in-use"
KINDS = {
    "TrainingRuntime": (TRAINING_RUNTIME, "default", Request("default", "runtime"), TRAINING_RUNTIME_GVK),
    "ClusterTrainingRuntime": (
        CLUSTER_TRAINING_RUNTIME,
        None,
        Request("", "runtime"),
        CLUSTER_TRAINING_RUNTIME_GVK,
    ),
}


async def reconcile_v2_3(kind_name: str, objects: list[Json]) -> tuple[Json | None, Any]:
    kind, namespace, req, gvk = KINDS[kind_name]
    client = fake_client(objects)
    assert await RuntimeReconciler(client, kind, V2_3.runtime_finalizer).reconcile(req) is None
    try:
        stored: Json | None = await client.get(gvk, "runtime", namespace or "")
    except NotFound:  # a deleted runtime
        stored = None
    return stored, client


@pytest.mark.parametrize("kind_name", list(KINDS))
async def test_a_referenced_runtime_gets_no_finalizer_and_is_not_rewritten(kind_name: str) -> None:
    namespace = KINDS[kind_name][1]
    before = runtime("runtime", namespace=namespace)
    stored, client = await reconcile_v2_3(
        kind_name, [before, trainjob("tj", runtime_name="runtime", kind=kind_name)]
    )
    assert stored is not None
    assert "finalizers" not in stored["metadata"]
    assert stored["spec"] == before["spec"]  # no typed re-encoding: no `resources: {}`, `metadata: {}`
    assert client.writes == 0


@pytest.mark.parametrize("kind_name", list(KINDS))
@pytest.mark.parametrize("referenced", [True, False], ids=["referenced", "unreferenced"])
async def test_a_live_runtime_loses_the_finalizer_a_v2_1_manager_added(
    kind_name: str, referenced: bool
) -> None:
    namespace = KINDS[kind_name][1]
    objects = [runtime("runtime", namespace=namespace, finalizers=[FINALIZER])]
    if referenced:
        objects.append(trainjob("tj", runtime_name="runtime", kind=kind_name))
    stored, client = await reconcile_v2_3(kind_name, objects)
    assert stored is not None
    assert not stored["metadata"].get("finalizers")
    assert stored["spec"] == objects[0]["spec"]
    assert client.writes == 1


@pytest.mark.parametrize("kind_name", list(KINDS))
async def test_other_finalizers_are_kept(kind_name: str) -> None:
    namespace = KINDS[kind_name][1]
    objects = [
        runtime("runtime", namespace=namespace, finalizers=["example.com/a", FINALIZER, "example.com/b"])
    ]
    stored, _ = await reconcile_v2_3(kind_name, objects)
    assert stored is not None
    assert stored["metadata"]["finalizers"] == ["example.com/a", "example.com/b"]


def test_the_patch_is_a_merge_patch_of_the_finalizers_alone_as_merge_from_computes_it() -> None:
    only = runtime("runtime", finalizers=[FINALIZER])
    assert finalizer_patch(only) == {"metadata": {"finalizers": None}}
    others = runtime("runtime", finalizers=["example.com/a", FINALIZER])
    assert finalizer_patch(others) == {"metadata": {"finalizers": ["example.com/a"]}}
    assert finalizer_patch(runtime("runtime")) is None
    assert finalizer_patch(runtime("runtime", finalizers=["example.com/a"])) is None
    assert others["metadata"]["finalizers"] == ["example.com/a", FINALIZER]  # the cache's copy untouched


async def test_the_removal_sends_no_resource_version_so_a_stale_cache_does_not_conflict() -> None:
    client = fake_client([runtime("runtime", finalizers=[FINALIZER])])
    client.inject_error("update", Conflict("the object has been modified", code=409))  # never used
    await RuntimeReconciler(client, TRAINING_RUNTIME, V2_3.runtime_finalizer).reconcile(
        Request("default", "runtime")
    )
    assert not (await client.get(TRAINING_RUNTIME_GVK, "runtime", "default"))["metadata"].get("finalizers")


def test_trainjob_events_reach_the_runtime_reconcilers_at_v2_1_only() -> None:
    assert V2_1.runtime_finalizer.follows_trainjobs is True
    assert V2_3.runtime_finalizer.follows_trainjobs is False
