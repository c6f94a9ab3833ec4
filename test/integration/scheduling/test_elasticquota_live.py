"""ElasticQuota controller on a real API server (upstream ``test/integration/elasticquota_controller_test.go``, §7.4).

Upstream creates pods unbound and lets a scheduler bind them; binding does not change the
result (only the phase counts), so here pods stay unbound and their phases are written
through ``/status``. CPU(n) is n cores, Mem(n) is n bytes. Values are compared numerically,
with the same key set.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sched_live import pod_object, running_manager, set_phase

from manager.envtest import Environment
from manager.manager import Manager
from manager.meta.quantity import Quantity
from manager.scheme import GroupVersionKind
from manager.testing.eventually import eventually
from trainer.controllers.elasticquota import ELASTICQUOTA

Object = dict[str, Any]
NAMESPACE = GroupVersionKind("", "v1", "Namespace")


def quota(name: str, namespace: str, *, min: Object | None = None, max: Object | None = None) -> Object:
    spec: Object = {}
    if min is not None:
        spec["min"] = min
    if max is not None:
        spec["max"] = max
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def cm(cpu: int, mem: int) -> Object:
    return {"cpu": str(cpu), "memory": str(mem)}


FULL = cm(100, 1000)


@pytest.fixture(params=["Minimal", "Full"])
async def scheduling_mgr(
    control_plane: Environment, request: pytest.FixtureRequest
) -> AsyncIterator[Manager]:
    """The manager with its Pod cache as shipped (``Minimal``: unrelated Pods projected to one
    synthetic container, docs/scale.md) and as upstream's (``Full``): every result is the same."""
    async with running_manager(control_plane, pod_cache=request.param) as (mgr, registered):
        assert registered
        yield mgr


@pytest.fixture
async def ns2(scheduling_mgr: Manager, namespace: str) -> AsyncIterator[str]:
    client = scheduling_mgr.cluster.api_reader
    name = f"{namespace}-2"
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    await client.delete_by_name(NAMESPACE, name)


async def expect_used(client: Any, namespace: str, name: str, expected: Object) -> None:
    want = {k: Quantity(v) for k, v in expected.items()}

    async def check() -> None:
        status = (await client.get(ELASTICQUOTA, name, namespace)).get("status") or {}
        got = {k: Quantity(v) for k, v in (status.get("used") or {}).items()}
        assert got == want

    await eventually(check, timeout=20, interval=0.2)


async def create_pods(client: Any, pods: list[tuple[str, str, int, int]], phase: str | None = None) -> None:
    for name, namespace, cpu, mem in pods:
        await client.create(pod_object(name, namespace, requests=cm(cpu, mem)))
        if phase:
            await set_phase(client, name, namespace, phase)


async def test_pending_pods_count_nothing_then_running_pods_count(
    scheduling_mgr: Manager, namespace: str, ns2: str
) -> None:
    # spec: scheduling 28
    # spec: scheduling 29
    client = scheduling_mgr.cluster.api_reader
    await client.create(quota("t1-eq1", namespace, min=FULL, max=FULL))
    await client.create(quota("t1-eq2", ns2, min=FULL, max=FULL))
    pods = [
        ("t1-p1", namespace, 10, 20),
        ("t1-p2", namespace, 10, 10),
        ("t1-p3", namespace, 10, 10),
        ("t1-p4", ns2, 10, 10),
    ]
    await create_pods(client, pods)
    await expect_used(client, namespace, "t1-eq1", cm(0, 0))
    await expect_used(client, ns2, "t1-eq2", cm(0, 0))
    for name, pod_namespace, _, _ in pods:
        await set_phase(client, name, pod_namespace, "Running")
    await expect_used(client, namespace, "t1-eq1", cm(30, 40))
    await expect_used(client, ns2, "t1-eq2", cm(10, 10))


async def test_running_pods_then_some_finish(scheduling_mgr: Manager, namespace: str, ns2: str) -> None:
    # spec: scheduling 30
    # spec: scheduling 31
    client = scheduling_mgr.cluster.api_reader
    await client.create(quota("t2-eq1", namespace, min=FULL, max=FULL))
    await client.create(quota("t2-eq2", ns2, min=FULL, max=FULL))
    pods = [
        ("t2-p1", namespace, 10, 20),
        ("t2-p2", namespace, 10, 10),
        ("t2-p3", namespace, 10, 10),
        ("t2-p4", ns2, 10, 10),
    ]
    await create_pods(client, pods, phase="Running")
    await expect_used(client, namespace, "t2-eq1", cm(30, 40))
    await expect_used(client, ns2, "t2-eq2", cm(10, 10))
    await set_phase(client, "t2-p1", namespace, "Succeeded")
    await set_phase(client, "t2-p3", namespace, "Failed")
    await expect_used(client, namespace, "t2-eq1", cm(10, 10))
    await expect_used(client, ns2, "t2-eq2", cm(10, 10))


async def test_used_lists_the_union_of_min_and_max_keys(scheduling_mgr: Manager, namespace: str) -> None:
    # spec: scheduling 32
    # spec: scheduling 33
    client = scheduling_mgr.cluster.api_reader
    await client.create(quota("t3-eq1", namespace, min={"memory": "1000"}, max={"cpu": "100"}))
    await create_pods(client, [("t3-p1", namespace, 10, 20)])
    await expect_used(client, namespace, "t3-eq1", cm(0, 0))
    await set_phase(client, "t3-p1", namespace, "Running")
    await expect_used(client, namespace, "t3-eq1", cm(10, 20))


async def test_quota_without_max(scheduling_mgr: Manager, namespace: str) -> None:
    # spec: scheduling 34
    # spec: scheduling 35
    client = scheduling_mgr.cluster.api_reader
    await client.create(quota("t4-eq1", namespace, min=cm(10, 10)))
    pods = [("t4-p1", namespace, 10, 20), *((f"t4-p{i}", namespace, 10, 10) for i in (2, 3, 4))]
    await create_pods(client, pods)
    await expect_used(client, namespace, "t4-eq1", cm(0, 0))
    for name, pod_namespace, _, _ in pods:
        await set_phase(client, name, pod_namespace, "Running")
    await expect_used(client, namespace, "t4-eq1", cm(40, 50))


async def test_synced_event_recorded_on_the_quota(scheduling_mgr: Manager, namespace: str) -> None:
    # spec: scheduling 73
    client = scheduling_mgr.cluster.api_reader
    await client.create(quota("q", namespace, max={"cpu": "4"}))
    await create_pods(client, [("p1", namespace, 1, 1)])
    await expect_used(client, namespace, "q", {"cpu": "0"})
    await set_phase(client, "p1", namespace, "Running")
    await expect_used(client, namespace, "q", cm(1, 1))

    async def synced_for_p1() -> None:
        events = await client.list(GroupVersionKind("", "v1", "Event"), namespace=namespace)
        messages = {
            e["message"]
            for e in events
            if e["reason"] == "Synced" and e["involvedObject"]["name"] == "q" and e["type"] == "Normal"
        }
        assert f"Elastic Quota {namespace}/p1 synced successfully" in messages

    await eventually(synced_for_p1, timeout=20, interval=0.2)


async def test_init_containers_sidecars_and_overhead_count_as_the_sum_computes(
    scheduling_mgr: Manager, namespace: str
) -> None:
    """max(containers' sum, largest init container, sidecars counted as init containers) plus
    the RuntimeClass overhead the API server sets: the same with the Pod cache's projection."""
    client = scheduling_mgr.cluster.api_reader
    runtime_class = f"rc-{namespace}"
    await client.create(
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": runtime_class},
            "handler": "runc",
            "overhead": {"podFixed": {"cpu": "250m", "memory": "10"}},
        }
    )
    try:
        await client.create(quota("t6-eq", namespace, max={"cpu": "100", "memory": "1Gi"}))
        pod = pod_object("t6-p1", namespace)
        pod["spec"]["runtimeClassName"] = runtime_class
        pod["spec"]["containers"] = [
            {"name": "a", "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "100"}}},
            {"name": "b", "image": "busybox", "resources": {"requests": {"cpu": "500m", "memory": "50"}}},
        ]
        pod["spec"]["initContainers"] = [
            {"name": "init", "image": "busybox", "resources": {"requests": {"cpu": "2", "memory": "10"}}},
            {
                "name": "sidecar",
                "image": "busybox",
                "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "100m", "memory": "300"}},
            },
        ]
        await client.create(pod)
        bare = pod_object("t6-p2", namespace)  # no requests at all
        await client.create(bare)
        await expect_used(client, namespace, "t6-eq", {"cpu": "0", "memory": "0"})
        await set_phase(client, "t6-p1", namespace, "Running")
        await set_phase(client, "t6-p2", namespace, "Running")
        # cpu max(1.5, 2) + 0.25; memory max(150, 300) + 10
        await expect_used(client, namespace, "t6-eq", {"cpu": "2250m", "memory": "310"})
        status = (await client.get(ELASTICQUOTA, "t6-eq", namespace))["status"]
        assert status["used"] == {"cpu": "2250m", "memory": "310"}  # the text, as upstream prints it
    finally:
        await client.delete_by_name(GroupVersionKind("node.k8s.io", "v1", "RuntimeClass"), runtime_class)
