"""Cost of pod changes for the PodGroup and ElasticQuota controllers as the cluster grows.

Run: ``make bench`` (or ``.venv/bin/python -m pytest test/bench/test_bench_scheduling.py -m bench -s``).

The real controllers (via ``setup``) run on the framework's real informer cache, filled
in-process (``test/unit/scheduling/memcluster.py``), so what is measured is our code: event ->
map -> queue -> reconcile -> cache reads -> status patch -> the self-event. For clusters of
1k, 10k and 30k pods (groups of 10 pods in 10 namespaces) it prints:

* start-up: time until every controller is idle after the initial list;
* one change at a time: PodGroup reconciles per change (exactly 1, its own group), cached
  objects read per change (exactly the group's 10 pods) and full store scans (0);
* a burst of changes to random pods: wall time per change (throughput, the queue may fold
  several changes of one group into one reconcile), objects read, full scans;

and asserts the property the design relies on: the objects read per change do not grow with
the cluster (one index lookup, the group's own pods).
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "scheduling"))

from memcluster import MemCluster, MemManager
from sched_fixtures import container, pg, pod, res

from trainer.controllers import elasticquota, podgroup
from trainer.controllers.scheduling import setup
from trainer.runtime.context import SetupContext

pytestmark = pytest.mark.bench

Object = dict[str, Any]
NAMESPACES = 10
GROUP_SIZE = 10
CHANGES = 500
SEQUENTIAL = 50


def objects(total_pods: int) -> tuple[list[Object], list[Object]]:
    groups, pods = [], []
    per_namespace = total_pods // NAMESPACES // GROUP_SIZE
    for n in range(NAMESPACES):
        namespace = f"ns-{n}"
        for g in range(per_namespace):
            name = f"job-{g}"
            groups.append(pg(name, namespace, min_member=GROUP_SIZE, phase="Running", running=GROUP_SIZE))
            for p in range(GROUP_SIZE):
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


async def measure(total_pods: int) -> dict[str, float]:
    cluster = MemCluster()
    groups, pods = objects(total_pods)
    mgr = MemManager(cluster)
    assert await setup(SetupContext(mgr))  # type: ignore[arg-type]
    await cluster.seed(podgroup.PODGROUP, groups)
    await cluster.seed(podgroup.POD, pods)
    await cluster.seed(elasticquota.ELASTICQUOTA, [])
    await cluster.count_store_reads(podgroup.POD)
    t0 = time.perf_counter()
    async with mgr.running():
        await mgr.wait_idle(timeout=600)
        startup = time.perf_counter() - t0
        rng = random.Random(7)
        # one change at a time: exactly one reconcile of its own group, its own pods read
        cluster.store_counts.clear()
        cluster.gets.clear()
        for i in range(SEQUENTIAL):
            target = pods[rng.randrange(len(pods))]
            await cluster.put(dict(target, metadata=dict(target["metadata"], annotations={"seq": str(i)})))
            await mgr.wait_idle()
        sequential_reconciles = sum(n for key, n in cluster.gets.items() if key[0] == "PodGroup")
        sequential_reads = cluster.store_counts["objects_read"]
        sequential_scans = cluster.store_counts["full_scan"]
        # a burst of changes to random pods: throughput (the queue may fold changes of one group)
        cluster.store_counts.clear()
        cluster.gets.clear()
        t1 = time.perf_counter()
        for i in range(CHANGES):
            target = pods[rng.randrange(len(pods))]
            meta = dict(target["metadata"], annotations={"bench": str(i)})
            await cluster.put(dict(target, metadata=meta))
        await mgr.wait_idle(timeout=600)
        burst = time.perf_counter() - t1
    reconciles = sum(n for key, n in cluster.gets.items() if key[0] == "PodGroup")
    return {
        "pods": total_pods,
        "seq_reconciles_per_change": sequential_reconciles / SEQUENTIAL,
        "seq_objects_read_per_change": sequential_reads / SEQUENTIAL,
        "seq_full_scans": sequential_scans,
        "startup_s": startup,
        "per_change_ms": burst / CHANGES * 1000,
        "reconciles_per_change": reconciles / CHANGES,
        "objects_read_per_change": cluster.store_counts["objects_read"] / CHANGES,
        "full_scans": cluster.store_counts["full_scan"],
    }


async def test_pod_change_cost_does_not_grow_with_the_cluster() -> None:
    rows = [await measure(n) for n in (1_000, 10_000, 30_000)]
    print()
    print(f"{'':>18} | one change at a time {'':>8} | burst of {CHANGES} changes")
    print(
        f"{'pods':>7} {'startup s':>10} | {'reconciles':>10} {'objs read':>9} {'scans':>5} "
        f"| {'ms/change':>9} {'reconciles':>10} {'objs read':>9} {'scans':>5}"
    )
    for r in rows:
        print(
            f"{r['pods']:>7.0f} {r['startup_s']:>10.2f} | {r['seq_reconciles_per_change']:>10.2f} "
            f"{r['seq_objects_read_per_change']:>9.1f} {r['seq_full_scans']:>5.0f} "
            f"| {r['per_change_ms']:>9.3f} {r['reconciles_per_change']:>10.2f} "
            f"{r['objects_read_per_change']:>9.1f} {r['full_scans']:>5.0f}"
        )
    for r in rows:
        assert r["seq_reconciles_per_change"] == 1.0
        assert r["seq_objects_read_per_change"] == GROUP_SIZE
        assert r["seq_full_scans"] == 0
        assert r["full_scans"] == 0
        # a burst may fold two changes of one group into one reconcile, never more than one each
        assert r["reconciles_per_change"] <= 1.0
        assert r["objects_read_per_change"] <= GROUP_SIZE
