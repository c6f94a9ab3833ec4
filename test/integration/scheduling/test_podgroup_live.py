"""PodGroup controller on a real API server (upstream ``test/integration/podgroup_controller_test.go``, §7.3).

Upstream's harness: PG minMember 3 and scheduleTimeoutSeconds 10, pods t1-p1-{1,2,3} without
owners; statuses compared on phase, occupiedBy and the three counters, polling for 10 s (we
allow 20 s for slower machines).
"""

from __future__ import annotations

from typing import Any

from sched_live import pod_object, running_manager, set_phase

from manager.envtest import Environment
from manager.manager import Manager
from manager.scheme import GroupVersionKind
from manager.testing.eventually import eventually
from trainer.controllers.podgroup import PODGROUP

Object = dict[str, Any]
NAMESPACE = GroupVersionKind("", "v1", "Namespace")
PODS = ("t1-p1-1", "t1-p1-2", "t1-p1-3")


def podgroup(name: str, namespace: str, min_member: int = 3) -> Object:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member, "scheduleTimeoutSeconds": 10},
    }


async def expect_status(
    client: Any, namespace: str, phase: str, running: int, succeeded: int, failed: int, name: str = "pg1-1"
) -> None:
    async def check() -> None:
        status = (await client.get(PODGROUP, name, namespace)).get("status") or {}
        got = (
            status.get("phase"),
            status.get("occupiedBy", ""),
            status.get("running", 0),
            status.get("succeeded", 0),
            status.get("failed", 0),
        )
        assert got == (phase, "", running, succeeded, failed)

    await eventually(check, timeout=20, interval=0.2)


async def start_case(mgr: Manager, namespace: str, *, labelled: bool = True, running: bool = False) -> Any:
    client = mgr.cluster.api_reader
    await client.create(podgroup("pg1-1", namespace))
    for name in PODS:
        await client.create(pod_object(name, namespace, group="pg1-1" if labelled else None))
        if running:
            await set_phase(client, name, namespace, "Running")
    return client


async def test_pending_pods_make_the_group_scheduling_then_running(
    scheduling_mgr: Manager, namespace: str
) -> None:
    # spec: scheduling 20
    # spec: scheduling 21
    client = await start_case(scheduling_mgr, namespace)
    await expect_status(client, namespace, "Scheduling", 0, 0, 0)
    for name in PODS:
        await set_phase(client, name, namespace, "Running")
    await expect_status(client, namespace, "Running", 3, 0, 0)


async def test_running_pods_then_all_succeed(scheduling_mgr: Manager, namespace: str) -> None:
    # spec: scheduling 22
    # spec: scheduling 23
    client = await start_case(scheduling_mgr, namespace, running=True)
    await expect_status(client, namespace, "Running", 3, 0, 0)
    for name in PODS:
        await set_phase(client, name, namespace, "Succeeded")
    await expect_status(client, namespace, "Finished", 0, 3, 0)


async def test_one_pod_succeeds_group_keeps_running(scheduling_mgr: Manager, namespace: str) -> None:
    # spec: scheduling 24
    client = await start_case(scheduling_mgr, namespace, running=True)
    await expect_status(client, namespace, "Running", 3, 0, 0)
    await set_phase(client, PODS[0], namespace, "Succeeded")
    await expect_status(client, namespace, "Running", 2, 1, 0)


async def test_one_pod_fails_group_fails(scheduling_mgr: Manager, namespace: str) -> None:
    # spec: scheduling 25
    client = await start_case(scheduling_mgr, namespace, running=True)
    await expect_status(client, namespace, "Running", 3, 0, 0)
    await set_phase(client, PODS[0], namespace, "Failed")
    await expect_status(client, namespace, "Failed", 2, 0, 1)


async def test_unlabelled_pods_leave_the_group_pending(scheduling_mgr: Manager, namespace: str) -> None:
    # spec: scheduling 26
    # spec: scheduling 27
    client = await start_case(scheduling_mgr, namespace, labelled=False)
    await expect_status(client, namespace, "Pending", 0, 0, 0)
    for name in PODS:
        await set_phase(client, name, namespace, "Running")
    # A probe group created after the pod changes: once it has reached Scheduling, the single
    # FIFO worker has processed everything queued before it, so pg1-1 had its chance to move.
    await client.create(podgroup("probe", namespace, min_member=1))
    await client.create(pod_object("probe-pod", namespace, group="probe"))
    await expect_status(client, namespace, "Scheduling", 0, 0, 0, name="probe")
    await expect_status(client, namespace, "Pending", 0, 0, 0)


async def test_pods_of_another_namespace_are_not_counted(
    scheduling_mgr: Manager, namespace: str, control_plane: Environment
) -> None:
    # spec: scheduling 61
    # Fixed upstream quirk Q1 (docs/divergences.md S-1): upstream would count the other
    # namespace's labelled pods and move pg1-1 to Scheduling.
    client = scheduling_mgr.cluster.api_reader
    other = f"{namespace}-other"
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    try:
        await client.create(podgroup("pg1-1", namespace))
        for name in PODS:
            await client.create(pod_object(name, other, group="pg1-1"))
        await client.create(podgroup("probe", namespace, min_member=1))
        await client.create(pod_object("probe-pod", namespace, group="probe"))
        await expect_status(client, namespace, "Scheduling", 0, 0, 0, name="probe")
        await expect_status(client, namespace, "Pending", 0, 0, 0)
    finally:
        await client.delete_by_name(NAMESPACE, other)


async def test_setup_skips_when_the_crds_are_not_served(control_plane: Environment) -> None:
    # Discovery pointed at a group-version nobody serves: setup registers nothing and the
    # manager still starts and stops cleanly.
    async with running_manager(control_plane, api_version="scheduling.x-k8s.io/v1alpha9") as (
        mgr,
        registered,
    ):
        assert registered is False
        assert mgr.elected.is_set()
