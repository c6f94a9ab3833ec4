"""The controllers as ``setup`` wires them, running on the framework's real informer cache.

Covers what only shows with watches: which pod events reach which PodGroup (§2.2), the
multi-hop convergence through the controller's own status events (§2.7), the CRD detection,
and the cost of one pod change with 10k pods cached (one index lookup, one group reconciled).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import structlog
from memcluster import MemCluster, MemManager
from sched_fixtures import LABEL, container, eq, pg, pod, res

from manager.cache.store import field_index_name
from manager.client.restmapper import RESTMapping
from manager.metrics import REGISTRY
from trainer.controllers import elasticquota, podgroup
from trainer.controllers.scheduling import setup, setup_controllers
from trainer.runtime.context import SetupContext

Object = dict[str, Any]


async def started(
    cluster: MemCluster, *, pgs: list[Object], pods: list[Object], eqs: list[Object] = ()
) -> MemManager:  # type: ignore[assignment]
    mgr = MemManager(cluster)
    assert await setup(SetupContext(mgr))  # type: ignore[arg-type]
    await cluster.seed(podgroup.PODGROUP, pgs)
    await cluster.seed(podgroup.POD, pods)
    await cluster.seed(elasticquota.ELASTICQUOTA, eqs)
    return mgr


async def pg_status(cluster: MemCluster, name: str, namespace: str = "default") -> Object:
    status: Object = (await cluster.current(podgroup.PODGROUP, namespace, name)).get("status") or {}
    return status


async def test_setup_registers_both_controllers_and_only_the_pod_group_index() -> None:
    cluster = MemCluster()
    mgr = MemManager(cluster)
    assert await setup(SetupContext(mgr))  # type: ignore[arg-type]
    assert [c.name for c in mgr.controllers] == ["podgroup", "elasticquota"]
    assert all(c.options.max_concurrent_reconciles == 1 for c in mgr.controllers), "upstream default"
    store = (await cluster.informer(podgroup.POD)).store
    assert store.has_index(field_index_name(podgroup.POD_GROUP_INDEX))
    # the ElasticQuota controller keeps the Running pods' requests from the events: no index
    # by phase (two entries per Running pod) is kept for it
    assert not store.has_index(field_index_name("status.phase"))


async def test_workers_set_the_concurrency_of_each_controller() -> None:
    # spec: scheduling 76
    # upstream's --workers applies to each of the two controllers; the entry point passes it here
    cluster = MemCluster()
    mgr = MemManager(cluster)
    assert await setup(SetupContext(mgr, max_concurrent_reconciles=3))  # type: ignore[arg-type]
    await cluster.seed(podgroup.PODGROUP, [])
    await cluster.seed(podgroup.POD, [])
    await cluster.seed(elasticquota.ELASTICQUOTA, [])
    async with mgr.running():
        for name in ("podgroup", "elasticquota"):
            value = REGISTRY.get_sample_value(
                "controller_runtime_max_concurrent_reconciles", {"controller": name}
            )
            assert value == 3, name


async def test_setup_skips_cleanly_when_the_crds_are_not_served() -> None:
    cluster = MemCluster()
    mgr = MemManager(cluster)
    with structlog.testing.capture_logs() as logs:
        assert not await setup_controllers(SetupContext(mgr), api_version="scheduling.x-k8s.io/v1alpha9")  # type: ignore[arg-type]
    assert mgr.controllers == []
    (line,) = [entry for entry in logs if "scheduler-plugins CRDs" in entry["event"]]
    assert line["missing"] == "PodGroup,ElasticQuota"
    assert not (await cluster.informer(podgroup.POD)).store.has_index(
        field_index_name(podgroup.POD_GROUP_INDEX)
    )


async def test_setup_registers_only_the_served_kind() -> None:
    # a cluster with only the coscheduling CRD: the PodGroup controller runs, the other is skipped
    cluster = MemCluster(
        served=[RESTMapping(podgroup.POD, "pods", True), RESTMapping(podgroup.PODGROUP, "podgroups", True)]
    )
    mgr = MemManager(cluster)
    with structlog.testing.capture_logs() as logs:
        assert await setup(SetupContext(mgr))  # type: ignore[arg-type]
    assert [c.name for c in mgr.controllers] == ["podgroup"]
    (line,) = [entry for entry in logs if "scheduler-plugins CRDs" in entry["event"]]
    assert line["missing"] == "ElasticQuota"


async def test_worked_example_converges_through_self_events() -> None:
    # spec: scheduling 48
    # spec: scheduling 49
    # §2.7: a new group whose three pods already run takes three hops, each triggered by the
    # watch event of the previous status patch; later pod changes move it on.
    cluster = MemCluster()
    pods = [pod(f"p{i}", phase="Running") for i in range(3)]
    mgr = await started(cluster, pgs=[pg(min_member=3)], pods=pods)
    async with mgr.running():
        await mgr.wait_idle()
        assert await pg_status(cluster, "pg") == {"phase": "Running", "running": 3}
        assert cluster.requests["status.patch PodGroup"] == 3, "'' -> Pending -> Scheduling -> Running"
        await cluster.put(dict(pods[0], status={"phase": "Succeeded"}))
        await mgr.wait_idle()
        assert await pg_status(cluster, "pg") == {"phase": "Running", "running": 2, "succeeded": 1}
        await cluster.put(dict(pods[1], status={"phase": "Failed"}))
        await mgr.wait_idle()
        assert await pg_status(cluster, "pg") == {
            "phase": "Failed",
            "running": 1,
            "succeeded": 1,
            "failed": 1,
        }
        writes = cluster.requests["status.patch PodGroup"]
        await cluster.put(dict(pods[2], status={"phase": "Succeeded"}))
        await mgr.wait_idle()
        assert cluster.requests["status.patch PodGroup"] == writes, "Failed is terminal"


async def test_unlabelled_or_empty_label_pods_enqueue_nothing() -> None:
    # spec: scheduling 59
    cluster = MemCluster()
    mgr = await started(cluster, pgs=[pg(min_member=1, phase="Running", running=1)], pods=[])
    async with mgr.running():
        await mgr.wait_idle()
        cluster.gets.clear()
        await cluster.put(pod("bare", group=None, phase="Running"))
        await cluster.put(pod("empty", group="", phase="Running"))
        await mgr.wait_idle()
        assert not [key for key in cluster.gets if key[0] == "PodGroup"]
    assert podgroup.map_pod_to_group(pod("x", group="")) == []
    assert podgroup.map_pod_to_group(pod("x", group=None)) == []


async def test_relabelled_pod_reconciles_old_and_new_group() -> None:
    # spec: scheduling 60
    cluster = MemCluster()
    moving = pod("mover", group="a", phase="Running")
    groups = [pg(name, min_member=1, phase="Running", running=1) for name in ("a", "b", "c")]
    mgr = await started(cluster, pgs=groups, pods=[moving])
    async with mgr.running():
        await mgr.wait_idle()
        cluster.gets.clear()
        relabelled = dict(moving, metadata=dict(moving["metadata"], labels={LABEL: "b"}))
        await cluster.put(relabelled)
        await mgr.wait_idle()
        reconciled = {key[2] for key in cluster.gets if key[0] == "PodGroup"}
        assert reconciled == {"a", "b"}
        assert await pg_status(cluster, "a") == {"phase": "Pending"}, "a lost its only pod"
        assert await pg_status(cluster, "b") == {"phase": "Running", "running": 1}


async def test_deleted_pod_reconciles_its_group() -> None:
    # spec: scheduling 57
    cluster = MemCluster()
    pods = [pod(f"p{i}", phase="Running") for i in range(3)]
    mgr = await started(cluster, pgs=[pg(min_member=3, phase="Running", running=3)], pods=pods)
    async with mgr.running():
        await mgr.wait_idle()
        await cluster.remove(pods[0])
        await mgr.wait_idle()
        assert await pg_status(cluster, "pg") == {"phase": "Pending", "running": 2}


async def test_elastic_quota_follows_pods_through_the_watch() -> None:
    # spec: scheduling 71
    # spec: scheduling 73
    cluster = MemCluster()
    worker = pod("w", "team", group=None, phase="Pending", containers=[container(res(cpu=2, gpu=1))])
    mgr = await started(cluster, pgs=[], pods=[worker], eqs=[eq("quota", "team", max=res(cpu=8))])
    async with mgr.running():
        await mgr.wait_idle()
        assert (await cluster.current(elasticquota.ELASTICQUOTA, "team", "quota"))["status"] == {
            "used": {"cpu": "0"}
        }
        await cluster.put(dict(worker, status={"phase": "Running"}))
        await mgr.wait_idle()
        got = (await cluster.current(elasticquota.ELASTICQUOTA, "team", "quota"))["status"]
        assert got == {"used": {"cpu": "2", "nvidia.com/gpu": "1"}}
        await cluster.put(dict(worker, status={"phase": "Succeeded"}))
        await mgr.wait_idle()
        got = (await cluster.current(elasticquota.ELASTICQUOTA, "team", "quota"))["status"]
        assert got == {"used": {"cpu": "0"}}
    synced = [(e["message"], e["count"]) for e in cluster.events if e["reason"] == "Synced"]
    assert synced == [
        ("Elastic Quota team/quota synced successfully", 1),
        ("Elastic Quota team/w synced successfully", 2),  # the recorder folds the repeat into a count
    ]


# -- cost of one pod change with 10k pods ------------------------------------------------------

NAMESPACES = 10
GROUPS_PER_NAMESPACE = 100
PODS_PER_GROUP = 10  # 10 x 100 x 10 = 10,000 pods


def big_cluster_objects() -> tuple[list[Object], list[Object]]:
    groups, pods = [], []
    for n in range(NAMESPACES):
        namespace = f"ns-{n}"
        for g in range(GROUPS_PER_NAMESPACE):
            name = f"job-{g}"
            groups.append(
                pg(name, namespace, min_member=PODS_PER_GROUP, phase="Running", running=PODS_PER_GROUP)
            )
            for p in range(PODS_PER_GROUP):
                pods.append(
                    pod(
                        f"{name}-{p}",
                        namespace,
                        group=name,
                        phase="Running",
                        owners=[name],
                        containers=[container(res(cpu="100m"))],
                    )
                )
    return groups, pods


async def test_one_pod_change_with_10k_pods_costs_one_lookup_and_one_group() -> None:
    cluster = MemCluster()
    groups, pods = big_cluster_objects()
    assert len(pods) == 10_000
    mgr = await started(cluster, pgs=groups, pods=pods)
    await cluster.count_store_reads(podgroup.POD)
    async with mgr.running():
        # handlers registered: the informer replayed its store to each (two scans, not reconciles)
        assert cluster.store_counts["full_scan"] == 2
        cluster.store_counts.clear()
        await mgr.wait_idle(timeout=120)
        assert cluster.store_counts["full_scan"] == 0, "start-up reconciles use the index too"
        target = next(
            p for p in pods if p["metadata"]["namespace"] == "ns-7" and p["metadata"]["name"] == "job-42-3"
        )

        # (a) a pod change that leaves the group's status as it is: one reconcile, no write
        cluster.gets.clear()
        cluster.requests.clear()
        cluster.store_counts.clear()
        started_at = time.perf_counter()
        await cluster.put(dict(target, metadata=dict(target["metadata"], annotations={"touched": "yes"})))
        await mgr.wait_idle()
        elapsed = time.perf_counter() - started_at
        assert dict(cluster.gets) == {("PodGroup", "ns-7", "job-42"): 1}, "only its own group, once"
        assert cluster.store_counts["full_scan"] == 0
        assert cluster.store_counts[f"index:{field_index_name(podgroup.POD_GROUP_INDEX)}"] == 1
        assert cluster.store_counts["objects_read"] == PODS_PER_GROUP, "only the group's pods are read"
        assert cluster.requests["status.patch PodGroup"] == 0
        assert elapsed < 1.0, f"one pod change took {elapsed:.3f}s"

        # (b) a change that moves the counters: the group is reconciled, patched, and its own
        # status event brings one more reconcile (upstream's For-PodGroup watch) that writes nothing
        cluster.gets.clear()
        cluster.requests.clear()
        cluster.store_counts.clear()
        await cluster.put(dict(target, status={"phase": "Succeeded"}))
        await mgr.wait_idle()
        assert dict(cluster.gets) == {("PodGroup", "ns-7", "job-42"): 2}
        assert cluster.requests["status.patch PodGroup"] == 1
        assert cluster.store_counts["full_scan"] == 0
        assert cluster.store_counts["objects_read"] == 2 * PODS_PER_GROUP
        status = await pg_status(cluster, "job-42", "ns-7")
        assert (status["running"], status["succeeded"]) == (PODS_PER_GROUP - 1, 1)


@pytest.mark.parametrize("namespace_has_quota", [False, True])
async def test_elastic_quota_cost_is_bounded_by_the_namespace(namespace_has_quota: bool) -> None:
    cluster = MemCluster()
    groups, pods = big_cluster_objects()
    quotas = [eq("quota", "ns-7", max=res(cpu=1))] if namespace_has_quota else []
    mgr = await started(cluster, pgs=groups, pods=pods, eqs=quotas)
    await cluster.count_store_reads(podgroup.POD)
    async with mgr.running():
        await mgr.wait_idle(timeout=120)
        # 10k start-up requests (one per running pod) but one computation per namespace burst,
        # plus the one the quota's own status event triggers
        assert cluster.requests["list ElasticQuota"] <= NAMESPACES + 2
        if namespace_has_quota:
            quota = await cluster.current(elasticquota.ELASTICQUOTA, "ns-7", "quota")
            assert quota["status"] == {"used": {"cpu": "100"}}, "1000 running pods x 100m"
        target = next(p for p in pods if p["metadata"]["namespace"] == "ns-7")
        cluster.requests.clear()
        cluster.store_counts.clear()
        await cluster.put(dict(target, status={"phase": "Succeeded"}))
        await mgr.wait_idle()
        assert cluster.store_counts["full_scan"] == 0
        # the PodGroup side reads the group's pods twice (change + self-event, see above); the
        # quota side reads no pod: it sums the requests it kept from the pod events
        expected = 2 * PODS_PER_GROUP
        assert cluster.store_counts["objects_read"] == expected, "EQ reads no pod from the cache"
        assert cluster.requests["list ElasticQuota"] == (2 if namespace_has_quota else 1), (
            "+1: quota's own event"
        )
        if namespace_has_quota:
            quota = await cluster.current(elasticquota.ELASTICQUOTA, "ns-7", "quota")
            assert quota["status"] == {"used": {"cpu": "99900m"}}
