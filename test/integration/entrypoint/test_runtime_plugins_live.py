"""A third-party runtime plugin, pip-installed at test time, runs inside the manager.

The example package (test/testdata/example_plugin) declares an entry point in the group
``trainer.runtime.plugins``; it is installed with ``--no-deps`` into this virtualenv for the
module and uninstalled afterwards. The manager (`python -m trainer`, every component) runs with
``runtimePlugins: [RunSettings]`` against a real API server: the plugin's ConfigMap and env var
reach a TrainJob on a runtime that asks for them, and a TrainJob that makes the plugin raise
fails alone, with a condition naming the plugin, while the manager stays ready and later
TrainJobs still run through the plugin.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_main import start_manager, write_config
from trainer_process import running_manager

from manager.client import Client, NotFound
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.scheme import GroupVersionKind
from manager.testing import eventually

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "test" / "testdata" / "example_plugin"
TJ = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainJob")
JOBSET = GroupVersionKind("jobset.x-k8s.io", "v1alpha2", "JobSet")
CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")
Json = dict[str, Any]


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args], check=True)


@pytest.fixture(scope="module")
def example_plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    # Built from a copy: setuptools writes build/ and *.egg-info next to the sources it builds.
    source = tmp_path_factory.mktemp("plugin") / PACKAGE.name
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    _pip("install", "--no-deps", "--no-cache-dir", str(source))  # builds with PyPI setuptools
    try:
        yield
    finally:
        _pip("uninstall", "-y", "example-trainer-plugin")


def runtime(ns: str) -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "with-settings", "namespace": ns},
        "spec": {
            "mlPolicy": {"numNodes": 1},
            "template": {
                "metadata": {"labels": {"example.com/run-settings": "true"}},
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                                },
                                "spec": {
                                    "template": {
                                        "spec": {"containers": [{"name": "node", "image": "busybox"}]}
                                    }
                                },
                            },
                        }
                    ]
                },
            },
        },
    }


def trainjob(ns: str, name: str, labels: dict[str, str] | None = None) -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": {
            "runtimeRef": {"name": "with-settings", "kind": "TrainingRuntime"},
            "trainer": {"numNodes": 2},
        },
    }


async def _exists(client: Client, gvk: GroupVersionKind, name: str, ns: str) -> Json:
    try:
        obj: Json = await client.get(gvk, name, ns)
    except NotFound as err:
        raise AssertionError(f"{gvk.kind} {name} missing") from err
    return obj


async def test_an_installed_plugin_runs_and_one_that_raises_fails_only_its_trainjob(
    example_plugin: None, control_plane: Environment, namespace: str, tmp_path: Path
) -> None:
    config = {"runtimePlugins": ["RunSettings"]}
    async with running_manager(
        control_plane, tmp_path, config, args=["--controllers=trainer,jobset"]
    ) as manager:
        rest = await load_kubeconfig(control_plane.kubeconfig)
        async with Cluster(rest, field_owner="plugin-test") as cluster:
            client = Client(cluster.transport, cluster.mapper, field_owner="plugin-test")
            ns = namespace
            await client.create(runtime(ns))
            await client.create(trainjob(ns, "explodes", {"example.com/explode": "true"}))
            await client.create(trainjob(ns, "fine"))

            async def failed_alone() -> None:
                tj = await client.get(TJ, "explodes", ns)
                failed = [c for c in tj.get("status", {}).get("conditions", []) if c["type"] == "Failed"]
                assert failed, tj.get("status")
                failed = failed[0]
                assert (failed["status"], failed["reason"]) == ("True", "RuntimePluginFailed")
                assert failed["message"] == (
                    "runtime plugin RunSettings failed: ZeroDivisionError: the example plugin was asked to explode"
                )

            await eventually(failed_alone, timeout=120)
            for name in ("fine",):
                configmap = await eventually(
                    lambda n=name: _exists(client, CONFIGMAP, f"{n}-run-settings", ns), timeout=30
                )
                assert configmap["data"] == {"numNodes": "2"}
                assert configmap["metadata"]["ownerReferences"][0]["name"] == name
                jobset = await eventually(lambda n=name: _exists(client, JOBSET, n, ns), timeout=120)
                [container] = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
                    "containers"
                ]
                assert {"name": "RUN_SETTINGS", "value": "/etc/run-settings"} in container["env"]
            with pytest.raises(NotFound):
                await client.get(JOBSET, "explodes", ns)
            await manager.ready()  # the manager is unharmed ...
            await client.create(trainjob(ns, "later"))  # ... and still runs the plugin
            await eventually(lambda: _exists(client, CONFIGMAP, "later-run-settings", ns), timeout=120)
            await eventually(lambda: _exists(client, JOBSET, "later", ns), timeout=120)
    output = manager.log_path.read_text()
    assert manager.proc.returncode == 0, output[-4000:]
    [startup] = [json.loads(line) for line in output.splitlines() if '"runtime plugins"' in line]
    assert startup["enabled"] == ["RunSettings"]
    assert startup["discovered"] == {
        "RunSettings": "example-trainer-plugin (example_trainer_plugin:RunSettings)"
    }


async def test_a_plugin_no_package_provides_stops_the_start_naming_it(tmp_path: Path) -> None:
    config_path = write_config(tmp_path / "config.yaml", runtimePlugins=["NoSuchPlugin"])
    proc = await start_manager(f"--config={config_path}")
    code = await asyncio.wait_for(proc.wait(), 60)
    assert proc.stdout is not None
    output = (await proc.stdout.read()).decode()
    assert code == 1
    assert (
        'runtimePlugins[0]: Not found: \\"NoSuchPlugin\\"' in output
        or 'runtimePlugins[0]: Not found: "NoSuchPlugin"' in output
    )
