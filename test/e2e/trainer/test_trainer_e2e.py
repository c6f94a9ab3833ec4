"""The product (`python -m trainer`) on the full local cluster with the shipped torch runtime.

What this proves end to end: the manager process serves its webhooks to a real API server,
builds the JobSet for a TrainJob on the shipped ``torch-distributed`` ClusterTrainingRuntime,
keeps the never-suspended TrainJob free of a Suspended condition, and kube-controller-manager's
garbage collector removes the JobSet with its TrainJob (owner reference with
``blockOwnerDeletion``, docs/behaviour/trainer.md §3.5); with the JobSet controller of the same process, TrainJobs on
the shipped torch and deepspeed runtimes run to ``Complete`` (KWOK completes the pods).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from trainer_process import running_manager, shipped_webhooks

from manager.client import Client, NotFound
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.scheme import GroupVersionKind
from manager.testing import eventually

ROOT = Path(__file__).resolve().parents[3]
TJ = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainJob")
JOBSET = GroupVersionKind("jobset.x-k8s.io", "v1alpha2", "JobSet")
VWC_PATH = (
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/validator.trainer.kubeflow.org"
)
Json = dict[str, Any]


@pytest.fixture
async def product(full_cluster: Environment, full_namespace: str, tmp_path: Path) -> AsyncIterator[Client]:
    """The manager as a subprocess, every shipped webhook installed for the test namespace, the torch runtime applied."""
    async with (
        running_manager(full_cluster, tmp_path) as manager,
        shipped_webhooks(full_cluster, full_namespace, tmp_path, manager),
    ):
        await full_cluster.apply_manifests(
            [ROOT / "config" / "runtimes" / "torch-distributed.yaml"], field_manager="e2e"
        )
        rest = await load_kubeconfig(full_cluster.kubeconfig)
        async with Cluster(rest, field_owner="e2e") as cluster:
            yield Client(cluster.transport, cluster.mapper, field_owner="e2e")


async def test_torch_trainjob_gets_its_jobset_and_gc_removes_it(product: Client, full_namespace: str) -> None:
    client, ns = product, full_namespace
    tj = await client.create(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "e2e-test-torch", "namespace": ns},
            "spec": {"runtimeRef": {"name": "torch-distributed"}},
        }
    )
    assert tj["spec"]["runtimeRef"] == {
        "name": "torch-distributed",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }

    async def jobset_built() -> Json:
        try:
            jobset: Json = await client.get(JOBSET, "e2e-test-torch", ns)
        except NotFound as err:
            raise AssertionError("no JobSet yet") from err
        [node] = jobset["spec"]["replicatedJobs"]
        assert node["name"] == "node"
        assert node["template"]["spec"]["parallelism"] == 1
        [container] = node["template"]["spec"]["template"]["spec"]["containers"]
        assert container["image"] == "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"
        assert jobset["spec"]["suspend"] is False
        [owner] = jobset["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["blockOwnerDeletion"]) == (
            "TrainJob",
            tj["metadata"]["uid"],
            True,
        )
        return jobset

    await eventually(jobset_built, timeout=60)
    current = await client.get(TJ, "e2e-test-torch", ns)
    assert [c["type"] for c in (current.get("status") or {}).get("conditions", [])] in ([], ["Complete"])

    await client.delete_by_name(TJ, "e2e-test-torch", ns, propagation_policy="Foreground")

    async def collected() -> None:
        for gvk in (JOBSET, TJ):
            try:
                await client.get(gvk, "e2e-test-torch", ns)
            except NotFound:
                continue
            raise AssertionError(f"{gvk.kind} still exists")

    await eventually(collected, timeout=120, message="GC never removed the TrainJob's JobSet")


def _summary(tj: Json) -> tuple[list[tuple[str, str, str, str]], dict[str, Json]]:
    status = tj.get("status") or {}
    conditions = [(c["type"], c["status"], c["reason"], c["message"]) for c in status.get("conditions", [])]
    return conditions, {j["name"]: j for j in status.get("jobsStatus", [])}


COMPLETE = ("Complete", "True", "AllJobsCompleted", "jobset completed successfully")


async def test_torch_trainjob_runs_to_complete(product: Client, full_namespace: str) -> None:
    # spec: trainer M1
    client, ns = product, full_namespace
    await client.create(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "e2e-test-torch", "namespace": ns},
            "spec": {"runtimeRef": {"name": "torch-distributed"}},
        }
    )

    async def complete() -> None:
        conditions, jobs = _summary(await client.get(TJ, "e2e-test-torch", ns))
        assert conditions == [COMPLETE]  # never suspended: no Suspended condition
        assert jobs == {
            "node": {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
        }

    await eventually(complete, timeout=180, message="the torch TrainJob never completed")


async def test_deepspeed_trainjob_runs_to_complete(
    product: Client, full_namespace: str, full_cluster: Environment
) -> None:
    # spec: trainer M2
    # KWOK completes every pod a Job owns, so the sshd `node` pods succeed too (upstream's real
    # cluster keeps them running until the launcher's success completes the JobSet): only the
    # launcher's counters are compared exactly.
    await full_cluster.apply_manifests(
        [ROOT / "config" / "runtimes" / "deepspeed-distributed.yaml"], field_manager="e2e"
    )
    client, ns = product, full_namespace
    await client.create(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "e2e-test-deepspeed", "namespace": ns},
            "spec": {"runtimeRef": {"name": "deepspeed-distributed"}},
        }
    )

    async def complete() -> None:
        conditions, jobs = _summary(await client.get(TJ, "e2e-test-deepspeed", ns))
        assert conditions == [COMPLETE]
        assert sorted(jobs) == ["launcher", "node"]
        assert jobs["launcher"] == {
            "name": "launcher",
            "ready": 0,
            "succeeded": 1,
            "failed": 0,
            "active": 0,
            "suspended": 0,
        }

    await eventually(complete, timeout=180, message="the deepspeed TrainJob never completed")
