"""Helpers for the scheduling integration and e2e tests: a running Manager, pods, phases.

Pods are not scheduled on the plain control plane (no scheduler, no kubelet): tests create
them and then write their phase through ``/status``, as upstream's integration tests do.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from manager.client.patch import Patch
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.manager import Manager, Options
from trainer.controllers import podcache
from trainer.controllers.scheduling import setup_controllers
from trainer.runtime.context import SetupContext

Object = dict[str, Any]


@contextlib.asynccontextmanager
async def running_manager(
    env: Environment, *, pod_cache: str | None = None, **setup_args: Any
) -> AsyncIterator[tuple[Manager, bool]]:
    """Build a Manager, call ``setup`` on it, run it until the block ends; yields (mgr, setup's answer).

    ``pod_cache``: set the Pod cache up as the manager's entry point does for ``podCache``
    (``Minimal`` or ``Full``) before the controllers; ``None`` leaves the cache's defaults.
    """
    config = await load_kubeconfig(env.kubeconfig)
    async with Cluster(config, field_owner="scheduling-test") as cluster:
        mgr = Manager(cluster, Options(metrics_bind_address="0"))
        if pod_cache is not None:
            await podcache.configure(mgr, pod_cache, ["scheduling"])
        registered = await setup_controllers(SetupContext(mgr), **setup_args)
        task = asyncio.create_task(mgr.run())
        elected = asyncio.create_task(mgr.elected.wait())
        await asyncio.wait({task, elected}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        elected.cancel()
        if task.done():
            task.result()
        assert mgr.elected.is_set(), "manager did not start within 60s"
        try:
            yield mgr, registered
        finally:
            mgr.stop()
            await asyncio.wait_for(task, timeout=60)


def pod_object(
    name: str, namespace: str, *, group: str | None = None, requests: Object | None = None
) -> Object:
    container: Object = {"name": "main", "image": "busybox"}
    if requests:
        container["resources"] = {"requests": requests}
    meta: Object = {"name": name, "namespace": namespace}
    if group is not None:
        meta["labels"] = {"scheduling.x-k8s.io/pod-group": group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [container]}}


async def set_phase(client: Any, name: str, namespace: str, phase: str) -> None:
    await client.status.patch(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}},
        Patch.merge({"status": {"phase": phase}}),
    )
