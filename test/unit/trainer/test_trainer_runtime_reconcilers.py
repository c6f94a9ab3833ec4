"""TrainingRuntime / ClusterTrainingRuntime reconcilers and their TrainJob notifications (docs/behaviour/trainer.md §4, §10 K)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from trainer_unit_fixtures import fake_client, runtime, trainjob

from manager.client.errors import InternalError
from manager.controller.event import GenericEvent
from manager.controller.reconcile import Request
from trainer.controllers.trainingruntime import (
    CLUSTER_TRAINING_RUNTIME,
    NOTIFY_DELAY,
    TRAINING_RUNTIME,
    RuntimeKind,
    RuntimeReconciler,
    _enqueue_after_delay,
)
from trainer.runtime.objects import CLUSTER_TRAINING_RUNTIME_GVK, TRAINING_RUNTIME_GVK

Json = dict[str, Any]
FINALIZER = "trainer.kubeflow.org/resource-in-use"

# (kind, runtime object namespace, request, gvk, TrainJob kind)
KINDS = {
    "TrainingRuntime": (TRAINING_RUNTIME, "default", Request("default", "runtime"), TRAINING_RUNTIME_GVK),
    "ClusterTrainingRuntime": (
        CLUSTER_TRAINING_RUNTIME,
        None,
        Request("", "runtime"),
        CLUSTER_TRAINING_RUNTIME_GVK,
    ),
}


async def _reconcile(kind_name: str, objects: list[Json]) -> tuple[Json, Any]:
    kind, namespace, req, gvk = KINDS[kind_name]
    client = fake_client(objects)
    await RuntimeReconciler(client, kind).reconcile(req)
    stored: Json = await client.get(gvk, "runtime", namespace or "")
    return stored, client


@pytest.mark.parametrize("kind_name", list(KINDS))
async def test_finalizer_present_not_deleting_no_trainjobs_is_left_alone(kind_name: str) -> None:
    # spec: trainer K1
    # spec: trainer K12
    namespace = KINDS[kind_name][1]
    stored, client = await _reconcile(
        kind_name, [runtime("runtime", namespace=namespace, finalizers=[FINALIZER])]
    )
    assert stored["metadata"]["finalizers"] == [FINALIZER]
    assert client.writes == 0


@pytest.mark.parametrize("kind_name", list(KINDS))
async def test_get_error_is_returned(kind_name: str) -> None:
    # spec: trainer K2
    # spec: trainer K13
    kind, namespace, req, _ = KINDS[kind_name]
    client = fake_client([runtime("runtime", namespace=namespace, finalizers=[FINALIZER], deleting=True)])
    client.inject_error("get", InternalError("boom"))
    with pytest.raises(InternalError, match="boom"):
        await RuntimeReconciler(client, kind).reconcile(req)
    assert client.writes == 0


@pytest.mark.parametrize("kind_name", list(KINDS))
async def test_finalizer_added_when_a_trainjob_references_the_runtime(kind_name: str) -> None:
    # spec: trainer K3
    # spec: trainer K14
    namespace = KINDS[kind_name][1]
    objects = [
        runtime("runtime", namespace=namespace),
        trainjob("tj", runtime_name="runtime", kind=kind_name),
    ]
    stored, client = await _reconcile(kind_name, objects)
    assert stored["metadata"]["finalizers"] == [FINALIZER]
    assert client.requests["update"] == 1


@pytest.mark.parametrize("kind_name", list(KINDS))
async def test_trainjob_of_another_runtime_changes_nothing(kind_name: str) -> None:
    # spec: trainer K4
    # spec: trainer K15
    namespace = KINDS[kind_name][1]
    objects = [
        runtime("runtime", namespace=namespace),
        trainjob("tj", runtime_name="another", kind=kind_name),
    ]
    stored, client = await _reconcile(kind_name, objects)
    assert "finalizers" not in stored["metadata"]
    assert client.writes == 0


@pytest.mark.parametrize("kind_name", list(KINDS))
async def test_no_trainjobs_no_finalizer(kind_name: str) -> None:
    # spec: trainer K5
    # spec: trainer K16
    namespace = KINDS[kind_name][1]
    stored, client = await _reconcile(kind_name, [runtime("runtime", namespace=namespace)])
    assert "finalizers" not in stored["metadata"]
    assert client.writes == 0


async def test_trainjob_of_the_other_kind_does_not_count() -> None:
    objects = [runtime("runtime"), trainjob("tj", runtime_name="runtime", kind="ClusterTrainingRuntime")]
    stored, _client = await _reconcile("TrainingRuntime", objects)
    assert "finalizers" not in stored["metadata"]


async def test_training_runtime_counts_trainjobs_of_its_own_namespace_only() -> None:
    objects = [runtime("runtime"), trainjob("tj", namespace="other", runtime_name="runtime")]
    stored, _ = await _reconcile("TrainingRuntime", objects)
    assert "finalizers" not in stored["metadata"]


async def test_deleting_runtime_keeps_finalizer_while_referenced() -> None:
    objects = [
        runtime("runtime", finalizers=[FINALIZER], deleting=True),
        trainjob("tj", runtime_name="runtime"),
    ]
    stored, client = await _reconcile("TrainingRuntime", objects)
    assert stored["metadata"]["finalizers"] == [FINALIZER]
    assert client.writes == 0


async def test_deleting_unreferenced_runtime_loses_its_finalizer() -> None:
    client = fake_client([runtime("runtime", finalizers=[FINALIZER, "other/keep"], deleting=True)])
    await RuntimeReconciler(client, TRAINING_RUNTIME).reconcile(Request("default", "runtime"))
    stored = await client.get(TRAINING_RUNTIME_GVK, "runtime", "default")
    assert stored["metadata"]["finalizers"] == ["other/keep"]


async def test_missing_runtime_is_done() -> None:
    client = fake_client()
    assert await RuntimeReconciler(client, TRAINING_RUNTIME).reconcile(Request("default", "gone")) is None


# -- notifications ---------------------------------------------------------------------------------


def _queued(reconciler: RuntimeReconciler) -> list[Json]:
    out = []
    while not reconciler.channel.empty():
        out.append(reconciler.channel.get_nowait())
    return out


def _tj(kind: str) -> Json:
    return trainjob("tj", runtime_name="test-runtime", kind=kind)


NOTIFY_CASES = [
    # (id, kind under test, TrainJob ref kind, event, expected queued key)
    ("K6", TRAINING_RUNTIME, "TrainingRuntime", "update", {"namespace": "default", "name": "test-runtime"}),
    ("K7", TRAINING_RUNTIME, "ClusterTrainingRuntime", "update", None),
    ("K8", TRAINING_RUNTIME, "TrainingRuntime", "create", {"namespace": "default", "name": "test-runtime"}),
    ("K9", TRAINING_RUNTIME, "ClusterTrainingRuntime", "create", None),
    ("K10", TRAINING_RUNTIME, "TrainingRuntime", "delete", {"namespace": "default", "name": "test-runtime"}),
    ("K11", TRAINING_RUNTIME, "ClusterTrainingRuntime", "delete", None),
    ("K17", CLUSTER_TRAINING_RUNTIME, "ClusterTrainingRuntime", "update", {"name": "test-runtime"}),
    ("K18", CLUSTER_TRAINING_RUNTIME, "TrainingRuntime", "update", None),
    ("K19", CLUSTER_TRAINING_RUNTIME, "ClusterTrainingRuntime", "create", {"name": "test-runtime"}),
    ("K20", CLUSTER_TRAINING_RUNTIME, "TrainingRuntime", "create", None),
    ("K21", CLUSTER_TRAINING_RUNTIME, "ClusterTrainingRuntime", "delete", {"name": "test-runtime"}),
    ("K22", CLUSTER_TRAINING_RUNTIME, "TrainingRuntime", "delete", None),
]


@pytest.mark.parametrize(
    ("case", "kind", "ref_kind", "event", "expected"), NOTIFY_CASES, ids=[c[0] for c in NOTIFY_CASES]
)
def test_trainjob_events_queue_the_referenced_runtime(
    case: str, kind: RuntimeKind, ref_kind: str, event: str, expected: Json | None
) -> None:
    # spec: trainer K6
    # spec: trainer K7
    # spec: trainer K8
    # spec: trainer K9
    # spec: trainer K10
    # spec: trainer K11
    # spec: trainer K17
    # spec: trainer K18
    # spec: trainer K19
    # spec: trainer K20
    # spec: trainer K21
    # spec: trainer K22
    reconciler = RuntimeReconciler(fake_client(), kind)
    tj = _tj(ref_kind)
    if event == "update":
        reconciler.notify_trainjob_update(tj, tj)
    elif event == "create":
        reconciler.notify_trainjob_update(None, tj)
    else:
        reconciler.notify_trainjob_update(tj, None)
    assert _queued(reconciler) == ([] if expected is None else [{"metadata": expected}])


def test_update_uses_the_new_object() -> None:
    reconciler = RuntimeReconciler(fake_client(), TRAINING_RUNTIME)
    reconciler.notify_trainjob_update(_tj("ClusterTrainingRuntime"), _tj("TrainingRuntime"))
    assert _queued(reconciler) == [{"metadata": {"namespace": "default", "name": "test-runtime"}}]


class _Queue:
    def __init__(self) -> None:
        self.added: list[tuple[Request, float]] = []

    def add(self, item: Request) -> None:
        self.added.append((item, 0.0))

    def add_after(self, item: Request, delay: float) -> None:
        self.added.append((item, delay))


def test_notifications_are_enqueued_after_one_second() -> None:
    queue = _Queue()
    _enqueue_after_delay(GenericEvent({"metadata": {"namespace": "default", "name": "test-runtime"}}), queue)
    assert queue.added == [(Request("default", "test-runtime"), NOTIFY_DELAY)]
    assert NOTIFY_DELAY == 1.0


async def test_channel_never_blocks_the_informer() -> None:
    reconciler = RuntimeReconciler(fake_client(), TRAINING_RUNTIME)
    for _ in range(50):  # upstream's buffered channel (10) would block the TrainJob informer here
        reconciler.notify_trainjob_update(None, _tj("TrainingRuntime"))
    assert reconciler.channel.qsize() == 50
    await asyncio.sleep(0)


@pytest.mark.parametrize("kind_name", list(KINDS))
async def test_finalizer_write_stores_the_runtime_as_go_reencodes_it(kind_name: str) -> None:
    # Upstream's client.Update sends the whole typed struct back: the fields Go always writes
    # (pod template metadata, container resources, the JobSet template's metadata) are stored
    # with their zero values, which changes the spec (and so the generation) of the runtime.
    namespace = KINDS[kind_name][1]
    rjobs = [
        {
            "name": "node",
            "template": {
                "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "busybox"}]}}}
            },
        }
    ]
    objects = [
        runtime("runtime", namespace=namespace, rjobs=rjobs),
        trainjob("tj", runtime_name="runtime", kind=kind_name),
    ]
    stored, _ = await _reconcile(kind_name, objects)
    assert stored["metadata"]["finalizers"] == [FINALIZER]
    template = stored["spec"]["template"]
    assert template["metadata"] == {}
    rjob = template["spec"]["replicatedJobs"][0]
    assert rjob["template"]["metadata"] == {}
    pod_template = rjob["template"]["spec"]["template"]
    assert pod_template["metadata"] == {}
    assert pod_template["spec"]["containers"][0]["resources"] == {}
    assert pod_template["spec"]["containers"][0]["name"] == "node"


@pytest.mark.parametrize("kind_name", list(KINDS))
async def test_finalizer_conflict_from_a_stale_cache_is_no_error(kind_name: str) -> None:
    from manager.client.errors import Conflict

    kind, namespace, req, gvk = KINDS[kind_name]
    client = fake_client(
        [runtime("runtime", namespace=namespace), trainjob("tj", runtime_name="runtime", kind=kind_name)]
    )
    client.inject_error("update", Conflict("the object has been modified", code=409))
    reconciler = RuntimeReconciler(client, kind)
    # the newer runtime's watch event reconciles again: no error, no back-off
    assert await reconciler.reconcile(req) is None
    await reconciler.reconcile(req)
    assert (await client.get(gvk, "runtime", namespace or ""))["metadata"]["finalizers"] == [FINALIZER]
