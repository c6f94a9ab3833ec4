"""API requests per pod change on a real API server: reads come from the cache, one write.

With many pods cached, a pod phase change must cost the manager one PodGroup status patch and
no GET or LIST at all (upstream's controller also reads from its cache; a Python port that
listed per event would show here). The manager's HTTP transport is wrapped to count every
request it sends; the test's own writes go through a separate connection.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from sched_live import pod_object, running_manager

from manager.client.patch import Patch
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.testing.eventually import eventually
from trainer.controllers.podgroup import PODGROUP

GROUPS = 30
GROUP_SIZE = 10


async def test_pod_change_costs_one_status_patch_and_no_reads(
    control_plane: Environment, namespace: str
) -> None:
    config = await load_kubeconfig(control_plane.kubeconfig)
    async with (
        Cluster(config, field_owner="scheduling-test-writer") as writer,
        running_manager(control_plane) as (mgr, registered),
    ):
        assert registered
        client = writer.api_reader
        sent: Counter[tuple[str, str]] = Counter()
        transport: Any = mgr.cluster.transport  # the concrete Cluster's HTTP transport
        original = transport.request

        async def counting(method: str, path: str, **kwargs: Any) -> Any:
            sent[(method, path)] += 1
            return await original(method, path, **kwargs)

        transport.request = counting

        async def create_group(g: int) -> None:
            await client.create(
                {
                    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                    "kind": "PodGroup",
                    "metadata": {"name": f"g{g}", "namespace": namespace},
                    "spec": {"minMember": GROUP_SIZE},
                }
            )
            for p in range(GROUP_SIZE):
                await client.create(pod_object(f"g{g}-{p}", namespace, group=f"g{g}"))

        await asyncio.gather(*(create_group(g) for g in range(GROUPS)))

        async def all_scheduling() -> None:
            groups = await mgr.client.list(PODGROUP, namespace=namespace)
            assert len(groups) == GROUPS
            assert all((pg.get("status") or {}).get("phase") == "Scheduling" for pg in groups)

        await eventually(all_scheduling, timeout=60, interval=0.2)
        # (the count of start-up patches is not fixed: a reconcile that runs before the watch has
        # brought back its previous patch repeats that hop, an idempotent write, as upstream)
        assert not [key for key in sent if key[0] == "GET"], "start-up reads come from the cache"

        sent.clear()
        await client.status.patch(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "g7-3", "namespace": namespace}},
            Patch.merge({"status": {"phase": "Running"}}),
        )

        async def counted() -> None:
            status = (await mgr.client.get(PODGROUP, "g7", namespace)).get("status") or {}
            assert status.get("running") == 1

        await eventually(counted, timeout=20, interval=0.1)
        path = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups/g7/status"
        assert dict(sent) == {("PATCH", path): 1}, "one status patch, no GET or LIST"
