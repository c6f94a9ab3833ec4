"""Level v2.3's status server (docs/behaviour/trainer.md §12.12) on the full local cluster, with
PyPI's ``kubeflow`` SDK 0.5.0 unchanged in its own virtualenv, as the trainer pod would run it.

The manager runs as a subprocess at ``--api-level=v2.3`` with ``featureGates: {TrainJobStatus:
true}`` and the jobset and trainer controllers; the v2.3 CRDs replace the session's v2.1 ones for
the test and are put back after (as ``test_progress_e2e.py`` does for the gate's CRD). Outside
the cluster the manager's own ServiceAccount token (whose issuer the server verifies against, as
Trainer v2.3.0 reads it from ``/var/run/secrets/kubernetes.io/serviceaccount/token``) is a
TokenRequest in the directory ``KUBERNETES_SERVICE_ACCOUNT_DIR`` names.

KWOK runs no code, so the test does what the kubelet and the pod would: the pod's token is a
TokenRequest bound to the pod with the audience of the pod's projected volume, the CA the
ConfigMap the manager built for the pod, and ``update_trainjob_status()`` runs with the env the
manager injected into the pod (the URL's Service name resolved to 127.0.0.1, where the manager
listens). Its update is read back through the SDK: ``TrainerClient().get_job()`` (0.5.0's
``TrainJob`` type has no trainerStatus, so the same TrainJob is also decoded with the SDK's own
API model, ``kubeflow_trainer_api``'s ``TrainerV1alpha1TrainJob``). A token of another namespace
and one with another TrainJob's audience make the SDK's call report failure, and nothing lands.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from trainer_process import running_manager

from manager.client import Client, NotFound
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.envtest.certs import TinyCA
from manager.envtest.process import free_port
from manager.scheme import GroupVersionKind
from manager.testing import eventually

ROOT = Path(__file__).resolve().parents[3]
TJ = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainJob")
POD = GroupVersionKind("", "v1", "Pod")
CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")
MANAGER_NS = "kubeflow-system"
SERVICE = "kubeflow-trainer-controller-manager"
SDK_VERSION = "0.5.0"
Json = dict[str, Any]


def torch_runtime(namespace: str) -> Json:
    """A torch TrainingRuntime of the test namespace (the SDK reads its framework label); its pods
    name their ServiceAccount, which this API server (no ServiceAccount admission) does not set."""
    node = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {
                # what JobSet's defaulting webhook (not installed here) sets: the SDK reads the index
                "completionMode": "Indexed",
                "template": {
                    "spec": {
                        "restartPolicy": "OnFailure",
                        "serviceAccountName": "default",
                        "containers": [
                            {"name": "node", "image": "pytorch/pytorch:2.9.1-cuda12.8-cudnn9-runtime"}
                        ],
                    }
                },
            },
        },
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {
            "name": "torch-status",
            "namespace": namespace,
            "labels": {"trainer.kubeflow.org/framework": "torch"},
        },
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [node]}}},
    }


@pytest.fixture
async def status_v2_3(
    full_cluster: Environment, full_namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Client, int]]:
    """The v2.3 manager with the gate on, the v2.3 CRDs, the webhook Secret with the CA, the runtime."""
    v2_3_crds = sorted((ROOT / "config" / "overlays" / "v2.3" / "crd").glob("*.yaml"))
    await full_cluster.install_crds(v2_3_crds)
    ca = TinyCA("trainer-e2e-status-v2.3-ca")
    await full_cluster.apply(
        "/api/v1/namespaces/" + MANAGER_NS,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MANAGER_NS}},
    )
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "kubeflow-trainer-webhook-cert", "namespace": MANAGER_NS},
        "data": {"ca.crt": base64.b64encode(ca.cert_pem).decode()},
    }
    await full_cluster.apply(f"/api/v1/namespaces/{MANAGER_NS}/secrets/kubeflow-trainer-webhook-cert", secret)
    # what config/overlays/v2.3 installs and the SDK reads at start
    public = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kubeflow-trainer-public", "namespace": MANAGER_NS},
        "data": {"kubeflow_trainer_version": "v2.3.0"},
    }
    await full_cluster.apply(f"/api/v1/namespaces/{MANAGER_NS}/configmaps/kubeflow-trainer-public", public)
    sa_dir = tmp_path / "manager-serviceaccount"
    sa_dir.mkdir()
    (sa_dir / "token").write_text(await full_cluster.service_account_token(MANAGER_NS, SERVICE))
    (sa_dir / "namespace").write_text(MANAGER_NS)
    monkeypatch.setenv("KUBERNETES_SERVICE_ACCOUNT_DIR", str(sa_dir))
    status_port = free_port()
    config = {"statusServer": {"port": status_port}, "featureGates": {"TrainJobStatus": True}}
    try:
        async with running_manager(
            full_cluster,
            tmp_path,
            config,
            args=["--api-level=v2.3", "--controllers=jobset,trainer"],
            ca=ca,
            dns=["localhost", f"{SERVICE}.{MANAGER_NS}.svc"],
            ready_timeout=90,
        ):
            rest = await load_kubeconfig(full_cluster.kubeconfig)
            async with Cluster(rest, field_owner="e2e") as cluster:
                client = Client(cluster.transport, cluster.mapper, field_owner="e2e")
                await client.create(torch_runtime(full_namespace))
                yield client, status_port
    finally:
        # the session's (v2.1) CRDs back for every other test: each one the v2.3 set replaced
        # (TrainJob, JobSet and both runtime kinds; the v2.1 runtimes need torch numProcPerNode)
        bases = ROOT / "config" / "crd" / "bases"
        await full_cluster.install_crds([bases / crd.name for crd in v2_3_crds])


@pytest.fixture(scope="module")
def sdk_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv with PyPI's ``kubeflow`` SDK (its own dependency set)."""
    venv = tmp_path_factory.mktemp("kubeflow-sdk") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"kubeflow=={SDK_VERSION}"], check=True, timeout=600
    )
    return python


# Runs in the SDK's virtualenv as the trainer pod's code would; cluster DNS is emulated by
# resolving the Service's name to loopback. Exit 0 only when update_trainjob_status() says sent.
UPDATE_SCRIPT = """
import socket, sys
service = sys.argv[1]
real = socket.getaddrinfo
def resolve(host, *args, **kwargs):
    return real("127.0.0.1" if host == service else host, *args, **kwargs)
socket.getaddrinfo = resolve
from kubeflow.trainer import update_trainjob_status
sent = update_trainjob_status(progress_percent=77, estimated_remaining_seconds=600, metrics={"loss": 0.125})
sys.exit(0 if sent else 3)
"""

# The SDK's view of the TrainJob: get_job() and the SDK's API model of the same object.
READ_SCRIPT = """
import json, sys
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import TrainerClient
from kubeflow_trainer_api.models import TrainerV1alpha1TrainJob
namespace, name = sys.argv[1], sys.argv[2]
client = TrainerClient(backend_config=KubernetesBackendConfig(namespace=namespace))
job = client.get_job(name)
raw = client.backend.custom_api.get_namespaced_custom_object(
    "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", name
)
status = TrainerV1alpha1TrainJob.from_dict(raw).status
trainer_status = status.trainer_status if status else None
print(json.dumps({
    "name": job.name,
    "runtime": job.runtime.name,
    "trainerStatus": trainer_status.to_dict() if trainer_status else None,
}, default=str))
"""


def run_update(python: Path, env: dict[str, str], token: str, ca_pem: str, mounts: Path) -> int:
    """``update_trainjob_status()`` with the pod's env, the token and CA where the pod mounts them."""
    mounts.mkdir(exist_ok=True)
    token_path, ca_path = mounts / "token", mounts / "ca.crt"
    token_path.write_text(token)
    ca_path.write_text(ca_pem)
    pod_env = {
        "PATH": "/usr/bin:/bin",
        "KUBEFLOW_TRAINER_SERVER_URL": env["KUBEFLOW_TRAINER_SERVER_URL"],
        "KUBEFLOW_TRAINER_SERVER_CA_CERT": str(ca_path),
        "KUBEFLOW_TRAINER_SERVER_TOKEN": str(token_path),
    }
    host = str(urlsplit(env["KUBEFLOW_TRAINER_SERVER_URL"]).hostname)
    done = subprocess.run([str(python), "-c", UPDATE_SCRIPT, host], env=pod_env, timeout=60, check=False)
    return done.returncode


def sdk_view(python: Path, kubeconfig: Path, home: Path, namespace: str, name: str) -> Json:
    done = subprocess.run(
        [str(python), "-c", READ_SCRIPT, namespace, name],
        env={"PATH": "/usr/bin:/bin", "KUBECONFIG": str(kubeconfig), "HOME": str(home)},
        timeout=60,
        check=False,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


async def trainer_pod(client: Client, ns: str, trainjob: str) -> Json:
    async def found() -> Json:
        pods = await client.list(
            POD, namespace=ns, label_selector={"jobset.sigs.k8s.io/jobset-name": trainjob}
        )
        assert pods, f"no pod of {trainjob} yet"
        return dict(pods[0])

    return await eventually(found, timeout=90, message=f"no pod of TrainJob {trainjob}")


async def pod_token(full_cluster: Environment, client: Client, pod: Json, audience: str) -> str:
    """TokenRequest for the pod's ServiceAccount, bound to the pod, as the kubelet does for the volume."""
    meta = pod["metadata"]
    sa = pod["spec"].get("serviceAccountName") or "default"
    try:
        await client.get(GroupVersionKind("", "v1", "ServiceAccount"), sa, meta["namespace"])
    except NotFound:
        await client.create(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": sa, "namespace": meta["namespace"]},
            }
        )
    status, body = await full_cluster.request(
        "POST",
        f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{sa}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [audience],
                "expirationSeconds": 3600,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            },
        },
    )
    assert status == 201, body
    return str(body["status"]["token"])


def train_job(namespace: str, name: str) -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"runtimeRef": {"name": "torch-status", "kind": "TrainingRuntime"}},
    }


async def test_the_sdks_update_lands_at_v2_3_and_foreign_tokens_are_refused(
    status_v2_3: tuple[Client, int],
    full_cluster: Environment,
    full_namespace: str,
    sdk_python: Path,
    tmp_path: Path,
) -> None:
    client, status_port = status_v2_3
    ns = full_namespace
    await client.create(train_job(ns, "status-a"))
    await client.create(train_job(ns, "status-b"))
    pod_a = await trainer_pod(client, ns, "status-a")
    pod_b = await trainer_pod(client, ns, "status-b")

    # what the manager injected into the pod (Trainer v2.3.0's TrainJobStatus plugin)
    [container] = [c for c in pod_a["spec"]["containers"] if c["name"] == "node"]
    env = {e["name"]: e.get("value", "") for e in container.get("env", [])}
    url = env["KUBEFLOW_TRAINER_SERVER_URL"]
    assert url == (
        f"https://{SERVICE}.{MANAGER_NS}.svc:{status_port}"
        f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/status-a/status"
    )
    [volume] = [v for v in pod_a["spec"]["volumes"] if v["name"] == "kubeflow-trainer-token"]
    token_source, ca_source = volume["projected"]["sources"]
    audience = token_source["serviceAccountToken"]["audience"]
    assert audience == f"trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/status-a/status"
    ca_pem = (await client.get(CONFIGMAP, ca_source["configMap"]["name"], ns))["data"]["ca.crt"]

    # the SDK's update_trainjob_status(), unchanged, with the pod's token: it lands
    token_a = await pod_token(full_cluster, client, pod_a, audience)
    assert await asyncio.to_thread(run_update, sdk_python, env, token_a, ca_pem, tmp_path / "a") == 0
    view = await asyncio.to_thread(sdk_view, sdk_python, full_cluster.kubeconfig, tmp_path, ns, "status-a")
    assert view["name"] == "status-a" and view["runtime"] == "torch-status"
    trainer_status = view["trainerStatus"]
    assert trainer_status["progressPercentage"] == 77
    assert trainer_status["estimatedRemainingSeconds"] == 600
    assert trainer_status["metrics"] == [{"name": "loss", "value": "0.125"}]
    assert trainer_status["lastUpdatedTime"]
    tj = await client.get(TJ, "status-a", ns)
    owners = {(m["manager"], m.get("subresource")) for m in tj["metadata"]["managedFields"]}
    assert ("trainer-status", "status") in owners

    # status-b's pod with its own audience: not valid for status-a (the SDK reports failure)
    token_b = await pod_token(full_cluster, client, pod_b, audience.replace("status-a", "status-b"))
    assert await asyncio.to_thread(run_update, sdk_python, env, token_b, ca_pem, tmp_path / "b") == 3
    # a pod of another namespace, even with status-a's audience: the namespace claim differs
    other_ns = f"{ns}-other"
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other_ns}})
    try:
        await client.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "intruder", "namespace": other_ns},
                "spec": {"serviceAccountName": "default", "containers": [{"name": "c", "image": "busybox"}]},
            }
        )
        intruder = await client.get(POD, "intruder", other_ns)
        token_other = await pod_token(full_cluster, client, intruder, audience)
        assert await asyncio.to_thread(run_update, sdk_python, env, token_other, ca_pem, tmp_path / "c") == 3
    finally:
        await client.delete({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other_ns}})

    # nothing of the refused updates landed
    view = await asyncio.to_thread(sdk_view, sdk_python, full_cluster.kubeconfig, tmp_path, ns, "status-a")
    assert view["trainerStatus"]["progressPercentage"] == 77
    assert view["trainerStatus"]["metrics"] == [{"name": "loss", "value": "0.125"}]
    assert (await asyncio.to_thread(sdk_view, sdk_python, full_cluster.kubeconfig, tmp_path, ns, "status-b"))[
        "trainerStatus"
    ] is None
