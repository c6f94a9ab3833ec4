"""A full local cluster with a real kubelet node (``Environment(real_node=True)``).

One module-scoped environment: KWOK's fake node plus the real node (containerd, runc, the CNI
bridge, kube-proxy in iptables mode). A small HTTP server (``app/``, a static Go binary in a
one-file image written by ``manager.envtest.ociimage``, imported into the node's containerd)
runs as a pod that tolerates the node's taint: UID 65532, read-only root, a Secret volume, a
readiness probe on ``/healthz`` that passes only once the Secret's file is readable. The test
reaches it from the host through a Service ClusterIP (kube-proxy's rules), sees what the pod
sees (its UID, the Secret, a root it cannot write), and checks that a pod without the toleration
lands on the KWOK node. Stopping the environment leaves nothing of the node on the host
(``realnode.leaks``), and neither does a start that fails once the node's containerd is up.

Root only (containerd, iptables, network namespaces). Marker ``realnode``: not in ``make test``
yet; ``make test-realnode`` runs it. Figures are printed (``-s``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from manager.envtest import Environment, StartError, assets, ociimage, realnode
from manager.testing import eventually

pytestmark = pytest.mark.realnode

APP = Path(__file__).with_name("app")
IMAGE = "localhost/envtest-e2e/realnode-app:1"
Json = dict[str, Any]


def _app_image() -> tuple[bytes, float]:
    binary, seconds = assets.ensure_go_source(APP, "realnode-app")
    return ociimage.binary_image(IMAGE, binary), seconds


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    environment = Environment(tmp_path_factory.mktemp("realnode") / "env", full=True, nodes=1, real_node=True)
    started = time.monotonic()
    asyncio.run(environment.start())
    print(f"\nfull environment with a real node started in {time.monotonic() - started:.1f} s")
    try:
        yield environment
    finally:
        if environment.node is not None:
            asyncio.run(environment.stop())


async def _create(env: Environment, path: str, body: Json) -> Json:
    status, created = await env.request("POST", path, body)
    assert status == 201, (path, status, created)
    return dict(created)


def _pod(name: str, *, on_real_node: bool) -> Json:
    container: Json = {
        "name": "app",
        "image": IMAGE,
        "imagePullPolicy": "Never",
        "env": [{"name": "PORT", "value": "8080"}, {"name": "SECRET_FILE", "value": "/etc/app/message"}],
        "ports": [{"containerPort": 8080, "name": "http"}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1},
        "securityContext": {
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "message", "mountPath": "/etc/app", "readOnly": True}],
    }
    spec: Json = {
        "securityContext": {
            "runAsUser": 65532,
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [{"name": "message", "secret": {"secretName": "message"}}],
        "terminationGracePeriodSeconds": 5,
    }
    if on_real_node:
        spec |= {"tolerations": [realnode.TOLERATION], "nodeSelector": realnode.NODE_SELECTOR}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": spec,
    }


async def test_a_pod_on_the_real_node_is_ready_and_reached_through_its_service(env: Environment) -> None:
    ns = f"realnode-{uuid.uuid4().hex[:6]}"
    base = f"/api/v1/namespaces/{ns}"
    started = time.monotonic()
    archive, built = await asyncio.to_thread(_app_image)
    await asyncio.to_thread(env.import_image, archive)
    print(f"app image: built in {built:.1f} s (0: cached), {len(archive) / 1e6:.1f} MB, imported "
          f"in {time.monotonic() - started - built:.1f} s")  # fmt: skip

    await _create(
        env, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )

    async def default_service_account() -> None:  # the ServiceAccount admission plugin wants it
        status, _ = await env.request("GET", f"{base}/serviceaccounts/default")
        assert status == 200

    await eventually(default_service_account, timeout=60, message=f"no ServiceAccount default in {ns}")
    token = uuid.uuid4().hex
    await _create(
        env,
        f"{base}/secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "message"},
            "stringData": {"message": token},
        },
    )
    created = time.monotonic()
    await _create(env, f"{base}/pods", _pod("app", on_real_node=True))
    service = await _create(
        env,
        f"{base}/services",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "app"},
            "spec": {"selector": {"app": "app"}, "ports": [{"port": 80, "targetPort": "http"}]},
        },
    )
    cluster_ip = service["spec"]["clusterIP"]

    seen: Json = {}

    async def ready() -> None:
        status, pod = await env.request("GET", f"{base}/pods/app")
        assert status == 200, pod
        conditions = {c["type"]: c["status"] for c in pod["status"].get("conditions", [])}
        assert conditions.get("Ready") == "True", (pod["status"].get("phase"), pod["status"])
        seen["pod"] = pod

    await eventually(ready, timeout=120, message="the pod on the real node never became Ready")
    pod = seen["pod"]
    print(f"pod created to Ready (readiness probe passed): {time.monotonic() - created:.1f} s")
    assert pod["spec"]["nodeName"] == "envtest-real-node"
    (status,) = pod["status"]["containerStatuses"]
    assert status["ready"] and status["restartCount"] == 0 and "running" in status["state"], status

    async def through_service() -> None:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http,
            http.get(f"http://{cluster_ip}/") as response,
        ):
            assert response.status == 200, await response.text()
            seen["body"] = await response.text()

    await eventually(
        through_service, timeout=60, retry_on=(AssertionError, aiohttp.ClientError, asyncio.TimeoutError),
        message=f"the Service's ClusterIP {cluster_ip} never reached the pod",
    )  # fmt: skip
    body = str(seen["body"])
    answer = dict(line.split("=", 1) for line in body.splitlines())
    assert answer["uid"] == "65532", body
    assert answer["secret"] == token, body
    assert answer["hostname"] == "app", body
    assert answer["root-writable"].startswith("no:") and "read-only file system" in answer["root-writable"], (
        body
    )

    # Without the toleration a pod goes to the KWOK node, never to the real one.
    await _create(env, f"{base}/pods", _pod("elsewhere", on_real_node=False))

    async def scheduled_elsewhere() -> None:
        status, other = await env.request("GET", f"{base}/pods/elsewhere")
        assert status == 200 and other["spec"].get("nodeName") == "kwok-node-0", other.get("spec", {}).get(
            "nodeName"
        )

    await eventually(
        scheduled_elsewhere, timeout=60, message="the untolerating pod was not put on the KWOK node"
    )


async def test_stopping_leaves_nothing_of_the_node_on_the_host(env: Environment) -> None:
    assert env.node is not None
    state = env.node.state
    assert realnode.leaks(state), "a running node shows on the host (else this check proves nothing)"
    started = time.monotonic()
    await env.stop()
    print(f"stop (pods' tasks, containerd, network, control plane): {time.monotonic() - started:.1f} s")
    assert realnode.leaks(state) == []
    assert not await asyncio.to_thread(Path(state.dir).exists)


async def test_a_failed_start_leaves_nothing_either(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kubelet refuses its configuration after containerd is up with the pause image."""
    states: list[realnode.NodeState] = []
    real_cleanup = realnode.cleanup

    def recording(state: realnode.NodeState, **kw: Any) -> list[str]:
        states.append(state)
        return real_cleanup(state, **kw)

    monkeypatch.setattr(realnode, "cleanup", recording)
    real_config = realnode.kubelet_config
    monkeypatch.setattr(
        realnode, "kubelet_config", lambda *a, **kw: real_config(*a, **kw) | {"kind": "NoSuchConfiguration"}
    )
    environment = Environment(
        tmp_path_factory.mktemp("realnode-fail") / "env", full=True, nodes=1, real_node=True
    )
    with pytest.raises(StartError, match="kubelet"):
        await environment.start()
    (state,) = states
    assert state.processes and any(p["name"] == "containerd" for p in state.processes)
    assert realnode.leaks(state) == []
    await environment.stop()


async def test_up_real_node_then_a_hard_kill_then_down_from_the_shell_leave_nothing(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """``python -m manager.envtest up --real-node`` (detached), a pod running there, containerd,
    the kubelet and kube-proxy SIGKILLed, then ``down``."""
    directory = tmp_path_factory.mktemp("realnode-cli") / "c"
    up = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "manager.envtest", "up", "--dir", str(directory), "--real-node", "--nodes", "1",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(up.communicate(), 300)
    try:
        assert up.returncode == 0, err.decode()[-3000:]
        assert f"export KUBECONFIG={directory / 'kubeconfig'}" in out.decode()
        state = realnode.load_state(directory / "real-node")
        assert state is not None
        env = Environment.attach(directory)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "pause"},
            "spec": {
                "tolerations": [realnode.TOLERATION],
                "nodeSelector": realnode.NODE_SELECTOR,
                "automountServiceAccountToken": False,
                "containers": [{"name": "pause", "image": state.pause_image, "imagePullPolicy": "Never"}],
            },
        }

        async def created() -> None:  # once the namespace's default ServiceAccount exists
            status, body = await env.request("POST", "/api/v1/namespaces/default/pods", pod)
            assert status in (201, 409), body

        await eventually(created, timeout=60, message="the pod was never created")

        async def running() -> None:
            status, body = await env.request("GET", "/api/v1/namespaces/default/pods/pause")
            assert status == 200 and body["status"].get("phase") == "Running", body.get("status")

        await eventually(running, timeout=120, message="the pod never ran on the real node")
        # A hard kill of the node's daemons (as when the process that started them dies): the
        # pod's shim and processes outlive containerd, and down must still remove them.
        shims = realnode.pids_with(state.socket)
        assert shims, "no shim of the node's containerd runs the pod"
        for proc in state.processes:
            os.kill(int(proc["pid"]), signal.SIGKILL)
    finally:
        down = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "manager.envtest", "down", "--dir", str(directory),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, down_err = await asyncio.wait_for(down.communicate(), 180)
    assert down.returncode == 0, down_err.decode()
    assert realnode.leaks(state) == []
    assert not await asyncio.to_thread(directory.exists)
