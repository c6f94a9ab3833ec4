"""The project's image deployed with ``make deploy`` on a local cluster with a real node.

The image is built by ``make docker-build`` (podman here, as ``make container-tools`` sets it
up), saved with ``podman save`` and imported into the real node's containerd (no registry is
reachable). ``make deploy IMG=... DEPLOY_PATCH=deploy-patch.yaml`` applies ``config/overlays/v2.1`` (``LEVEL=v2.1``)
with one change, a toleration of the node's taint and a nodeSelector for it, waits for the
rollout and applies the shipped runtimes (their validating webhook needs the running manager).

What that proves: the Deployment's Pod runs on the real node as shipped (UID 65532, read-only
root, the projected ServiceAccount token: it reaches the API server through the ``kubernetes``
Service, kube-proxy's rules), turns Ready by its probe once the kubelet mounted the certificate
Secret it wrote, and every webhook is called by the API server through the webhook Service's
ClusterIP, the only way to the Pod: the runtimes are admitted, a TrainJob naming no runtime is
refused by the webhook, a TrainJob on ``torch-distributed`` runs to Complete on the KWOK nodes
(its pods do not tolerate the taint). The manager's log (read through the kubelet) has no
``forbidden`` and no traceback. ``make undeploy`` removes it; stopping leaves nothing on the host.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from manager.envtest import Environment, realnode
from manager.testing import eventually

pytestmark = pytest.mark.realnode

ROOT = Path(__file__).resolve().parents[3]
PATCH = Path(__file__).with_name("deploy-patch.yaml")
TAG = "localhost/trainer-controller-manager-py:realnode-e2e"
NS = "kubeflow-system"
NAME = "kubeflow-trainer-controller-manager"
Json = dict[str, Any]


def _run(argv: list[str], *, timeout: float = 1800, **kw: Any) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout, **kw)
    assert proc.returncode == 0, f"{' '.join(argv)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _no_docker() -> dict[str, str]:
    return {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``make docker-build`` with podman, then ``podman save`` (a docker-archive for ``ctr``)."""
    started = time.monotonic()
    out = _run(["make", "-s", "container-tools"], cwd=ROOT, env=_no_docker())
    exported = dict(
        line.removeprefix("export ").split("=", 1) for line in out.splitlines() if line.startswith("export ")
    )
    env = {**_no_docker(), **exported}
    _run(["make", "docker-build", f"IMG={TAG}"], cwd=ROOT, env=env)
    built = time.monotonic()
    archive = tmp_path_factory.mktemp("image") / "image.tar"
    _run(["podman", "save", "--format", "docker-archive", "-o", str(archive), TAG], env=env)
    print(f"\nmake docker-build {built - started:.1f} s, podman save {time.monotonic() - built:.1f} s "
          f"({archive.stat().st_size / 1e6:.0f} MB)")  # fmt: skip
    return archive


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    environment = Environment(
        tmp_path_factory.mktemp("deploy-realnode") / "env", full=True, nodes=2, real_node=True
    )
    asyncio.run(environment.start())
    try:
        yield environment
    finally:
        if environment.node is not None:
            asyncio.run(environment.stop())


def _make(env: Environment, *args: str) -> str:
    return _run(["make", *args], cwd=ROOT, env={**os.environ, "KUBECONFIG": str(env.kubeconfig)}, timeout=300)


async def _get(env: Environment, path: str) -> Json:
    status, body = await env.request("GET", path)
    assert status == 200, (path, status, body)
    return dict(body)


async def test_make_deploy_runs_the_manager_on_the_real_node_and_a_trainjob_completes(
    env: Environment, image: Path
) -> None:
    started = time.monotonic()
    await asyncio.to_thread(env.import_image, image)
    print(f"ctr images import: {time.monotonic() - started:.1f} s")

    started = time.monotonic()
    await asyncio.to_thread(
        # level v2.1, where the figures of docs/realnode.md were taken
        _make,
        env,
        "deploy",
        "LEVEL=v2.1",
        f"IMG={TAG}",
        f"DEPLOY_PATCH={PATCH}",
        "DEPLOY_TIMEOUT=240s",
    )
    print(
        f"make deploy (apply, rollout on the real node, runtimes through the webhook): {time.monotonic() - started:.1f} s"
    )

    pods = await _get(
        env, f"/api/v1/namespaces/{NS}/pods?labelSelector=app.kubernetes.io%2Fcomponent%3Dmanager"
    )
    (pod,) = [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]
    assert pod["spec"]["nodeName"] == "envtest-real-node", pod["spec"].get("nodeName")
    (status,) = pod["status"]["containerStatuses"]
    assert status["ready"] and status["restartCount"] == 0, status
    assert status["image"].endswith(TAG.split("/", 1)[1]), status["image"]
    assert any(v.get("projected") for v in pod["spec"]["volumes"]), "no ServiceAccount token volume"

    # The webhooks name the Service (no URL), and the Service is a plain ClusterIP.
    service = await _get(env, f"/api/v1/namespaces/{NS}/services/{NAME}")
    assert service["spec"]["type"] == "ClusterIP" and service["spec"]["clusterIP"], service["spec"]
    hooks = await _get(
        env,
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/validator.trainer.kubeflow.org",
    )
    assert all("service" in h["clientConfig"] and "url" not in h["clientConfig"] for h in hooks["webhooks"])

    ns = f"team-{uuid.uuid4().hex[:6]}"
    status_code, body = await env.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    assert status_code == 201, body

    def trainjob(name: str, runtime: str) -> Json:
        return {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "runtimeRef": {"name": runtime},
                "trainer": {"numNodes": 2, "command": ["torchrun", "train.py"]},
            },
        }

    base = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs"
    status_code, body = await env.request("POST", base, trainjob("nothing", "no-such-runtime"))
    assert status_code >= 400 and 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied' in str(
        body.get("message")
    ), body

    created = time.monotonic()
    status_code, body = await env.request("POST", base, trainjob("mnist", "torch-distributed"))
    assert status_code == 201, body

    async def complete() -> None:
        job = await _get(env, f"{base}/mnist")
        conditions = {c["type"]: c["status"] for c in job.get("status", {}).get("conditions", [])}
        assert conditions.get("Complete") == "True", job.get("status")

    await eventually(complete, timeout=180, message="the TrainJob never completed")
    print(f"TrainJob created to Complete: {time.monotonic() - created:.1f} s")
    trainer_pods = await _get(env, f"/api/v1/namespaces/{ns}/pods")
    nodes = {p["spec"].get("nodeName") for p in trainer_pods["items"]}
    assert nodes and all(str(n).startswith("kwok-node-") for n in nodes), nodes

    status_code, log = await env.request(
        "GET", f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}/log", accept="*/*"
    )
    assert status_code == 200, log
    assert "forbidden" not in str(log).lower() and "Traceback" not in str(log), str(log)[-3000:]

    # The TrainJob goes first here; `make undeploy` with TrainJobs still naming a runtime is
    # test_helm_rollout_undeploy_on_real_node.py::test_make_undeploy_returns_while_trainjobs_use_a_runtime.
    status_code, body = await env.request("DELETE", f"/api/v1/namespaces/{ns}")
    assert status_code in (200, 202), body

    async def namespace_gone() -> None:
        status_code, _ = await env.request("GET", f"/api/v1/namespaces/{ns}")
        assert status_code == 404

    await eventually(namespace_gone, timeout=120, message=f"namespace {ns} was never deleted")
    await asyncio.to_thread(_make, env, "undeploy", "LEVEL=v2.1")

    async def gone() -> None:
        status_code, _ = await env.request("GET", f"/apis/apps/v1/namespaces/{NS}/deployments/{NAME}")
        assert status_code == 404

    await eventually(gone, timeout=120, message="make undeploy left the Deployment")

    assert env.node is not None
    state = env.node.state
    await env.stop()
    assert realnode.leaks(state) == []
