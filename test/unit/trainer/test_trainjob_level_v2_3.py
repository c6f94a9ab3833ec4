"""The TrainJob reconciler at API level v2.3 (Trainer v2.3.0's trainjob_controller.go) on a fake
API: the managedBy early return; v2.1 keeps reconciling every TrainJob."""

from __future__ import annotations

from typing import Any

import pytest
from trainer_unit_fixtures import NOW, ClientReader, FakeRecorder, fake_client, rjob, runtime, trainjob

from manager.client.errors import NotFound
from manager.controller.reconcile import Request
from manager.testing.fake import FakeClient
from trainer.controllers.trainjob import TrainJobReconciler
from trainer.runtime.levels import RuntimeLevel
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.levels.v2_3 import V2_3, is_managed_by_external_controller
from trainer.runtime.objects import JOBSET_GVK, TRAINJOB_GVK
from trainer.runtime.registry import new_runtimes

Json = dict[str, Any]
REQ = Request("default", "test-job")
CONTROLLER = "trainer.kubeflow.org/trainjob-controller"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"


def node_runtime() -> Json:
    return runtime(rjobs=[rjob("node", "trainer", [{"name": "node", "image": "runtime-image"}])])


async def setup(level: RuntimeLevel, *objects: Json) -> tuple[TrainJobReconciler, FakeClient]:
    client = fake_client(objects)
    runtimes = await new_runtimes(ClientReader(client), client, level=level)
    return TrainJobReconciler(client, runtimes, FakeRecorder(), now=lambda: NOW, level=level), client


@pytest.mark.parametrize(
    ("managed_by", "external"),
    [(None, False), (CONTROLLER, False), (MULTIKUEUE, True), ("", True), ("example.com/other", True)],
)
def test_managed_by_external_controller_unless_unset_or_the_trainers_own(
    managed_by: str | None, external: bool
) -> None:
    spec = {} if managed_by is None else {"managedBy": managed_by}
    assert is_managed_by_external_controller({"spec": spec}) is external
    assert V2_3.reconciles({"spec": spec}) is not external
    assert V2_1.reconciles({"spec": spec}) is True


async def test_v2_3_skips_a_trainjob_managed_by_multikueue_without_any_write() -> None:
    reconciler, client = await setup(V2_3, node_runtime(), trainjob(suspend=True, managedBy=MULTIKUEUE))
    assert await reconciler.reconcile(REQ) is None
    with pytest.raises(NotFound):
        await client.get(JOBSET_GVK, "test-job", "default")
    tj = await client.get(TRAINJOB_GVK, "test-job", "default")
    assert "status" not in tj
    assert client.requests.get("apply", 0) == 0


async def test_v2_3_reconciles_a_trainjob_of_its_own_controller() -> None:
    reconciler, client = await setup(V2_3, node_runtime(), trainjob(suspend=True, managedBy=CONTROLLER))
    await reconciler.reconcile(REQ)
    await client.get(JOBSET_GVK, "test-job", "default")
    tj = await client.get(TRAINJOB_GVK, "test-job", "default")
    assert [c["type"] for c in tj["status"]["conditions"]] == ["Suspended"]


async def test_v2_1_reconciles_a_trainjob_whatever_its_managed_by() -> None:
    reconciler, client = await setup(V2_1, node_runtime(), trainjob(suspend=True, managedBy=MULTIKUEUE))
    await reconciler.reconcile(REQ)
    await client.get(JOBSET_GVK, "test-job", "default")
