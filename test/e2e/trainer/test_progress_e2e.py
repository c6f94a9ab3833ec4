"""TrainJob progress (TrainJobStatus gate, KEP-2779) on the full local cluster.

The manager runs as a subprocess with ``featureGates: {TrainJobStatus: true}``; the gate's CRD
(``config/progress/crd``) replaces the default TrainJob CRD for the test and is put back after.
KWOK runs no code, so the test does what the trainer pod's ``kubeflow`` SDK
``update_trainjob_status()`` (PyPI ``kubeflow`` 0.5.0) would do inside the pod: read the URL, CA
path and token path from the env the manager injected into that pod, and POST
``{"trainerStatus": {...}}`` with ``Authorization: Bearer <token>``. The token is a real one of
the pod's ServiceAccount, issued by TokenRequest bound to the pod with the audience from the
pod's projected volume; the CA is the one in the ConfigMap the manager built for the pod.

The SDK needs ``kubeflow-trainer-api>=2.3`` while the test extra pins 2.1.0, so it is installed
into a virtualenv of its own, and its ``update_trainjob_status()`` runs there, unchanged, with
the injected env pointing at the token and CA files the kubelet would mount. Only the cluster
DNS is emulated: the Service name in the URL resolves to 127.0.0.1, where the manager listens.
The other requests (wrong tokens, garbage bodies) are the SDK's, field for field, sent directly.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
import yaml
from trainer_process import running_manager, shipped_webhooks

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
Json = dict[str, Any]


@pytest.fixture
async def progress_product(
    full_cluster: Environment, full_namespace: str, tmp_path: Path
) -> AsyncIterator[tuple[Client, int]]:
    """The manager with the gate on, the gate's CRD, the webhook Secret with the CA, the torch runtime."""
    await full_cluster.install_crds([ROOT / "config" / "progress" / "crd"])
    ca = TinyCA("trainer-e2e-status-ca")
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
    status_port = free_port()
    config = {"statusServer": {"port": status_port}, "featureGates": {"TrainJobStatus": True}}
    try:
        async with (
            running_manager(
                full_cluster,
                tmp_path,
                config,
                args=["--controllers=jobset,trainer"],
                ca=ca,
                dns=["localhost", f"{SERVICE}.{MANAGER_NS}.svc"],
                ready_timeout=90,
            ) as manager,
            shipped_webhooks(full_cluster, full_namespace, tmp_path, manager),
        ):
            # The shipped torch runtime as a TrainingRuntime of the test namespace whose pods name
            # their ServiceAccount: this local API server runs without the ServiceAccount admission
            # plugin (envtest's default), which in a real cluster sets ``default`` on every pod, and
            # a projected token needs one.
            runtime = yaml.safe_load((ROOT / "config" / "runtimes" / "torch-distributed.yaml").read_text())
            runtime["kind"] = "TrainingRuntime"
            runtime["metadata"] = {"name": "torch-progress", "namespace": full_namespace}
            for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
                rjob["template"]["spec"]["template"]["spec"]["serviceAccountName"] = "default"
            (tmp_path / "runtime.yaml").write_text(yaml.safe_dump(runtime))
            await full_cluster.apply_manifests([tmp_path / "runtime.yaml"], field_manager="e2e")
            rest = await load_kubeconfig(full_cluster.kubeconfig)
            async with Cluster(rest, field_owner="e2e") as cluster:
                yield Client(cluster.transport, cluster.mapper, field_owner="e2e"), status_port
    finally:
        # the default (v2.1) TrainJob CRD back for every other test of the session
        await full_cluster.install_crds(
            [ROOT / "config" / "crd" / "bases" / "trainer.kubeflow.org_trainjobs.yaml"]
        )


async def trainer_pod(client: Client, ns: str, trainjob: str) -> Json:
    async def found() -> Json:
        pods = await client.list(
            POD, namespace=ns, label_selector={"jobset.sigs.k8s.io/jobset-name": trainjob}
        )
        if not pods:
            events = await client.list(GroupVersionKind("", "v1", "Event"), namespace=ns)
            seen = [f"{e['involvedObject']['name']}: {e.get('reason')}: {e.get('message')}" for e in events]
            raise AssertionError(f"no pod of {trainjob} yet; events: {seen[-6:]}")
        return dict(pods[0])

    return await eventually(found, timeout=90)


def injected(pod: Json) -> tuple[dict[str, str], Json]:
    """The env of the trainer container and the projected volume the manager added."""
    spec = pod["spec"]
    [container] = [c for c in spec["containers"] if c["name"] == "node"]
    env = {e["name"]: e.get("value", "") for e in container.get("env", [])}
    [volume] = [v for v in spec.get("volumes", []) if v["name"] == "kubeflow-trainer-token"]
    assert {
        "name": "kubeflow-trainer-token",
        "mountPath": "/var/run/secrets/kubeflow/trainer",
        "readOnly": True,
    } in [{k: m.get(k) for k in ("name", "mountPath", "readOnly")} for m in container["volumeMounts"]]
    return env, volume


async def pod_token(full_cluster: Environment, pod: Json, audience: str) -> str:
    """TokenRequest for the pod's ServiceAccount, bound to the pod, as the kubelet does for the volume."""
    meta = pod["metadata"]
    sa = pod["spec"].get("serviceAccountName") or "default"
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


SDK_VERSION = "0.5.0"

# Runs in the SDK's virtualenv as the trainer pod's code would; cluster DNS is emulated by
# resolving the Service's name to loopback. Exit 0 only when update_trainjob_status() says sent.
SDK_SCRIPT = """
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


def run_sdk(python: Path, env: dict[str, str], token: str, ca_pem: str, mounts: Path) -> int:
    """``update_trainjob_status()`` with the pod's env, the token and CA where the pod mounts them."""
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
    done = subprocess.run([str(python), "-c", SDK_SCRIPT, host], env=pod_env, timeout=60, check=False)
    return done.returncode


async def sdk_post(url: str, ca_pem: str, token: str, payload: bytes | Json) -> tuple[int, Any]:
    """What ``update_trainjob_status()`` sends (requests.post(url, json=..., headers=..., verify=ca)).

    The URL names the in-cluster Service; from the host it is reached on 127.0.0.1 at the same
    port and path, with TLS verified against that Service name and the pod's CA.
    """
    parts = urlsplit(url)
    context = ssl.create_default_context(cadata=ca_pem)
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"https://127.0.0.1:{parts.port}{parts.path}",
            data=data,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            ssl=context,
            server_hostname=parts.hostname,
            timeout=aiohttp.ClientTimeout(total=5),
        ) as resp,
    ):
        text = await resp.text()
        return resp.status, json.loads(text) if text else None


def sdk_body(progress: int, eta: int, metrics: dict[str, float | int | str]) -> Json:
    """``update_trainjob_status(progress_percent, estimated_remaining_seconds, metrics)``'s body."""
    return {
        "trainerStatus": {
            "lastUpdatedTime": datetime.now(UTC).isoformat(),
            "progressPercentage": max(0, min(100, progress)),
            "estimatedRemainingSeconds": max(0, eta),
            "metrics": [{"name": str(k), "value": str(v)} for k, v in metrics.items()],
        }
    }


async def table(full_cluster: Environment, ns: str) -> Json:
    """``kubectl get trainjob``: the server-side Table kubectl prints."""
    connector = aiohttp.TCPConnector(ssl=full_cluster.ssl_context())
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.get(
            f"{full_cluster.url}/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs",
            headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
        ) as resp,
    ):
        assert resp.status == 200
        return dict(await resp.json())


async def test_sdk_update_lands_and_is_authorised_per_trainjob(
    progress_product: tuple[Client, int],
    full_cluster: Environment,
    full_namespace: str,
    sdk_python: Path,
    tmp_path: Path,
) -> None:
    client, status_port = progress_product
    ns = full_namespace
    for name in ("progress-a", "progress-b"):
        await client.create(
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"runtimeRef": {"name": "torch-progress", "kind": "TrainingRuntime"}},
            }
        )
    pod_a = await trainer_pod(client, ns, "progress-a")
    pod_b = await trainer_pod(client, ns, "progress-b")

    env, volume = injected(pod_a)
    url = env["KUBEFLOW_TRAINER_SERVER_URL"]
    assert url == (
        f"https://{SERVICE}.{MANAGER_NS}.svc:{status_port}"
        f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/progress-a/status"
    )
    assert env["KUBEFLOW_TRAINER_SERVER_CA_CERT"] == "/var/run/secrets/kubeflow/trainer/ca.crt"
    assert env["KUBEFLOW_TRAINER_SERVER_TOKEN"] == "/var/run/secrets/kubeflow/trainer/token"
    token_source, ca_source = volume["projected"]["sources"]
    audience = token_source["serviceAccountToken"]["audience"]
    assert audience == f"trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/progress-a/status"
    config_map = await client.get(CONFIGMAP, ca_source["configMap"]["name"], ns)
    ca_pem = config_map["data"]["ca.crt"]
    token_a = await pod_token(full_cluster, pod_a, audience)

    # the update lands in status.trainerStatus with upstream's field names
    code, answer = await sdk_post(url, ca_pem, token_a, sdk_body(42, 1800, {"loss": 0.25, "epoch": 3}))
    assert code == 200, answer
    tj = await client.get(TJ, "progress-a", ns)
    trainer_status = tj["status"]["trainerStatus"]
    assert trainer_status["progressPercentage"] == 42
    assert trainer_status["estimatedRemainingSeconds"] == 1800
    assert trainer_status["metrics"] == [{"name": "loss", "value": "0.25"}, {"name": "epoch", "value": "3"}]
    assert trainer_status["lastUpdatedTime"].endswith("Z")
    owners = {m["manager"] for m in tj["metadata"]["managedFields"] if m.get("subresource") == "status"}
    assert "trainer-status" in owners

    # kubectl get trainjob shows Progress and ETA
    listed = await table(full_cluster, ns)
    columns = [c["name"] for c in listed["columnDefinitions"]]
    assert columns[:2] == ["Name", "State"] and "Progress" in columns and "ETA" in columns
    row = next(r for r in listed["rows"] if r["cells"][0] == "progress-a")
    assert row["cells"][columns.index("Progress")] == 42
    assert row["cells"][columns.index("ETA")] == 1800

    # the SDK itself, unchanged, with the env the manager injected into the pod
    assert await asyncio.to_thread(run_sdk, sdk_python, env, token_a, ca_pem, tmp_path) == 0
    trainer_status = (await client.get(TJ, "progress-a", ns))["status"]["trainerStatus"]
    assert trainer_status["progressPercentage"] == 77
    assert trainer_status["estimatedRemainingSeconds"] == 600
    assert trainer_status["metrics"] == [{"name": "loss", "value": "0.125"}]

    # a pod of another TrainJob, even with a token for this TrainJob's audience: 403
    token_b = await pod_token(full_cluster, pod_b, audience)
    code, answer = await sdk_post(url, ca_pem, token_b, sdk_body(99, 1, {}))
    assert code == 403, answer
    assert answer["reason"] == "Forbidden" and "does not belong to TrainJob" in answer["message"]
    # that pod's own token (its own audience) is not valid for this TrainJob: 401
    own_b = await pod_token(full_cluster, pod_b, audience.replace("progress-a", "progress-b"))
    code, _ = await sdk_post(url, ca_pem, own_b, sdk_body(99, 1, {}))
    assert code == 401
    # no token: 401
    code, _ = await sdk_post(url, ca_pem, "", sdk_body(99, 1, {}))
    assert code == 401

    # garbage bodies: 400 naming the field; nothing changes
    for raw, needle in (
        (b"garbage", "not valid JSON"),
        (
            json.dumps(
                {"trainerStatus": {"progressPercentage": 150, "lastUpdatedTime": "2026-01-01T00:00:00Z"}}
            ).encode(),
            "trainerStatus.progressPercentage",
        ),
        (
            json.dumps(
                {
                    "trainerStatus": {
                        "metrics": [{"name": "loss", "value": 1}],
                        "lastUpdatedTime": "2026-01-01T00:00:00Z",
                    }
                }
            ).encode(),
            "trainerStatus.metrics[0].value",
        ),
    ):
        code, answer = await sdk_post(url, ca_pem, token_a, raw)
        assert code == 400, answer
        assert needle in answer["message"]
    tj = await client.get(TJ, "progress-a", ns)
    assert tj["status"]["trainerStatus"]["progressPercentage"] == 77
    try:
        other = await client.get(TJ, "progress-b", ns)
    except NotFound:
        other = {}
    assert "trainerStatus" not in (other.get("status") or {})
