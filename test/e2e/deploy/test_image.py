"""The real image, run as the Deployment's Pod runs it, against a local control plane.

The image is built by ``make docker-build`` from a clean copy of the repository (the files
``git ls-files`` lists, tracked and new, nothing ignored: a module or data file the wheel lacks
fails here), on these machines with podman as ``make container-tools`` sets it up (installed from
Debian's packages when missing; ``DOCKER_HOST`` points nowhere so a Docker daemon is never
picked): ``test/image_build.py``, one build per session, shared with the real-node suite. The
build runs while the control plane starts.

``config/default`` (the default level, v2.3) is applied server-side to a control plane of the
test's own (its webhook configurations are cluster-wide). The container then gets what the kubelet would give the Pod:
the Deployment's command, args and env (``POD_NAMESPACE`` resolved), ``--read-only`` with a
``/tmp`` tmpfs (the emptyDir), UID 65532, all capabilities dropped, no new privileges, the
in-cluster env (``KUBERNETES_SERVICE_HOST``/``PORT``: the API server on loopback, hence
``--network host``), a TokenRequest token of the shipped ServiceAccount with the cluster CA at
``/var/run/secrets/kubernetes.io/serviceaccount`` (only the shipped RBAC applies), the shipped
Configuration at ``/controller_manager_config.yaml`` with its ports moved to free ones, and the
Secret volume at ``/tmp/k8s-webhook-server/serving-certs`` (the test plays the kubelet and
copies the Secret's data there whenever the rotator writes it).

With no kube-proxy, the webhooks reach the container as in ``test_in_cluster.py``: the Service
becomes ``ExternalName: localhost``; and since UID 65532 cannot bind the Service port 443 on the
host network, the four webhook configurations call the container's webhook port instead (the
only other change). Then: ``/readyz`` answers 200, the manager holds the leader-election Lease,
the API server calls every configuration (the TrainJob defaulter stamps a runtime patch's time),
a TrainJob on a shipped runtime of Trainer v2.3.0 gets its JobSet (through the JobSet webhooks),
no request was forbidden, and ``podman stop`` (SIGTERM, then SIGKILL after the grace period) ends it with exit
code 0 well within the 30 s grace period.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import aiohttp
import pytest
import yaml
from deploy_e2e import (
    ROOT,
    kubectl,
    wait_until_ready,
    wait_webhooks_answer,
    webhook_configurations,
    write_service_account_volume,
)
from image_build import TAG, ImageBuild, Podman
from test_in_cluster import (
    CONFIGMAP_GVK,
    DEPLOYMENT_GVK,
    JOBSET_GVK,
    NAME,
    NS,
    SERVICE_GVK,
    _kubelet,
    _pod_env,
    _trainjob,
    service_to_localhost,
)

from manager.client import Client
from manager.client.patch import Patch
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.envtest.process import free_port
from manager.scheme import GroupVersionKind
from manager.testing import eventually
from trainer import levels

LEASE_GVK = GroupVersionKind("coordination.k8s.io", "v1", "Lease")
GRACE_SECONDS = 30  # the Pod's terminationGracePeriodSeconds (Kubernetes' default)
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
CERT_MOUNT = "/tmp/k8s-webhook-server/serving-certs"
Json = dict[str, Any]


def _run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    assert proc.returncode == 0, f"{' '.join(argv)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def cluster(controller_image: ImageBuild, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    """etcd and kube-apiserver of the test's own (no Pods are needed: the container is the Pod),
    started while the image builds."""
    env = Environment(tmp_path_factory.mktemp("image-cluster") / "env")
    asyncio.run(env.start())
    try:
        yield env
    finally:
        if not os.environ.get("KEEP_CONTROL_PLANE"):
            asyncio.run(env.stop())


def _kubectl(env: Environment, *args: str) -> str:
    return _run([str(kubectl()), f"--kubeconfig={env.kubeconfig}", *args]).stdout


def _shared_dir(path: Path) -> Path:
    """A directory UID 65532 can read once mounted (pytest makes its directories 0700)."""
    path.mkdir(parents=True)
    path.chmod(0o755)
    return path


async def _webhooks_to(
    client: Client, configurations: tuple[tuple[GroupVersionKind, str], ...], port: int
) -> None:
    """Every webhook of the configurations calls ``port`` of the Service (ExternalName
    localhost: the container's webhook server on the host network); the rest is as shipped."""
    for gvk, name in configurations:
        configuration = await client.get(gvk, name)
        webhooks = [
            {
                **h,
                "clientConfig": {
                    **h["clientConfig"],
                    "service": {**h["clientConfig"]["service"], "port": port},
                },
            }
            for h in configuration["webhooks"]
        ]
        await client.patch(configuration, Patch.merge({"webhooks": webhooks}))  # a list is replaced whole


@dataclass
class Container:
    name: str
    proc: asyncio.subprocess.Process
    log: Path
    started: float


async def _start_container(
    podman: Podman, tag: str, env: Environment, client: Client, work: Path, webhook_port: int
) -> tuple[Container, str]:
    deployment = await client.get(DEPLOYMENT_GVK, NAME, NS)
    pod = deployment["spec"]["template"]["spec"]
    (spec,) = pod["containers"]
    mounts = {m["name"]: m for m in spec["volumeMounts"]}
    assert mounts["tmp"]["mountPath"] == "/tmp" and mounts["cert"]["mountPath"] == CERT_MOUNT
    assert mounts["config"]["mountPath"] == "/controller_manager_config.yaml"
    security = spec["securityContext"]
    assert security["readOnlyRootFilesystem"] and security["capabilities"]["drop"] == ["ALL"]
    assert not security["allowPrivilegeEscalation"]

    # The projected ServiceAccount volume: a TokenRequest token, the cluster CA, the namespace.
    sa_dir = _shared_dir(work / "serviceaccount")
    await write_service_account_volume(env, client, pod, NS, sa_dir)

    # The shipped Configuration (the ConfigMap volume's subPath), its ports moved to free ones.
    shipped = await client.get(CONFIGMAP_GVK, "kubeflow-trainer-config", NS)
    cfg = yaml.safe_load(shipped["data"]["controller_manager_config.yaml"])
    health, metrics = free_port(), free_port()
    assert cfg["health"]["healthProbeBindAddress"] == ":8081" and cfg["metrics"]["bindAddress"] == ":8443"
    cfg["webhook"]["port"] = webhook_port
    cfg["health"]["healthProbeBindAddress"] = f":{health}"
    cfg["metrics"]["bindAddress"] = f":{metrics}"
    config_path = work / "controller_manager_config.yaml"
    config_path.write_text(yaml.safe_dump(cfg))
    config_path.chmod(0o644)

    api = urlparse(env.url)
    environment = {
        **_pod_env(spec),
        "KUBERNETES_SERVICE_HOST": str(api.hostname),
        "KUBERNETES_SERVICE_PORT": str(api.port),
    }
    name = f"trainer-image-e2e-{uuid.uuid4().hex[:8]}"
    argv = [
        "podman",
        "run",
        "--rm",
        f"--name={name}",
        f"--hostname={NAME}-{uuid.uuid4().hex[:5]}",  # a Pod's hostname is its name
        "--network=host",
        "--read-only",
        "--read-only-tmpfs=false",
        "--tmpfs=/tmp:rw,size=256m",
        "--user=65532",
        "--cap-drop=all",
        "--security-opt=no-new-privileges",
        f"--volume={sa_dir}:{SA_MOUNT}:ro",
        f"--volume={config_path}:/controller_manager_config.yaml:ro",
        f"--volume={work / 'serving-certs'}:{CERT_MOUNT}:ro",
        f"--entrypoint={json.dumps(spec['command'])}",
        *(f"--env={key}={value}" for key, value in environment.items()),
        tag,
        *spec.get("args", []),
    ]
    log = work / "container.log"
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=out, stderr=asyncio.subprocess.STDOUT, env=podman.env
        )
    return Container(name, proc, log, time.monotonic()), f"http://127.0.0.1:{health}"


async def test_the_image_runs_as_the_pod_ready_leading_and_reconciling_then_stops_cleanly(
    podman: Podman, controller_image: ImageBuild, cluster: Environment, tmp_path: Path
) -> None:
    default = ROOT / "config" / "default"
    _kubectl(cluster, "apply", "--server-side", "-k", str(default))
    rendered = [d for d in yaml.safe_load_all(_kubectl(cluster, "kustomize", str(default))) if d]
    configurations = webhook_configurations(rendered)
    assert len(configurations) == 4, configurations  # v2.3: Trainer's, JobSet's two, the TrainJob defaulter's
    work = tmp_path / "pod"
    work.mkdir()
    cert_dir = _shared_dir(work / "serving-certs")
    webhook_port = free_port()
    async with Cluster(await load_kubeconfig(cluster.kubeconfig), field_owner="e2e") as admin:
        client = Client(admin.transport, admin.mapper, field_owner="e2e")
        await service_to_localhost(client, await client.get(SERVICE_GVK, NAME, NS))
        await _webhooks_to(client, configurations, webhook_port)

        tag = await asyncio.to_thread(controller_image.wait)
        size = podman("image", "inspect", "--format", "{{.Size}}", tag).stdout.strip()
        print(f"image {TAG} ({tag[:12]}): {int(size) / 1e6:.0f} MB")

        container, probe = await _start_container(podman, tag, cluster, client, work, webhook_port)
        kubelet = asyncio.create_task(_kubelet(client, cert_dir))
        try:
            async with aiohttp.ClientSession() as http:
                await wait_until_ready(http, probe, container.log, proc=container.proc, traceback_free=True)
            print(f"container started to /readyz 200: {time.monotonic() - container.started:.1f} s")

            async def leading() -> None:
                lease = await client.get(LEASE_GVK, "trainer.kubeflow.org", NS)
                holder = lease["spec"].get("holderIdentity") or ""
                assert holder.startswith(f"{NAME}-"), lease["spec"]

            await eventually(leading, timeout=60, message="the container never acquired the Lease")

            await wait_webhooks_answer(cluster, NS)
            # the default level's shipped runtimes (Trainer v2.3.0's), as `make deploy` applies
            # them; then the TrainJob defaulter, whose probe names one of them
            _kubectl(cluster, "apply", "--server-side", "-k", str(ROOT / "config" / levels.DEFAULT.runtimes))
            await wait_webhooks_answer(cluster, NS, configurations)
            _kubectl(cluster, "create", "namespace", "team-a")
            await client.create(_trainjob("mnist", "torch-distributed"))

            async def jobset() -> None:
                found = await client.get(JOBSET_GVK, "mnist", "team-a")
                owners = {(o["kind"], o["name"]) for o in found["metadata"].get("ownerReferences") or []}
                assert ("TrainJob", "mnist") in owners, found["metadata"]

            await eventually(
                jobset, timeout=120, message="the TrainJob never got its JobSet", retry_on=(Exception,)
            )
            output = container.log.read_text()
            assert "forbidden" not in output.lower(), [
                line for line in output.splitlines() if "orbidden" in line
            ][:5]
            assert "Traceback" not in output, output[-3000:]

            stopping = time.monotonic()
            stop = await asyncio.create_subprocess_exec(
                "podman", "stop", f"--time={GRACE_SECONDS}", container.name, env=podman.env,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            _, err = await asyncio.wait_for(stop.communicate(), GRACE_SECONDS + 60)
            assert stop.returncode == 0, err.decode()
            code = await asyncio.wait_for(container.proc.wait(), 60)
            took = time.monotonic() - stopping
            print(f"podman stop: exit {code} after {took:.1f} s")
            assert code == 0, container.log.read_text()[-4000:]
            assert took < GRACE_SECONDS, f"SIGTERM took {took:.1f} s (grace period {GRACE_SECONDS} s)"
        finally:
            kubelet.cancel()
            await asyncio.gather(kubelet, return_exceptions=True)
            if container.proc.returncode is None:
                podman("rm", "--force", container.name, check=False)
                await container.proc.wait()
