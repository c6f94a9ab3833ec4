"""Helpers of the real-node deploy tests (a unique module name: ``conftest`` is ambiguous on
sys.path): the cluster with its real node, make and kubectl against it, and what a user of the
deployed manager would check, written once for ``make deploy`` and ``make helm-install``:

* ``check_manager_pod``: the manager's Pod on the real node, Ready (its readiness probe passed),
  not restarted (its liveness probe holds), and, read from the host's ``/proc`` of the
  container's process, running as UID 65532 on a read-only root with the certificate the manager
  wrote into the Secret mounted by the kubelet;
* ``check_service``: the Service a plain ClusterIP with the level's ports, its EndpointSlice the
  Pod's address with the webhook, metrics and status-server ports;
* ``every_webhook_answers``: each webhook of every configuration the manager serves called by
  the API server through the Service (the only way to the Pod) and acting as it should: a
  denial naming it or its mutation seen in the dry-run answer;
* ``scrape_metrics``: ``/metrics`` with the bearer token of a ServiceAccount bound to
  ``kubeflow-trainer-metrics-reader`` (401 without), through the Service's ClusterIP at v2.3;
* ``public_configmap``: at v2.3 any authenticated user reads ``kubeflow-trainer-public`` and not
  the manager's Configuration.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import json
import os
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from manager.envtest import Environment, assets
from manager.testing import eventually
from trainer.api import jobset_constants as jc
from trainer.conformance.webhook_probes import PROBES

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).parent
TAG = "localhost/trainer-controller-manager-py:realnode-e2e"
NS = "kubeflow-system"
NAME = "kubeflow-trainer-controller-manager"
NODE = "envtest-real-node"
FINALIZER = "trainer.kubeflow.org/resource-in-use"
TRAINER = "/apis/trainer.kubeflow.org/v1alpha1"
CRDS = (
    "trainjobs.trainer.kubeflow.org",
    "trainingruntimes.trainer.kubeflow.org",
    "clustertrainingruntimes.trainer.kubeflow.org",
    "jobsets.jobset.x-k8s.io",
    "podgroups.scheduling.x-k8s.io",
    "elasticquotas.scheduling.x-k8s.io",
)
Json = dict[str, Any]


@dataclass(frozen=True)
class Level:
    """What a user sees of a deployment at one API level (docs/levels.md)."""

    name: str
    make_args: tuple[str, ...]
    """``make deploy``/``undeploy`` arguments: none for the default level, as a new user runs them."""
    service_ports: dict[str, int]
    configurations: int
    """webhook configurations the manager serves (v2.3 adds the TrainJob defaulter's)"""
    metrics_through_service: bool
    """v2.3.0's Service port 8443 targets the metrics port; v2.1.0's monitoring-port is 8080,
    where nothing listens, so a scraper goes to the endpoint (as a ServiceMonitor does)"""
    public_configmap: bool
    runtime_finalizer: bool
    """v2.1's manager marks a runtime a TrainJob names ``resource-in-use``; v2.3.0's never does"""
    pods_labelled_with_priority: bool
    """JobSet v0.12.0's mpod.kb.io labels every JobSet pod with its priority (v0.10.1's only
    exclusive-placement pods)"""


V2_3 = Level(
    "v2.3",
    (),
    {"monitoring-port": 8443, "webhook-server": 443, "status-server": 10443},
    4,
    metrics_through_service=True,
    public_configmap=True,
    runtime_finalizer=False,
    pods_labelled_with_priority=True,
)
V2_1 = Level(
    "v2.1",
    ("LEVEL=v2.1",),
    {"monitoring-port": 8080, "webhook-server": 443, "status-server": 10443},
    3,
    metrics_through_service=False,
    public_configmap=False,
    runtime_finalizer=True,
    pods_labelled_with_priority=False,
)


# -- the cluster, make, kubectl ------------------------------------------------------------------


@contextlib.contextmanager
def node_cluster(directory: Path) -> Iterator[Environment]:
    """A full local cluster with two KWOK nodes and the real node; stopped (and the host cleaned)
    unless the test stopped it already."""
    environment = Environment(directory, full=True, nodes=2, real_node=True)
    started = time.monotonic()
    asyncio.run(environment.start())
    print(f"\nfull environment with a real node started in {time.monotonic() - started:.1f} s")
    try:
        yield environment
    finally:
        if environment.node is not None:
            asyncio.run(environment.stop())


def run(argv: list[str], *, timeout: float = 1800, **kw: Any) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout, **kw)
    assert proc.returncode == 0, f"{' '.join(argv)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def make(env: Environment, *args: str, timeout: float = 600) -> str:
    return run(
        ["make", *args], cwd=ROOT, env={**os.environ, "KUBECONFIG": str(env.kubeconfig)}, timeout=timeout
    )


def kubectl(env: Environment, *args: str, timeout: float = 600) -> str:
    binary = assets.ensure(["kubectl"])["kubectl"]
    return run([str(binary), f"--kubeconfig={env.kubeconfig}", *args], timeout=timeout)


def helm(env: Environment, *args: str, timeout: float = 900) -> str:
    binary = assets.ensure(["helm"])["helm"]
    return run([str(binary), f"--kubeconfig={env.kubeconfig}", *args], timeout=timeout)


async def get(env: Environment, path: str) -> Json:
    status, body = await env.request("GET", path)
    assert status == 200, (path, status, body)
    return dict(body)


async def exists(env: Environment, path: str) -> bool:
    status, body = await env.request("GET", path)
    assert status in (200, 404), (path, status, body)
    return status == 200


async def gone(env: Environment, path: str, *, timeout: float = 120) -> None:
    async def check() -> None:
        assert not await exists(env, path), path

    await eventually(check, timeout=timeout, message=f"{path} was never deleted")


async def manager_pods(env: Environment) -> list[Json]:
    pods = await get(
        env, f"/api/v1/namespaces/{NS}/pods?labelSelector=app.kubernetes.io%2Fcomponent%3Dmanager"
    )
    return [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]


async def namespace(env: Environment) -> str:
    """A new namespace, once its default ServiceAccount exists (pods need it on this cluster)."""
    ns = f"team-{uuid.uuid4().hex[:6]}"
    status, body = await env.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    assert status == 201, body

    async def default_service_account() -> None:
        await get(env, f"/api/v1/namespaces/{ns}/serviceaccounts/default")

    await eventually(default_service_account, timeout=60, message=f"no default ServiceAccount in {ns}")
    return ns


def trainjob(ns: str, name: str, runtime: str = "torch-distributed", nodes: int = 2) -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "runtimeRef": {"name": runtime},
            "trainer": {"numNodes": nodes, "command": ["torchrun", "train.py"]},
        },
    }


def conditions(obj: Json) -> dict[str, str]:
    return {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions", [])}


def stamp(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


async def trainjob_completes_on_kwok(env: Environment, level: Level, ns: str, name: str = "mnist") -> float:
    """A TrainJob on ``torch-distributed`` created, run to Complete on the KWOK nodes (its pods
    do not tolerate the real node's taint; the JobSet pod webhooks admitted each); the seconds it
    took."""
    base = f"{TRAINER}/namespaces/{ns}/trainjobs"
    created = time.monotonic()
    code, body = await env.request("POST", base, trainjob(ns, name))
    assert code == 201, body

    async def complete() -> None:
        job = await get(env, f"{base}/{name}")
        assert conditions(job).get("Complete") == "True", job.get("status")

    await eventually(complete, timeout=180, message=f"the TrainJob {name} never completed")
    took = time.monotonic() - created
    pods = (await get(env, f"/api/v1/namespaces/{ns}/pods"))["items"]
    assert pods and all(str(p["spec"].get("nodeName")).startswith("kwok-node-") for p in pods), [
        p["spec"].get("nodeName") for p in pods
    ]
    if level.pods_labelled_with_priority:  # mpod.kb.io was called for each
        assert all(p["metadata"]["labels"].get(jc.PriorityKey) == "0" for p in pods), [
            p["metadata"]["labels"] for p in pods
        ]
    return took


# -- the manager's Pod, read from the host -------------------------------------------------------


def _process(env: Environment, pod: Json) -> int:
    """The host PID of the pod's (only) container, from the node's containerd."""
    (status,) = pod["status"]["containerStatuses"]
    container = status["containerID"].split("://", 1)[1]
    assert env.node is not None
    for line in env.node.ctr("tasks", "ls").splitlines()[1:]:
        fields = line.split()
        if fields and fields[0] == container:
            return int(fields[1])
    raise AssertionError(f"no task {container} in the node's containerd")


def _inside(pid: int) -> tuple[list[str], list[str], bytes]:
    """The process's UIDs (real, effective, saved, fs), its root mount's options, the mounted certificate."""
    proc = Path(f"/proc/{pid}")
    uids = next(line for line in (proc / "status").read_text().splitlines() if line.startswith("Uid:"))
    root = next(
        line.split() for line in (proc / "mountinfo").read_text().splitlines() if line.split()[4] == "/"
    )
    cert = (proc / "root/tmp/k8s-webhook-server/serving-certs/tls.crt").read_bytes()
    return uids.split()[1:], root[5].split(","), cert


async def check_manager_pod(env: Environment, image: str = TAG) -> Json:
    """The one manager Pod runs on the real node as the issue asks; returns it."""
    (pod,) = await manager_pods(env)
    assert pod["spec"]["nodeName"] == NODE, pod["spec"].get("nodeName")
    (status,) = pod["status"]["containerStatuses"]
    assert status["ready"] and status["restartCount"] == 0, status
    assert status["image"].endswith(image.split("/", 1)[1]), status["image"]
    container = pod["spec"]["containers"][0]
    assert container["readinessProbe"] and container["livenessProbe"], container
    assert any(v.get("projected") for v in pod["spec"]["volumes"]), "no ServiceAccount token volume"
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True", pod["status"]["conditions"]
    running = status["state"]["running"]["startedAt"]
    print(
        f"manager Pod created -> container started -> Ready (readiness probe): "
        f"{stamp(running) - stamp(pod['metadata']['creationTimestamp']):.0f} s, "
        f"{stamp(ready['lastTransitionTime']) - stamp(running):.0f} s (API timestamps, 1 s resolution)"
    )

    # What the kubelet made of it, read from the host: UID 65532, a read-only root, the Secret.
    uids, root, mounted = await asyncio.to_thread(_inside, await asyncio.to_thread(_process, env, pod))
    assert uids == ["65532"] * 4, uids
    assert "ro" in root, root
    secret = await get(env, f"/api/v1/namespaces/{NS}/secrets/kubeflow-trainer-webhook-cert")
    assert mounted and mounted == base64.b64decode(secret["data"]["tls.crt"]), (
        "the mounted certificate is not the one the manager wrote into the Secret"
    )
    return pod


async def check_service(env: Environment, level: Level, pod: Json) -> Json:
    """The Service: a ClusterIP with the level's ports, its endpoints the Pod's; returns it."""
    service = await get(env, f"/api/v1/namespaces/{NS}/services/{NAME}")
    assert service["spec"]["type"] == "ClusterIP" and service["spec"]["clusterIP"], service["spec"]
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == level.service_ports
    slices = await get(
        env,
        f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3D{NAME}",
    )
    (address,) = [a for s in slices["items"] for e in s["endpoints"] for a in e["addresses"]]
    assert address == pod["status"]["podIP"], (address, pod["status"])
    ports = {p["name"]: p["port"] for s in slices["items"] for p in s.get("ports") or []}
    assert ports.get("webhook-server") == 9443 and ports.get("status-server") == 10443, ports
    return service


# -- every webhook through the Service -----------------------------------------------------------


def _runtime_probe(namespace: str) -> Json:
    """A runtime whose trainer job has two replicas, refused by the runtime webhooks ("always must
    be 1"); without the webhook-validation label, so v2.3's objectSelector lets it through."""
    (probe,) = [p for p in PROBES if p.hook == "validator.trainingruntime.trainer.kubeflow.org"]
    return probe.body(namespace)


def _pod_probe(namespace: str, index: str) -> Json:
    """A JobSet pod with exclusive placement: the leader (index 0) gets its affinities from
    mpod.kb.io; a follower without a nodeSelector is refused by vpod.kb.io."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "webhook-probe-",
            "namespace": namespace,
            "labels": {jc.JobSetNameKey: "probe"},
            "annotations": {
                jc.JobSetNameKey: "probe",
                jc.ExclusiveKey: "kubernetes.io/hostname",
                jc.JobCompletionIndexAnnotation: index,
            },
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def _affinities_set(answer: Any) -> bool:
    affinity = (answer.get("spec") or {}).get("affinity") or {}
    return bool(affinity.get("podAffinity") and affinity.get("podAntiAffinity"))


@dataclass(frozen=True)
class WebhookCall:
    path: Callable[[str], str]
    body: Callable[[str], Json]
    mutated: Callable[[Any], bool] | None = None
    denied: str = ""
    """text the denial carries besides the webhook's name"""


def _probe_call(hook: str) -> WebhookCall:
    (probe,) = [p for p in PROBES if p.hook == hook]
    return WebhookCall(probe.path, probe.body, probe.mutated)


CALLS: dict[str, WebhookCall] = {
    "validator.trainjob.trainer.kubeflow.org": WebhookCall(
        lambda ns: f"{TRAINER}/namespaces/{ns}/trainjobs",
        lambda ns: trainjob(ns, "no-runtime", runtime="no-such-runtime"),
        denied="must be created before",
    ),
    "validator.trainingruntime.trainer.kubeflow.org": _probe_call(
        "validator.trainingruntime.trainer.kubeflow.org"
    ),
    "validator.clustertrainingruntime.trainer.kubeflow.org": WebhookCall(
        lambda ns: f"{TRAINER}/clustertrainingruntimes",
        lambda ns: {
            **_runtime_probe(ns),
            "kind": "ClusterTrainingRuntime",
            "metadata": {"generateName": "probe-"},
        },
    ),
    "defaulter.trainjob.trainer.kubeflow.org": _probe_call("defaulter.trainjob.trainer.kubeflow.org"),
    "mjobset.kb.io": _probe_call("mjobset.kb.io"),
    "vjobset.kb.io": _probe_call("vjobset.kb.io"),
    "mpod.kb.io": WebhookCall(
        lambda ns: f"/api/v1/namespaces/{ns}/pods", lambda ns: _pod_probe(ns, "0"), mutated=_affinities_set
    ),
    "vpod.kb.io": WebhookCall(
        lambda ns: f"/api/v1/namespaces/{ns}/pods",
        lambda ns: _pod_probe(ns, "1"),
        denied="follower pod node selector not set",
    ),
}


async def every_webhook_answers(env: Environment, level: Level, ns: str) -> list[str]:
    """Each webhook of the configurations that call the manager's Service answers a dry-run
    create sent to the API server (which calls it through the Service's ClusterIP); returns the
    webhooks called."""
    configurations = []
    for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
        items = (await get(env, f"/apis/admissionregistration.k8s.io/v1/{kind}"))["items"]
        configurations += [
            c
            for c in items
            if any((h["clientConfig"].get("service") or {}).get("name") == NAME for h in c["webhooks"])
        ]
    assert len(configurations) == level.configurations, [c["metadata"]["name"] for c in configurations]
    hooks = [h for c in configurations for h in c["webhooks"]]
    for hook in hooks:
        assert "url" not in hook["clientConfig"] and hook["failurePolicy"] == "Fail", hook
        assert hook["clientConfig"]["service"]["namespace"] == NS and hook["clientConfig"]["caBundle"], hook
    names = sorted(h["name"] for h in hooks)
    assert set(names) <= set(CALLS), f"no call for {set(names) - set(CALLS)}: add one to realnode_e2e.CALLS"
    for name in names:
        call = CALLS[name]
        code, answer = await env.request("POST", f"{call.path(ns)}?dryRun=All", call.body(ns))
        if call.mutated is not None:
            assert code == 201 and call.mutated(answer), (name, code, answer)
        else:
            message = str(answer.get("message") if isinstance(answer, dict) else answer)
            assert code >= 400 and f'admission webhook "{name}" denied' in message, (name, code, answer)
            assert call.denied in message, (name, message)
    return names


# -- metrics, the public ConfigMap ---------------------------------------------------------------


def _fetch(url: str, token: str | None, cafile: Path | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    if cafile is None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # the metrics server's certificate is self-signed
    else:
        context = ssl.create_default_context(cafile=str(cafile))
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


async def _token(env: Environment, ns: str, account: str) -> str:
    code, body = await env.request(
        "POST",
        f"/api/v1/namespaces/{ns}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}},
    )
    assert code in (201, 409), body
    code, token = await env.request(
        "POST",
        f"/api/v1/namespaces/{ns}/serviceaccounts/{account}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600},
        },
    )
    assert code == 201, token
    return str(token["status"]["token"])


async def scrape_metrics(env: Environment, level: Level, ns: str, service: Json, pod: Json) -> str:
    """``/metrics`` with a bearer token allowed by ``kubeflow-trainer-metrics-reader`` (401
    without); returns the URL scraped."""
    token = await _token(env, ns, "scraper")
    code, body = await env.request(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"scraper-{ns}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kubeflow-trainer-metrics-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": ns}],
        },
    )  # fmt: skip
    assert code == 201, body
    if level.metrics_through_service:
        port = next(p["port"] for p in service["spec"]["ports"] if p["name"] == "monitoring-port")
        url = f"https://{service['spec']['clusterIP']}:{port}/metrics"
    else:
        url = f"https://{pod['status']['podIP']}:8443/metrics"
    code, _ = await asyncio.to_thread(_fetch, url, None)
    assert code == 401, code

    async def scraped() -> None:  # the binding reaches the manager's authorizer cache
        code, metrics = await asyncio.to_thread(_fetch, url, token)
        assert code == 200 and "controller_runtime_reconcile_total" in metrics, (code, metrics[:500])

    await eventually(scraped, timeout=60, message=f"{url} never served the metrics to the token")
    await env.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/scraper-{ns}")
    return url


async def public_configmap(env: Environment, ns: str) -> None:
    """v2.3.0's ``kubeflow-trainer-public``: readable by any authenticated user (here a
    ServiceAccount of another namespace, as the ``kubeflow`` SDK reads it), unlike the
    manager's Configuration."""
    token = await _token(env, ns, "sdk-user")
    base = f"{env.url}/api/v1/namespaces/{NS}/configmaps"
    ca = env.dir / "serving-ca.crt"
    code, body = await asyncio.to_thread(_fetch, f"{base}/kubeflow-trainer-public", token, ca)
    assert code == 200 and json.loads(body)["data"] == {"kubeflow_trainer_version": "v2.3.0"}, (code, body)
    code, body = await asyncio.to_thread(_fetch, f"{base}/kubeflow-trainer-config", token, ca)
    assert code == 403, (code, body)


async def manager_log_is_clean(env: Environment, pod: Json) -> None:
    """The manager's log, read through the kubelet: no request forbidden, no traceback."""
    code, log = await env.request(
        "GET", f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}/log", accept="*/*"
    )
    assert code == 200, log
    assert "forbidden" not in str(log).lower() and "Traceback" not in str(log), str(log)[-3000:]


async def check_deployment(env: Environment, level: Level) -> tuple[Json, str]:
    """Everything the issue asks of a running deployment; returns the Pod and a namespace for
    the test's TrainJobs."""
    pod = await check_manager_pod(env)
    service = await check_service(env, level, pod)
    ns = await namespace(env)
    called = await every_webhook_answers(env, level, ns)
    print(f"webhooks called through the Service's ClusterIP: {len(called)} ({', '.join(called)})")
    url = await scrape_metrics(env, level, ns, service, pod)
    print(f"metrics scraped with a bearer token at {url}")
    if level.public_configmap:
        await public_configmap(env, ns)
    return pod, ns


async def runtime_finalizers(env: Environment, name: str = "torch-distributed") -> list[str]:
    runtime = await get(env, f"{TRAINER}/clustertrainingruntimes/{name}")
    return list(runtime["metadata"].get("finalizers") or [])
