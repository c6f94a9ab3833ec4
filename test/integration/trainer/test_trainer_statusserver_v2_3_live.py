"""Level v2.3's status server (Trainer v2.3.0's ``pkg/statusserver``, docs/behaviour/trainer.md
§12.12) in ``python -m trainer --api-level=v2.3`` with the TrainJobStatus gate on, against a
kube-apiserver with the v2.3 CRDs, with real ServiceAccount tokens.

The manager runs outside the cluster, so its own ServiceAccount token (whose issuer it reads at
start, as upstream reads ``/var/run/secrets/kubernetes.io/serviceaccount/token``) is a
TokenRequest written to the directory ``KUBERNETES_SERVICE_ACCOUNT_DIR`` names. A reporting
pod's token is what the kubelet would project into it: a TokenRequest with the TrainJob's
audience bound to the pod. The control plane has no kube-controller-manager, so the
ServiceAccounts are created by the test.
"""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from module_env import V2_3_CRDS, api_client, module_control_plane, new_namespace, temporary_namespace
from trainer_process import RunningManager, running_manager

from manager.client import Client, NotFound
from manager.envtest import Environment
from manager.envtest.certs import TinyCA
from manager.envtest.process import free_port
from manager.meta.gvk import CONFIGMAP, POD
from manager.testing import eventually
from trainer.runtime.objects import JOBSET_GVK, TRAINJOB_GVK

ROOT = Path(__file__).resolve().parents[3]
SYSTEM = "kubeflow-system"
SERVICE = "kubeflow-trainer-controller-manager"
Json = dict[str, Any]


@pytest.fixture(scope="module")
def env_v2_3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    with module_control_plane(tmp_path_factory, "level-v2.3-status", V2_3_CRDS) as env:
        yield env


@pytest.fixture
async def api(env_v2_3: Environment) -> AsyncIterator[Client]:
    async with api_client(env_v2_3) as api:
        yield api


@pytest.fixture
async def namespace(api: Client) -> AsyncIterator[str]:
    async with temporary_namespace(api, "v23st") as name:
        yield name


class StatusClient:
    """What a trainer pod does: POST to the URL the manager injected, TLS verified with its CA."""

    def __init__(self, manager: RunningManager, port: int) -> None:
        self.http = manager.http
        self.port = port
        self.ca_pem = manager.ca.cert_pem.decode()
        self.context = ssl.create_default_context(cadata=self.ca_pem)

    async def post(self, ns: str, name: str, token: str, body: bytes | Json) -> tuple[int, Json]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        path = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{name}/status"
        async with self.http.post(
            f"https://127.0.0.1:{self.port}{path}",
            data=data,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            ssl=self.context,
            server_hostname=f"{SERVICE}.{SYSTEM}.svc",
            timeout=aiohttp.ClientTimeout(total=10),
        ) as resp:
            raw = await resp.read()
            assert raw.endswith(b"\n"), raw
            return resp.status, json.loads(raw)


@pytest.fixture
async def status(
    env_v2_3: Environment, api: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[StatusClient]:
    """The v2.3 manager with the gate on; its own token in the service-account directory."""
    with contextlib.suppress(Exception):
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM}})
    ca = TinyCA("trainer-status-v2.3-ca")
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "kubeflow-trainer-webhook-cert", "namespace": SYSTEM},
        "data": {"ca.crt": base64.b64encode(ca.cert_pem).decode()},
    }
    await env_v2_3.apply(f"/api/v1/namespaces/{SYSTEM}/secrets/kubeflow-trainer-webhook-cert", secret)
    sa_dir = tmp_path / "serviceaccount"
    sa_dir.mkdir()
    (sa_dir / "token").write_text(await env_v2_3.service_account_token(SYSTEM, SERVICE))
    (sa_dir / "namespace").write_text(SYSTEM)
    monkeypatch.setenv("KUBERNETES_SERVICE_ACCOUNT_DIR", str(sa_dir))
    port = free_port()
    config = {"statusServer": {"port": port}, "featureGates": {"TrainJobStatus": True}}
    async with running_manager(
        env_v2_3,
        tmp_path,
        config,
        args=["--api-level=v2.3", "--controllers=trainer"],
        ca=ca,
        dns=["localhost", f"{SERVICE}.{SYSTEM}.svc"],
    ) as manager:
        client = StatusClient(manager, port)

        async def listening() -> None:
            code, _ = await client.post("x", "y", "", b"{}")
            assert code == 403

        await eventually(
            listening, retry_on=(aiohttp.ClientError, AssertionError), message="no status server"
        )
        yield client


def runtime(namespace: str) -> Json:
    node = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {
                "template": {"spec": {"containers": [{"name": "node", "image": "busybox"}]}},
            },
        },
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "rt", "namespace": namespace},
        "spec": {"template": {"spec": {"replicatedJobs": [node]}}},
    }


def train_job(namespace: str, name: str) -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"runtimeRef": {"name": "rt", "kind": "TrainingRuntime"}, "suspend": True},
    }


def audience(namespace: str, name: str) -> str:
    return f"trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


async def pod_token(env: Environment, api: Client, namespace: str, pod_name: str, aud: str) -> str:
    """The token the kubelet projects into the pod: TokenRequest with the audience, bound to the pod."""
    with contextlib.suppress(Exception):
        await api.create(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "default", "namespace": namespace},
            }
        )
    try:
        pod = await api.get(POD, pod_name, namespace)
    except NotFound:
        pod = await api.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": pod_name, "namespace": namespace},
                "spec": {
                    "serviceAccountName": "default",
                    "containers": [{"name": "node", "image": "busybox"}],
                },
            }
        )
    code, body = await env.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/default/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [aud],
                "expirationSeconds": 3600,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod_name,
                    "uid": pod["metadata"]["uid"],
                },
            },
        },
    )
    assert code == 201, body
    return str(body["status"]["token"])


def sdk_body(progress: int, eta: int, metrics: dict[str, str]) -> Json:
    """What ``kubeflow`` 0.5.0's ``update_trainjob_status()`` sends."""
    return {
        "trainerStatus": {
            "lastUpdatedTime": "2026-12-03T07:40:00.123456+00:00",
            "progressPercentage": progress,
            "estimatedRemainingSeconds": eta,
            "metrics": [{"name": k, "value": v} for k, v in metrics.items()],
        }
    }


FORBIDDEN = {"metadata": {}, "status": "Failure", "message": "Forbidden", "reason": "Forbidden", "code": 403}


async def test_a_pods_token_updates_its_trainjob_and_others_are_refused(
    env_v2_3: Environment, api: Client, namespace: str, status: StatusClient
) -> None:
    await api.create(runtime(namespace))
    await api.create(train_job(namespace, "job-a"))
    await api.create(train_job(namespace, "job-b"))
    # the TrainJobStatus plugin of v2.3.0: env, projected token volume, the CA ConfigMap
    jobset = await eventually(
        lambda: api.get(JOBSET_GVK, "job-a", namespace), retry_on=(NotFound,), message="no JobSet"
    )
    pod_spec = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod_spec["containers"][0]["env"]}
    assert env == {
        "KUBEFLOW_TRAINER_SERVER_URL": f"https://{SERVICE}.{SYSTEM}.svc:{status.port}"
        f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/job-a/status",
        "KUBEFLOW_TRAINER_SERVER_CA_CERT": "/var/run/secrets/kubeflow/trainer/ca.crt",
        "KUBEFLOW_TRAINER_SERVER_TOKEN": "/var/run/secrets/kubeflow/trainer/token",
    }
    assert pod_spec["volumes"] == [
        {
            "name": "kubeflow-trainer-token",
            "projected": {
                "sources": [
                    {
                        "serviceAccountToken": {
                            "audience": audience(namespace, "job-a"),
                            "expirationSeconds": 3600,
                            "path": "token",
                        }
                    },
                    {
                        "configMap": {
                            "name": "job-a-tls-config",
                            "items": [{"key": "ca.crt", "path": "ca.crt"}],
                        }
                    },
                ],
            },
        }
    ]
    cm = await api.get(CONFIGMAP, "job-a-tls-config", namespace)
    assert cm["data"] == {"ca.crt": status.ca_pem}
    assert cm["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"

    token = await pod_token(env_v2_3, api, namespace, "job-a-node-0-0-abcde", audience(namespace, "job-a"))
    code, answer = await status.post(
        namespace, "job-a", token, sdk_body(42, 1800, {"loss": "0.25", "epoch": "3"})
    )
    assert (code, answer) == (
        200,
        {
            "trainerStatus": {
                "progressPercentage": 42,
                "estimatedRemainingSeconds": 1800,
                "metrics": [{"name": "loss", "value": "0.25"}, {"name": "epoch", "value": "3"}],
                "lastUpdatedTime": "2026-12-03T07:40:00Z",
            }
        },
    )
    tj = await api.get(TRAINJOB_GVK, "job-a", namespace)
    assert tj["status"]["trainerStatus"] == answer["trainerStatus"]
    owners = {(m["manager"], m.get("subresource")) for m in tj["metadata"]["managedFields"]}
    assert ("trainer-status", "status") in owners

    # a second update replaces what trainer-status owned: fewer metrics stay fewer
    code, _ = await status.post(namespace, "job-a", token, sdk_body(77, 600, {"loss": "0.125"}))
    assert code == 200
    tj = await api.get(TRAINJOB_GVK, "job-a", namespace)
    assert tj["status"]["trainerStatus"]["metrics"] == [{"name": "loss", "value": "0.125"}]

    # the token of job-a's pod is not for job-b (audience), nor is job-b's pod token for job-a
    assert await status.post(namespace, "job-b", token, sdk_body(1, 1, {})) == (403, FORBIDDEN)
    token_b = await pod_token(env_v2_3, api, namespace, "job-b-node-0-0-fghij", audience(namespace, "job-b"))
    assert await status.post(namespace, "job-a", token_b, sdk_body(1, 1, {})) == (403, FORBIDDEN)
    # a token of another namespace with job-a's audience: the namespace claim differs
    other = await new_namespace(api, "v23st")
    try:
        token_other = await pod_token(env_v2_3, api, other, "pod", audience(namespace, "job-a"))
        assert await status.post(namespace, "job-a", token_other, sdk_body(1, 1, {})) == (403, FORBIDDEN)
    finally:
        await api.delete({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    # a plain ServiceAccount token (the API server's audience), and none at all
    plain = await env_v2_3.service_account_token(namespace, "default")
    assert await status.post(namespace, "job-a", plain, sdk_body(1, 1, {})) == (403, FORBIDDEN)
    assert await status.post(namespace, "job-a", "", sdk_body(1, 1, {})) == (403, FORBIDDEN)
    tj = await api.get(TRAINJOB_GVK, "job-a", namespace)
    assert tj["status"]["trainerStatus"]["progressPercentage"] == 77
    assert "trainerStatus" not in (await api.get(TRAINJOB_GVK, "job-b", namespace)).get("status", {})


async def test_the_api_servers_refusals_are_answered_as_upstream_does(
    env_v2_3: Environment, api: Client, namespace: str, status: StatusClient
) -> None:
    await api.create(runtime(namespace))
    await api.create(train_job(namespace, "job-c"))
    token = await pod_token(env_v2_3, api, namespace, "job-c-node-0-0-abcde", audience(namespace, "job-c"))
    # the CRD's validation: 422 with the API server's message
    code, answer = await status.post(namespace, "job-c", token, sdk_body(150, 1, {}))
    assert code == 422, answer
    assert answer["reason"] == "Invalid"
    assert answer["message"].startswith('TrainJob.trainer.kubeflow.org "job-c" is invalid: ')
    assert "status.trainerStatus.progressPercentage" in answer["message"]
    # a body Go cannot decode: 422 Invalid payload
    code, answer = await status.post(
        namespace, "job-c", token, b'{"trainerStatus": {"progressPercentage": "5"}}'
    )
    assert (code, answer["message"]) == (422, "Invalid payload")
    # a TrainJob that does not exist (a token for its audience): 404
    missing = await pod_token(env_v2_3, api, namespace, "gone-node-0-0-abcde", audience(namespace, "gone"))
    code, answer = await status.post(namespace, "gone", missing, sdk_body(1, 1, {}))
    assert (code, answer) == (
        404,
        {
            "metadata": {},
            "status": "Failure",
            "message": "Train job not found",
            "reason": "NotFound",
            "code": 404,
        },
    )
    # more than 64 KiB announced: 413 before the token is looked at
    code, answer = await status.post(namespace, "job-c", "", b" " * ((1 << 16) + 1))
    assert (code, answer["reason"]) == (413, "RequestEntityTooLarge")
    assert "trainerStatus" not in (await api.get(TRAINJOB_GVK, "job-c", namespace)).get("status", {})
