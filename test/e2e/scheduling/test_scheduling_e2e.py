"""Scheduling controllers on the full local cluster: the scheduler binds, KWOK runs the pods.

KWOK's default stages move a scheduled pod to Running, and a pod owned by a Job on to
Succeeded at once; a bare pod stays Running. So the phase walk Pending -> Scheduling ->
Running -> Finished is shown with bare labelled pods, and the test itself writes the final
Succeeded phase (what a kubelet would do); a second test runs the same gang as a Job and lets
KWOK finish it. Every PodGroup status write is observed through a watch, not by polling.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from manager.client.client import Client
from manager.client.patch import Patch
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.manager import Manager, Options
from manager.scheme import GroupVersionKind
from manager.testing.eventually import eventually
from trainer.api.quantity import Quantity
from trainer.controllers.elasticquota import ELASTICQUOTA
from trainer.controllers.podgroup import PODGROUP
from trainer.controllers.scheduling import setup

Object = dict[str, Any]
POD = GroupVersionKind("", "v1", "Pod")
LABEL = "scheduling.x-k8s.io/pod-group"
SCHEDULER = "scheduler-plugins-scheduler"


@contextlib.asynccontextmanager
async def scheduling_manager(env: Environment) -> AsyncIterator[Client]:
    """The product's controllers via ``setup`` on a real Manager; yields a live client."""
    config = await load_kubeconfig(env.kubeconfig)
    async with Cluster(config, field_owner="scheduling-e2e") as cluster:
        mgr = Manager(cluster, Options(metrics_bind_address="0"))
        assert await setup(mgr)
        task = asyncio.create_task(mgr.run())
        await eventually(lambda: task.done() or mgr.elected.is_set(), timeout=60)
        if task.done():
            task.result()
        try:
            yield cluster.api_reader
        finally:
            mgr.stop()
            await asyncio.wait_for(task, timeout=60)


@contextlib.asynccontextmanager
async def phase_log(client: Client, namespace: str, name: str) -> AsyncIterator[list[str]]:
    """Every distinct ``status.phase`` the PodGroup takes, in order, from a watch."""
    phases: list[str] = []
    mapping = await client.mapper.mapping(PODGROUP)
    _, rv = await client.list_raw(PODGROUP, namespace=namespace)

    async def follow() -> None:
        async for event in client.watch(mapping, namespace=namespace, resource_version=rv):
            obj = event.get("object") or {}
            if (obj.get("metadata") or {}).get("name") != name:
                continue
            phase = (obj.get("status") or {}).get("phase")
            if phase and (not phases or phases[-1] != phase):
                phases.append(phase)

    task = asyncio.create_task(follow())
    try:
        yield phases
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def podgroup(name: str, namespace: str, min_member: int) -> Object:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member, "scheduleTimeoutSeconds": 10},
    }


def pod_spec(requests: Object | None = None) -> Object:
    container: Object = {"name": "main", "image": "busybox", "command": ["true"]}
    if requests:
        container["resources"] = {"requests": requests}
    return {"schedulerName": SCHEDULER, "restartPolicy": "Never", "containers": [container]}


def bare_pod(
    name: str, namespace: str, *, group: str | None = None, requests: Object | None = None
) -> Object:
    meta: Object = {"name": name, "namespace": namespace}
    if group:
        meta["labels"] = {LABEL: group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec(requests)}


async def pg_status(client: Client, namespace: str, name: str) -> Object:
    status: Object = (await client.get(PODGROUP, name, namespace)).get("status") or {}
    return status


async def test_gang_of_three_walks_every_phase(full_cluster: Environment, full_namespace: str) -> None:
    ns = full_namespace
    async with scheduling_manager(full_cluster) as client, phase_log(client, ns, "gang") as phases:
        await client.create(podgroup("gang", ns, 3))
        for i in range(3):
            await client.create(bare_pod(f"gang-{i}", ns, group="gang"))

        async def running() -> None:
            assert await pg_status(client, ns, "gang") == {"phase": "Running", "running": 3}

        await eventually(running, timeout=120, message="KWOK never ran the three pods")
        pods = await client.list(POD, namespace=ns)
        assert all(p["spec"].get("nodeName", "").startswith("kwok-node-") for p in pods), (
            "bound by the scheduler"
        )

        # the kubelet's part under KWOK's default stages: the containers exit 0
        for i in range(3):
            await client.status.patch(
                {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"gang-{i}", "namespace": ns}},
                Patch.merge({"status": {"phase": "Succeeded"}}),
            )

        async def finished() -> None:
            assert await pg_status(client, ns, "gang") == {"phase": "Finished", "succeeded": 3}

        await eventually(finished, timeout=60)
        await eventually(lambda: phases[-1:] == ["Finished"], timeout=30)
        assert phases == ["Pending", "Scheduling", "Running", "Finished"]


async def test_gang_run_as_a_job_finishes_under_kwok(full_cluster: Environment, full_namespace: str) -> None:
    ns = full_namespace
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "trainer-node", "namespace": ns},
        "spec": {
            "completions": 3,
            "parallelism": 3,
            "backoffLimit": 0,
            "template": {"metadata": {"labels": {LABEL: "job-gang"}}, "spec": pod_spec()},
        },
    }
    async with scheduling_manager(full_cluster) as client, phase_log(client, ns, "job-gang") as phases:
        await client.create(podgroup("job-gang", ns, 3))
        await client.create(job)

        async def finished() -> None:
            status = await pg_status(client, ns, "job-gang")
            assert status.get("phase") == "Finished"
            assert status.get("succeeded") == 3
            assert status.get("occupiedBy") == f"{ns}/trainer-node", "the pods' owner, the Job"

        await eventually(finished, timeout=120, message="the Job's gang never finished")
        await eventually(lambda: phases[-1:] == ["Finished"], timeout=30)
        assert phases[:2] == ["Pending", "Scheduling"], phases
        assert set(phases) <= {"Pending", "Scheduling", "Running", "Finished"}, phases


async def test_elastic_quota_used_follows_pods_starting_and_finishing(
    full_cluster: Environment, full_namespace: str
) -> None:
    ns = full_namespace

    async def used() -> dict[str, Quantity]:
        status = (await client.get(ELASTICQUOTA, "team-quota", ns)).get("status") or {}
        return {k: Quantity(v) for k, v in (status.get("used") or {}).items()}

    async def expect(cpu: str, memory: str) -> None:
        async def check() -> None:
            assert await used() == {"cpu": Quantity(cpu), "memory": Quantity(memory)}

        await eventually(check, timeout=60)

    async with scheduling_manager(full_cluster) as client:
        await client.create(
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "ElasticQuota",
                "metadata": {"name": "team-quota", "namespace": ns},
                "spec": {"min": {"cpu": "2"}, "max": {"cpu": "8", "memory": "16Gi"}},
            }
        )
        await expect("0", "0")
        for i in range(2):
            await client.create(bare_pod(f"w-{i}", ns, requests={"cpu": "500m", "memory": "1Gi"}))
        await expect("1", "2Gi")  # KWOK started both
        await client.status.patch(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w-0", "namespace": ns}},
            Patch.merge({"status": {"phase": "Succeeded"}}),
        )
        await expect("500m", "1Gi")
        await client.delete_by_name(POD, "w-1", ns, grace_period_seconds=0)
        await expect("0", "0")
