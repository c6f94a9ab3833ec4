"""In-cluster mode on the full local cluster, with no container runtime.

``config/default`` (the default level, v2.3) is applied server-side as a user does. The Deployment's Pod cannot run the
manager on KWOK nodes, so the test starts the installed manager exactly as that Pod would: the
Deployment's command and arguments, from the wheel installed into a clean virtual environment
outside the repository, with in-cluster config (``KUBERNETES_SERVICE_HOST``/``PORT``, a token
from a TokenRequest for the shipped ServiceAccount and the cluster CA in a service-account
directory, ``KUBERNETES_SERVICE_ACCOUNT_DIR`` pointing there), ``POD_NAMESPACE``, the shipped
Configuration and certificate management on. The test plays the kubelet for the Secret volume:
it copies the Secret's data into the webhook certificate directory whenever it changes.

The API server calls every webhook through the shipped Service. A ClusterIP would lead nowhere
here, so the test changes only the Service, into ``type: ExternalName, externalName:
localhost`` (ports kept): the API server then calls ``localhost:443`` and verifies TLS against
``kubeflow-trainer-controller-manager.kubeflow-system.svc``, the name of the certificate the
rotator generates. The Configuration is the shipped one except for its ports: the webhook server
listens on 443, the Service port (the Pod's 9443 sits behind the Service's targetPort, which an
ExternalName Service does not translate); probes and metrics move to free ports so the test can
run beside other managers. Port 443 needs root (or CAP_NET_BIND_SERVICE): this test must run as
root. RBAC is the shipped roles only: a missing permission leaves the TrainJob incomplete or
shows up as a ``forbidden`` in the log, and fails the test.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import aiohttp
import pytest
import yaml
from deploy_e2e import (
    ROOT,
    Installed,
    kubectl,
    own_cluster,
    wait_until_ready,
    wait_webhooks_answer,
    webhook_configurations,
    write_service_account_volume,
)

from manager.client import Client, NotFound
from manager.client.errors import ApiError
from manager.client.patch import Patch
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.envtest.process import free_port
from manager.scheme import GroupVersionKind
from manager.testing import eventually
from trainer import levels

NS = "kubeflow-system"
NAME = "kubeflow-trainer-controller-manager"
SECRET = "kubeflow-trainer-webhook-cert"
SERVICE_GVK = GroupVersionKind("", "v1", "Service")
SECRET_GVK = GroupVersionKind("", "v1", "Secret")
CONFIGMAP_GVK = GroupVersionKind("", "v1", "ConfigMap")
DEPLOYMENT_GVK = GroupVersionKind("apps", "v1", "Deployment")
TRAINJOB_GVK = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainJob")
JOBSET_GVK = GroupVersionKind("jobset.x-k8s.io", "v1alpha2", "JobSet")
Json = dict[str, Any]


async def service_to_localhost(client: Client, service: Json) -> None:
    """The Service as an ExternalName for localhost, where the test runs the manager (its ports kept)."""
    await client.patch(
        service,
        Patch.merge(
            {
                "spec": {
                    "type": "ExternalName",
                    "externalName": "localhost",
                    "clusterIP": None,
                    "clusterIPs": None,
                    "ipFamilies": None,
                    "ipFamilyPolicy": None,
                    "internalTrafficPolicy": None,
                }
            }
        ),
    )


def _trainjob(name: str, runtime: str) -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "runtimeRef": {"name": runtime},
            "trainer": {"numNodes": 2, "command": ["torchrun", "train.py"]},
        },
    }


def _jobset(name: str) -> Json:
    pod = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": pod}}}]},
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    yield from own_cluster(tmp_path_factory.mktemp("in-cluster") / "env")


def _kubectl(env: Environment, *args: str) -> str:
    proc = subprocess.run(
        [str(kubectl()), f"--kubeconfig={env.kubeconfig}", *args], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, f"kubectl {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _port_443_free() -> None:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", 443))
        except PermissionError as err:
            raise AssertionError("this test binds port 443 (the Service port): run it as root") from err
        except OSError as err:
            raise AssertionError(f"port 443 is taken on this machine: {err}") from err


async def _kubelet(client: Client, cert_dir: Path) -> None:
    """The Secret volume: the Secret's keys as files, rewritten whenever the data changes."""
    seen: Json = {}
    while True:
        with contextlib.suppress(NotFound):
            data = (await client.get(SECRET_GVK, SECRET, NS)).get("data") or {}
            if data and data != seen:
                for key, value in data.items():
                    staged = cert_dir / f".{key}.tmp"
                    staged.write_bytes(base64.b64decode(value))
                    staged.replace(cert_dir / key)
                seen = data
        await asyncio.sleep(0.2)


async def _gone(client: Client, gvk: GroupVersionKind, name: str, namespace: str = "") -> bool:
    try:
        await client.get(gvk, name, namespace)
    except NotFound:
        return True
    return False


def _key(doc: Json) -> str:
    return f"{doc['kind']}/{doc['metadata'].get('namespace', '')}/{doc['metadata']['name']}"


def _pod_env(container: Json) -> dict[str, str]:
    """The container's env as the kubelet resolves it (fieldRef metadata.namespace only)."""
    env = {}
    for var in container.get("env") or []:
        if "value" in var:
            env[var["name"]] = var["value"]
        elif var.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
            env[var["name"]] = NS
        else:
            raise AssertionError(f"the test cannot resolve env {var}")
    return env


@contextlib.asynccontextmanager
async def manager_as_the_pod_runs_it(
    env: Environment, client: Client, installed: Installed, work: Path
) -> AsyncIterator[tuple[str, Path]]:
    """Start the installed manager with the Pod's command, env, Configuration and credentials."""
    deployment = await client.get(DEPLOYMENT_GVK, NAME, NS)
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]

    # The ServiceAccount's token (TokenRequest, as the kubelet's projected volume) and the CA.
    sa_dir = work / "serviceaccount"
    sa_dir.mkdir()
    await write_service_account_volume(env, client, pod, NS, sa_dir)

    # The shipped Configuration, its ports moved as the module docstring explains.
    shipped = await client.get(CONFIGMAP_GVK, "kubeflow-trainer-config", NS)
    cfg = yaml.safe_load(shipped["data"]["controller_manager_config.yaml"])
    health, metrics = free_port(), free_port()
    cfg["webhook"]["port"] = 443
    cfg["health"]["healthProbeBindAddress"] = f"127.0.0.1:{health}"
    cfg["metrics"]["bindAddress"] = f"127.0.0.1:{metrics}"
    config_path = work / "controller_manager_config.yaml"
    config_path.write_text(yaml.safe_dump(cfg))
    cert_dir = work / "serving-certs"
    cert_dir.mkdir()

    args = [
        f"--config={config_path}" if a.startswith("--config=") else a for a in container.get("args") or []
    ]
    api = urlparse(env.url)
    environment = installed.clean_env(
        **_pod_env(container),
        KUBERNETES_SERVICE_HOST=str(api.hostname),
        KUBERNETES_SERVICE_PORT=str(api.port),
        KUBERNETES_SERVICE_ACCOUNT_DIR=str(sa_dir),
    )
    command = [str(installed.bin / container["command"][0]), *container["command"][1:]]
    log_path = work / "manager.log"
    with log_path.open("wb") as log_file:
        proc = await asyncio.create_subprocess_exec(
            *command,
            *args,
            f"--webhook-cert-dir={cert_dir}",
            cwd=work,
            env=environment,
            stdout=log_file,
            stderr=asyncio.subprocess.STDOUT,
        )
    kubelet = asyncio.create_task(_kubelet(client, cert_dir))
    state = {"undeployed": False}
    try:
        yield f"http://127.0.0.1:{health}", log_path, state
    finally:
        kubelet.cancel()
        await asyncio.gather(kubelet, return_exceptions=True)
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 60)
        # Undeployed under its feet, the manager loses its lease with its namespace: exit 1, as
        # upstream's; otherwise SIGTERM stops it cleanly.
        assert code in ((0, 1) if state["undeployed"] else (0,)), log_path.read_text()[-4000:]


async def test_config_default_runs_a_trainjob_through_the_service_with_rotated_certificates(
    cluster: Environment, installed_wheel: Installed, tmp_path: Path
) -> None:
    _port_443_free()
    _kubectl(cluster, "apply", "--server-side", "-k", str(ROOT / "config" / "default"))
    async with Cluster(await load_kubeconfig(cluster.kubeconfig), field_owner="e2e") as admin:
        client = Client(admin.transport, admin.mapper, field_owner="e2e")
        # Everything config/default renders now exists (the Deployment's Pod aside, which KWOK
        # only pretends to run).
        rendered = [
            d
            for d in yaml.load_all(
                _kubectl(cluster, "kustomize", str(ROOT / "config" / "default")), Loader=yaml.CSafeLoader
            )
            if d
        ]
        for doc in rendered:
            group, _, version = doc["apiVersion"].rpartition("/")
            meta = doc["metadata"]
            await client.get(
                GroupVersionKind(group, version, doc["kind"]), meta["name"], meta.get("namespace", "")
            )
        # The only change to the shipped objects: the Service resolves to loopback.
        service = await client.get(SERVICE_GVK, NAME, NS)
        ports = service["spec"]["ports"]
        await service_to_localhost(client, service)
        service = await client.get(SERVICE_GVK, NAME, NS)
        assert (service["spec"]["type"], service["spec"]["externalName"]) == ("ExternalName", "localhost")
        assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [
            (p["name"], p["port"]) for p in ports
        ]

        work = tmp_path / "pod"
        work.mkdir()
        async with (
            manager_as_the_pod_runs_it(cluster, client, installed_wheel, work) as (probe, log_path, state),
            aiohttp.ClientSession() as http,
        ):
            await wait_until_ready(http, probe, log_path, traceback_free=True)

            # The rotator filled the Secret and injected its CA into all three configurations.
            secret = await client.get(SECRET_GVK, SECRET, NS)
            assert sorted(secret["data"]) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
            configurations = webhook_configurations(rendered)
            # the default level's (v2.3): Trainer's and JobSet's, and the TrainJob defaulter's
            assert len(configurations) == 4, configurations
            for gvk, name in configurations:
                hooks = (await client.get(gvk, name))["webhooks"]
                assert {h["clientConfig"]["caBundle"] for h in hooks} == {secret["data"]["ca.crt"]}, name
                assert {json.dumps(h["clientConfig"]["service"], sort_keys=True) for h in hooks} == {
                    json.dumps(
                        {
                            "name": NAME,
                            "namespace": NS,
                            "path": h["clientConfig"]["service"]["path"],
                            "port": 443,
                        },
                        sort_keys=True,
                    )
                    for h in hooks
                }

            # The runtimes go through the Trainer webhook (through the Service) once it is ready
            # and the API server calls the configurations with the injected CA.
            await wait_webhooks_answer(cluster, NS)
            # the default level's shipped runtimes (Trainer v2.3.0's), as `make deploy` applies them;
            # then the defaulter, whose probe (a dry-run TrainJob) names one of them
            _kubectl(cluster, "apply", "--server-side", "-k", str(ROOT / "config" / levels.DEFAULT.runtimes))
            await wait_webhooks_answer(cluster, NS, configurations)
            _kubectl(cluster, "create", "namespace", "team-a")

            # Each configuration answers through the Service: what only the webhooks can do.
            with pytest.raises(
                ApiError,
                match=r"validator\.trainjob\.trainer\.kubeflow\.org\" denied the request: .*must be created before",
            ):
                await client.create(_trainjob("no-runtime", "no-such-runtime"), dry_run=True)
            defaulted = await client.create(_jobset("probe"), dry_run=True)
            assert defaulted["spec"]["successPolicy"] == {"operator": "All"}, defaulted["spec"]
            assert defaulted["spec"]["network"]["enableDNSHostnames"] is True
            invalid = _jobset("probe")
            invalid["spec"]["replicatedJobs"][0]["dependsOn"] = [{"name": "x", "status": "Ready"}]
            with pytest.raises(
                ApiError, match=r"vjobset\.kb\.io.*DependsOn can't be set for the first ReplicatedJob"
            ):
                await client.create(invalid, dry_run=True)

            await client.create(_trainjob("mnist", "torch-distributed"))

            async def complete() -> None:
                status = (await client.get(TRAINJOB_GVK, "mnist", "team-a")).get("status") or {}
                conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
                assert conditions.get("Complete") == "True", status

            await eventually(complete, timeout=240, message="the TrainJob never completed")
            # The JobSet got past the JobSet webhooks (failurePolicy Fail, through the Service).
            await client.get(JOBSET_GVK, "mnist", "team-a")
            output = log_path.read_text()
            assert "forbidden" not in output.lower(), [
                line for line in output.splitlines() if "orbidden" in line
            ][:5]

            # `make undeploy` while the manager runs: the runtimes go first (the manager releases
            # their resource-in-use finalizers once no TrainJob uses them), then config/default.
            await client.delete_by_name(TRAINJOB_GVK, "mnist", "team-a")
            await eventually(lambda: _gone(client, TRAINJOB_GVK, "mnist", "team-a"), timeout=60)
            state["undeployed"] = True
            undeploy = await asyncio.create_subprocess_exec(
                "make",
                "-s",
                "undeploy",
                cwd=ROOT,
                env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            out, _ = await asyncio.wait_for(undeploy.communicate(), 300)
            assert undeploy.returncode == 0, out.decode()
            for doc in rendered:
                group, _, version = doc["apiVersion"].rpartition("/")
                gvk = GroupVersionKind(group, version, doc["kind"])
                meta = doc["metadata"]
                assert await _gone(client, gvk, meta["name"], meta.get("namespace", "")), _key(doc)
