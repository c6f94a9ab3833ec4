"""`make run LEVEL=v2.3` and `make uninstall LEVEL=v2.3` on a user's cluster (``KUBECONFIG`` set):
the level's CRDs, ``kubeflow-trainer-public`` with its Role and RoleBinding, Trainer v2.3.0's
shipped runtimes and the level's webhook configurations go in, the manager runs with
``--api-level=v2.3``, and the runtime webhook it serves accepts every shipped runtime.

`make run` runs as a user runs it (``python -m trainer.local_run --level v2.3``, webhooks at
127.0.0.1) against a control plane of its own (etcd + kube-apiserver, no CRDs: ``make run``
installs them). The shipped runtimes carry ``trainer.kubeflow.org/webhook-validation: disabled``
(upstream's release does), which the v2.3 runtime webhooks' objectSelector skips; each is also
created once without that label, so our webhook is called on it and admits it.
"""

from __future__ import annotations

import asyncio
import copy
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from manager.client import Client
from manager.client.errors import NotFound, RequestError
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.envtest.process import free_port
from manager.scheme import GroupVersionKind
from manager.testing import eventually
from trainer import install, levels

ROOT = Path(__file__).resolve().parents[3]
LEVEL = levels.get("v2.3")
CRD = GroupVersionKind("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
CTR = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "ClusterTrainingRuntime")
CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")
ROLE = GroupVersionKind("rbac.authorization.k8s.io", "v1", "Role")
NAMESPACE = GroupVersionKind("", "v1", "Namespace")
VALIDATING = GroupVersionKind("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration")
MUTATING = GroupVersionKind("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")
DISABLED = "trainer.kubeflow.org/webhook-validation"
Json = dict[str, Any]


def contains(stored: Any, shipped: Any) -> bool:
    """Whether ``stored`` has every field of ``shipped`` with its value (lists item by item)."""
    if isinstance(shipped, dict):
        return isinstance(stored, dict) and all(
            k in stored and contains(stored[k], v) for k, v in shipped.items()
        )
    if isinstance(shipped, list):
        return (
            isinstance(stored, list) and len(stored) == len(shipped) and all(map(contains, stored, shipped))
        )
    return bool(stored == shipped)


def shipped_runtimes() -> list[Json]:
    return [d for d in install.render(install.local_dir(LEVEL)) if d["kind"] == "ClusterTrainingRuntime"]


def bad_runtime(name: str, labels: dict[str, str]) -> Json:
    """A runtime our webhook refuses: its trainer job has two replicas (``always must be 1``)."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "replicas": 2,
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
                }
            }
        },
    }


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Environment]:
    environment = Environment(tmp_path / "cluster")
    await environment.start()
    try:
        yield environment
    finally:
        await environment.stop()


async def test_make_run_at_v2_3_installs_the_level_and_its_webhook_admits_every_shipped_runtime(
    env: Environment, tmp_path: Path
) -> None:
    health = free_port()
    log = tmp_path / "make-run.log"
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "trainer.local_run",
            f"--dir={tmp_path / 'state'}",
            "--level=v2.3",
            "--webhook-host=127.0.0.1",
            f"--webhook-port={free_port()}",
            f"--metrics-port={free_port()}",
            f"--health-port={health}",
            cwd=ROOT,
            env={**os.environ, "KUBECONFIG": str(env.kubeconfig)},
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        async with aiohttp.ClientSession() as http:

            async def ready() -> None:
                assert proc.returncode is None, log.read_text()[-3000:]
                async with http.get(f"http://127.0.0.1:{health}/readyz") as answer:
                    assert answer.status == 200

            await eventually(ready, timeout=120, retry_on=(AssertionError, aiohttp.ClientError))
        output = log.read_text()
        assert "objects of level v2.3 (as make install)" in output, output[-3000:]
        async with Cluster(await load_kubeconfig(env.kubeconfig), field_owner="user") as cluster:
            client = cluster.api_reader
            await check_installed(client)
            await check_webhook_admits_every_shipped_runtime(client)
            await check_the_manager_runs_at_v2_3(client)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        code = await asyncio.wait_for(proc.wait(), 120)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    output = log.read_text()
    assert code == 0, output[-3000:]
    assert "removed the webhook configurations registered by this run" in output
    for name in ("validator.trainer.kubeflow.org", "defaulter.trainer.kubeflow.org"):
        assert name in output

    # `make uninstall LEVEL=v2.3`: everything `make install` added goes, the Namespace stays
    done = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "trainer.install",
        "uninstall",
        "--level=v2.3",
        f"--kubeconfig={env.kubeconfig}",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    said = (await done.communicate())[0].decode()
    assert done.returncode == 0, said
    async with Cluster(await load_kubeconfig(env.kubeconfig), field_owner="user") as cluster:
        client = cluster.api_reader
        for gvk, name, namespace in (
            (CRD, install.TRAINJOB_CRD, ""),
            (CONFIGMAP, "kubeflow-trainer-public", "kubeflow-system"),
            (ROLE, "kubeflow-trainer-public", "kubeflow-system"),
        ):
            with pytest.raises(NotFound):
                await client.get(gvk, name, namespace)
        await client.get(NAMESPACE, "kubeflow-system")


async def check_installed(client: Client) -> None:
    crd = await client.get(CRD, install.TRAINJOB_CRD)
    assert levels.of_trainjob_crd(crd) is LEVEL
    public = await client.get(CONFIGMAP, "kubeflow-trainer-public", "kubeflow-system")
    assert public["data"] == {"kubeflow_trainer_version": "v2.3.0"}
    await client.get(ROLE, "kubeflow-trainer-public", "kubeflow-system")
    await client.get(MUTATING, "defaulter.trainer.kubeflow.org")
    validator = await client.get(VALIDATING, "validator.trainer.kubeflow.org")
    selectors = {h["name"]: h.get("objectSelector") for h in validator["webhooks"]}
    assert selectors["validator.clustertrainingruntime.trainer.kubeflow.org"] == {
        "matchExpressions": [{"key": DISABLED, "operator": "NotIn", "values": ["disabled"]}]
    }
    live = {d["metadata"]["name"]: d for d in (await client.list_raw(CTR))[0]}
    for runtime in shipped_runtimes():
        stored = live[runtime["metadata"]["name"]]
        # as shipped, with what the CRD's schema defaults (replicas, groupName, ...) added
        assert contains(stored["spec"], runtime["spec"]), runtime["metadata"]["name"]
        assert stored["metadata"]["labels"] == runtime["metadata"]["labels"]


async def check_the_manager_runs_at_v2_3(client: Client) -> None:
    """Only a manager at v2.3 serves the TrainJob defaulter (a v2.1 one answers its path 404,
    and the configuration's failurePolicy Fail refuses the TrainJob): it stamps the time."""
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "defaulted", "namespace": "default"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "suspend": True,
            "runtimePatches": [{"manager": "example.com/tester"}],
        },
    }
    created = await client.create(trainjob)
    (patch,) = created["spec"]["runtimePatches"]
    assert patch["manager"] == "example.com/tester"
    assert patch["time"].endswith("Z"), patch
    await client.delete(created)


async def check_webhook_admits_every_shipped_runtime(client: Client) -> None:
    # the webhook is called (a runtime it refuses is refused) once the manager serves it ...
    async def refused() -> None:
        with pytest.raises(RequestError) as err:
            await client.create(bad_runtime("bad-replicas", {}))
        assert "always must be 1" in str(err.value), err.value

    await eventually(refused, timeout=60, message="the runtime webhook never refused a bad runtime")
    # ... and skipped for a runtime labelled webhook-validation: disabled, as upstream's selector does
    await client.create(bad_runtime("bad-replicas-unvalidated", {DISABLED: "disabled"}))
    await client.delete_by_name(CTR, "bad-replicas-unvalidated")

    names = []
    for runtime in shipped_runtimes():
        checked = copy.deepcopy(runtime)
        checked["metadata"]["name"] = f"{runtime['metadata']['name']}-checked"
        del checked["metadata"]["labels"][DISABLED]
        await client.create(checked)  # through the webhook: admitted
        names.append(checked["metadata"]["name"])
        # and the shipped one itself, applied again as `make install` does (an update)
        await client.apply(runtime, field_owner=install.FIELD_MANAGER, force=True)
    assert len(names) == len(live_names := {d["metadata"]["name"] for d in shipped_runtimes()}) == 8, (
        live_names
    )
    for name in names:
        stored = await client.get(CTR, name)
        assert DISABLED not in stored["metadata"]["labels"]
        await client.delete_by_name(CTR, name)
