"""The PodGroup the Trainer's CoScheduling plugin builds, applied and then reconciled (§5, §7.5).

The plugin's own unit tests (``test/unit/runtime/test_runtime_plugins_gang.py``, trainer
F80-F89) check the object it returns; this checks the contract between the two halves on a
real API server: the plugin reads through the manager's cache, Trainer's server-side apply
(field manager ``trainer``, force) is accepted by the CRD, and the pods carrying the plugin's
label are counted by our PodGroup controller.
"""

from __future__ import annotations

from typing import Any

from sched_live import pod_object, set_phase

from manager.manager import Manager
from manager.testing.eventually import eventually
from trainer.api.quantity import Quantity
from trainer.api.trainer_v1alpha1 import PodGroupPolicy, TrainJob
from trainer.controllers.podgroup import PODGROUP
from trainer.runtime.info import Info, PodSet, RuntimePolicy, TemplateSpec
from trainer.runtime.plugins.base import PluginContext
from trainer.runtime.plugins.coscheduling import CoScheduling

Object = dict[str, Any]


def trainjob(name: str, namespace: str, *, suspend: bool = False) -> TrainJob:
    return TrainJob.from_dict(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
            "spec": {
                "runtimeRef": {
                    "name": "torch",
                    "apiGroup": "trainer.kubeflow.org",
                    "kind": "TrainingRuntime",
                },
                "suspend": suspend,
            },
        }
    )


def info(timeout: int, pod_sets: list[PodSet]) -> Info:
    policy = PodGroupPolicy.from_dict({"coscheduling": {"scheduleTimeoutSeconds": timeout}})
    return Info(
        runtime_policy=RuntimePolicy(pod_group_policy=policy), template_spec=TemplateSpec(pod_sets=pod_sets)
    )


async def build_and_apply(mgr: Manager, job: TrainJob, runtime_info: Info) -> list[Object]:
    plugin = CoScheduling(PluginContext(mgr.cache))
    plugin.enforce_pod_group_policy(runtime_info, job)
    objects = await plugin.build(runtime_info, job)
    for obj in objects:
        await mgr.cluster.api_reader.apply(obj, field_owner="trainer", force=True)
    return objects


async def test_trainer_pod_group_is_applied_and_reconciled(scheduling_mgr: Manager, namespace: str) -> None:
    # spec: scheduling 40
    client = scheduling_mgr.cluster.api_reader
    runtime_info = info(30, [PodSet(name="node", count=1)])
    await build_and_apply(scheduling_mgr, trainjob("train-job", namespace), runtime_info)
    stored = await client.get(PODGROUP, "train-job", namespace)
    assert stored["spec"] == {"minMember": 1, "minResources": {}, "scheduleTimeoutSeconds": 30}
    (owner,) = stored["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"], owner["blockOwnerDeletion"]) == (
        "TrainJob",
        "train-job",
        True,
        True,
    )
    labels = runtime_info.scheduler.pod_labels
    assert labels == {"scheduling.x-k8s.io/pod-group": "train-job"}

    pod = pod_object("train-job-node-0-0", namespace)
    pod["metadata"]["labels"] = dict(labels)
    await client.create(pod)
    await set_phase(client, "train-job-node-0-0", namespace, "Running")

    async def running() -> None:
        status = (await client.get(PODGROUP, "train-job", namespace)).get("status") or {}
        assert status == {"phase": "Running", "running": 1}

    await eventually(running, timeout=20, interval=0.2)


async def test_zero_timeout_is_copied_through(scheduling_mgr: Manager, namespace: str) -> None:
    # spec: scheduling 77
    # The scheduler's fallback to permitWaitingTimeSeconds is the coscheduling plugin's (not run
    # here); what the Trainer and the CRD must do is carry the 0 through, which this checks.
    client = scheduling_mgr.cluster.api_reader
    requests = {"cpu": Quantity("500m"), "memory": Quantity("1Gi")}
    runtime_info = info(0, [PodSet(name="node", count=2, single_pod_requests=requests)])
    await build_and_apply(scheduling_mgr, trainjob("zero", namespace, suspend=True), runtime_info)
    stored = await client.get(PODGROUP, "zero", namespace)
    assert stored["spec"]["scheduleTimeoutSeconds"] == 0
    assert stored["spec"]["minMember"] == 2
    assert {k: Quantity(v) for k, v in stored["spec"]["minResources"].items()} == {
        "cpu": Quantity("1"),
        "memory": Quantity("2Gi"),
    }

    async def pending() -> None:
        status = (await client.get(PODGROUP, "zero", namespace)).get("status") or {}
        assert status == {"phase": "Pending"}, "no pods yet: the controller only moves it to Pending"

    await eventually(pending, timeout=20, interval=0.2)
