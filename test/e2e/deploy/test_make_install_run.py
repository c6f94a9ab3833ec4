"""`make install && make run` against a cluster of the user's (``KUBECONFIG`` set), then `make uninstall`.

The cluster is a second full local cluster started separately, as a kind cluster would be: make
knows it only through ``KUBECONFIG``. Every port of ``make run`` is overridden with a free one
(``WEBHOOK_PORT``, ``METRICS_PORT``, ``HEALTH_PORT``) so the test never collides with another
``make run`` on this machine. Without ``WEBHOOK_HOST`` the webhooks are not registered (and the
log says so); with ``WEBHOOK_HOST=127.0.0.1`` (this API server runs on this machine) they are,
and a TrainJob runs to Complete through them. Stopping ``make run`` removes the configurations
it registered; ``make uninstall`` then removes the CRDs and runtimes ``make install`` added, with
the TrainJob still there and no manager running to release its runtime's finalizer.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from deploy_e2e import ROOT, WEBHOOK_CONFIGURATIONS, own_cluster, wait_until_ready, wait_webhooks_answer

from manager.client import Client, NotFound
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.envtest.process import free_port
from manager.scheme import GroupVersionKind
from manager.testing import eventually
from trainer import install, levels

V2_1 = levels.get("v2.1")

CRD_GVK = GroupVersionKind("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
RUNTIME_GVK = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "ClusterTrainingRuntime")
TRAINJOB_GVK = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainJob")
NAMESPACE_GVK = GroupVersionKind("", "v1", "Namespace")


@pytest.fixture(scope="module")
def users_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    yield from own_cluster(tmp_path_factory.mktemp("users-cluster") / "env")


def _make(env: Environment, *args: str) -> str:
    proc = subprocess.run(
        ["make", "-s", *args],
        cwd=ROOT,
        env={**os.environ, "KUBECONFIG": str(env.kubeconfig)},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, f"make {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


@asynccontextmanager
async def make_run(env: Environment, work: Path, **variables: str) -> AsyncIterator[tuple[str, Path]]:
    """`make run` with free ports; stopped with Ctrl-C (SIGINT to its process group) at the end."""
    health = free_port()
    ports = {"WEBHOOK_PORT": str(free_port()), "METRICS_PORT": str(free_port()), "HEALTH_PORT": str(health)}
    settings = {"LOCAL_DIR": str(work / "state"), **ports, **variables}
    log_path = work / "make-run.log"
    with log_path.open("wb") as log_file:
        proc = await asyncio.create_subprocess_exec(
            "make",
            "run",
            *(f"{k}={v}" for k, v in settings.items()),
            cwd=ROOT,
            env={**os.environ, "KUBECONFIG": str(env.kubeconfig)},
            stdout=log_file,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        async with aiohttp.ClientSession() as http:
            await wait_until_ready(
                http, f"http://127.0.0.1:{health}", log_path, proc=proc, message="make run never became ready"
            )
        yield log_path.read_text(), log_path
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in the terminal
        await asyncio.wait_for(proc.wait(), 90)


async def _absent(client: Client, gvk: GroupVersionKind, name: str) -> bool:
    try:
        await client.get(gvk, name)
    except NotFound:
        return True
    return False


async def test_make_install_run_and_uninstall_on_a_users_cluster(
    users_cluster: Environment, tmp_path: Path
) -> None:
    # level v2.1: test/e2e/local/test_make_run.py runs `make run` at the default level (v2.3)
    crds, runtimes, _ = install.split(install.render(ROOT / "config" / V2_1.local_manifests))
    output = _make(users_cluster, "install", "LEVEL=v2.1")
    assert f"applied {len(crds) + len(runtimes)} objects" in output, output
    async with Cluster(await load_kubeconfig(users_cluster.kubeconfig), field_owner="e2e") as admin:
        client = Client(admin.transport, admin.mapper, field_owner="e2e")
        for crd in crds:
            await client.get(CRD_GVK, crd["metadata"]["name"])
        for runtime in runtimes:
            await client.get(RUNTIME_GVK, runtime["metadata"]["name"])

        # No WEBHOOK_HOST: the controllers run, no webhook is registered, one line says so.
        first = tmp_path / "first"
        first.mkdir()
        async with make_run(users_cluster, first, LEVEL="v2.1") as (log, _):
            assert log.count("webhooks are not registered") == 1, log
            for gvk, name in WEBHOOK_CONFIGURATIONS:
                assert await _absent(client, gvk, name), name

        # WEBHOOK_HOST named: every webhook is registered there and a TrainJob completes.
        second = tmp_path / "second"
        second.mkdir()
        async with make_run(users_cluster, second, WEBHOOK_HOST="127.0.0.1", LEVEL="v2.1") as (log, log_path):
            assert log.count("webhooks registered at https://127.0.0.1:") == 1, log
            for gvk, name in WEBHOOK_CONFIGURATIONS:
                hooks = (await client.get(gvk, name))["webhooks"]
                assert all(h["clientConfig"]["url"].startswith("https://127.0.0.1:") for h in hooks), name
            await wait_webhooks_answer(users_cluster, "default")
            await client.create(
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "metadata": {"name": "mnist", "namespace": "default"},
                    "spec": {
                        "runtimeRef": {"name": "torch-distributed"},
                        "trainer": {"numNodes": 2, "command": ["torchrun", "train.py"]},
                    },
                }
            )

            async def complete() -> None:
                status = (await client.get(TRAINJOB_GVK, "mnist", "default")).get("status") or {}
                conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
                assert conditions.get("Complete") == "True", status

            await eventually(complete, timeout=240, message="the TrainJob never completed")
        stopped = log_path.read_text()
        assert "removed the webhook configurations registered by this run" in stopped, stopped[-3000:]
        for gvk, name in WEBHOOK_CONFIGURATIONS:
            assert await _absent(client, gvk, name), name

        # With the manager stopped and the TrainJob left in place (its runtime keeps the
        # resource-in-use finalizer), uninstall still removes everything install added.
        runtime = await client.get(RUNTIME_GVK, "torch-distributed")
        assert runtime["metadata"].get("finalizers") == ["trainer.kubeflow.org/resource-in-use"]
        output = _make(users_cluster, "uninstall", "LEVEL=v2.1")
        assert f"make uninstall: deleted {len(crds) + len(runtimes)} objects" in output, output
        for crd in crds:
            assert await _absent(client, CRD_GVK, crd["metadata"]["name"]), crd["metadata"]["name"]
        await client.get(NAMESPACE_GVK, "default")  # nothing else was touched
        # Uninstalling twice is harmless.
        assert "deleted 0 objects" in _make(users_cluster, "uninstall", "LEVEL=v2.1")
