"""In-cluster mode installed with Helm: the chart's objects run a TrainJob to Complete.

The same proof as test_in_cluster.py, with `helm install` of charts/kubeflow-trainer (default
values, release kubeflow-trainer, `--create-namespace`) instead of config/default: the
installed manager started as the chart's Pod would start it (in-cluster config from a token of
the chart's ServiceAccount, the chart's Configuration, certificate management on), every webhook
reached through the chart's Service (turned into an ExternalName for loopback, the only change),
RBAC the chart's roles only. The runtimes come from the chart as well, enabled by a `helm
upgrade` once the manager is ready, as `make helm-install` does.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from deploy_e2e import (
    ROOT,
    WEBHOOK_CONFIGURATIONS,
    Installed,
    own_cluster,
    wait_until_ready,
    wait_webhooks_answer,
)
from test_in_cluster import (
    JOBSET_GVK,
    NAME,
    NS,
    SECRET,
    SECRET_GVK,
    SERVICE_GVK,
    TRAINJOB_GVK,
    _port_443_free,
    manager_as_the_pod_runs_it,
    service_to_localhost,
)

from manager.client import Client
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment, assets
from manager.testing import eventually

CHART = ROOT / "charts" / "kubeflow-trainer"
RELEASE = "kubeflow-trainer"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    yield from own_cluster(tmp_path_factory.mktemp("helm-in-cluster") / "env")


def _helm(env: Environment, *args: str) -> str:
    helm = assets.ensure(["helm"])["helm"]
    home = env.dir / "helm-home"
    proc = subprocess.run(
        [str(helm), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(home),
            "KUBECONFIG": str(env.kubeconfig),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        },
    )
    assert proc.returncode == 0, f"helm {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


async def test_the_helm_chart_runs_a_trainjob_through_the_service_with_rotated_certificates(
    cluster: Environment, installed_wheel: Installed, tmp_path: Path
) -> None:
    _port_443_free()
    # level v2.1 (the default level's in-cluster proof is test_in_cluster.py's config/default)
    _helm(
        cluster,
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        NS,
        "--create-namespace",
        "--set",
        "apiLevel=v2.1",
    )
    async with Cluster(await load_kubeconfig(cluster.kubeconfig), field_owner="e2e") as admin:
        client = Client(admin.transport, admin.mapper, field_owner="e2e")
        service = await client.get(SERVICE_GVK, NAME, NS)
        assert service["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        await service_to_localhost(client, service)
        work = tmp_path / "pod"
        work.mkdir()
        async with (
            manager_as_the_pod_runs_it(cluster, client, installed_wheel, work) as (probe, log_path, _state),
            aiohttp.ClientSession() as http,
        ):
            await wait_until_ready(http, probe, log_path, traceback_free=True)
            secret = await client.get(SECRET_GVK, SECRET, NS)
            for gvk, name in WEBHOOK_CONFIGURATIONS:
                hooks = (await client.get(gvk, name))["webhooks"]
                assert {h["clientConfig"]["caBundle"] for h in hooks} == {secret["data"]["ca.crt"]}, name

            # The chart's runtimes, through the Trainer webhook, once the manager serves it and
            # the API server calls the configurations with the injected CA.
            await wait_webhooks_answer(cluster, NS)
            _helm(
                cluster,
                "upgrade",
                RELEASE,
                str(CHART),
                "-n",
                NS,
                "--reuse-values",
                "--set",
                "runtimes.defaultEnabled=true",
            )
            live = await client.get(SERVICE_GVK, NAME, NS)
            assert live["spec"]["type"] == "ExternalName", "helm upgrade left the test's Service change alone"

            await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-h"}})
            await client.create(
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "metadata": {"name": "mnist", "namespace": "team-h"},
                    "spec": {
                        "runtimeRef": {"name": "torch-distributed"},
                        "trainer": {"numNodes": 2, "command": ["torchrun", "train.py"]},
                    },
                }
            )

            async def complete() -> None:
                status = (await client.get(TRAINJOB_GVK, "mnist", "team-h")).get("status") or {}
                conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
                assert conditions.get("Complete") == "True", status

            await eventually(complete, timeout=240, message="the TrainJob never completed")
            await client.get(JOBSET_GVK, "mnist", "team-h")
            output = log_path.read_text()
            assert "forbidden" not in output.lower(), [
                line for line in output.splitlines() if "orbidden" in line
            ][:5]
