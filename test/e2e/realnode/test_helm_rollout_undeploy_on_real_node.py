"""Helm, a rolling update and ``make undeploy`` of the project's image on a real node.

One local cluster with a real kubelet node (docs/realnode.md), the image of ``make
docker-build`` imported into its containerd, three tests in order:

* ``make helm-install`` of charts/kubeflow-trainer with the node's nodeSelector and toleration
  (``HELM_ARGS=-f helm-values.yaml``): the Deployment rolls out on the real node; its process
  runs as UID 65532 on a read-only root (read from the host's ``/proc`` of the container's
  process), the kubelet mounted the Secret the manager filled, the probes pass; the API server
  calls the webhooks through the Service's ClusterIP; the metrics are scraped at the Service's
  endpoint with a bearer token (401 without); a TrainJob on ``torch-distributed`` completes on
  KWOK; ``make helm-uninstall`` removes it.
* The rolling update: ``make deploy`` with two replicas, then ``kubectl set image`` to a second
  tag of the same image while a client keeps creating TrainJobs (through the validating webhook,
  ``failurePolicy: Fail``) and reading the Lease: time without a leader, webhook calls failed
  (0), every TrainJob converged (JobSet created, Complete).
* ``make undeploy`` while those TrainJobs still name ``torch-distributed`` (its in-use finalizer
  set): it returns, the CRDs, the runtimes and the manager are gone.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import os
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from manager.envtest import Environment, assets, realnode
from manager.testing import eventually

pytestmark = pytest.mark.realnode

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).parent
TAG = "localhost/trainer-controller-manager-py:realnode-e2e"
TAG2 = "localhost/trainer-controller-manager-py:realnode-e2e-2"
NS = "kubeflow-system"
NAME = "kubeflow-trainer-controller-manager"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/trainer.kubeflow.org"
FINALIZER = "trainer.kubeflow.org/resource-in-use"
CRDS = (
    "trainjobs.trainer.kubeflow.org",
    "trainingruntimes.trainer.kubeflow.org",
    "clustertrainingruntimes.trainer.kubeflow.org",
    "jobsets.jobset.x-k8s.io",
    "podgroups.scheduling.x-k8s.io",
    "elasticquotas.scheduling.x-k8s.io",
)
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
    out = _run(["make", "-s", "container-tools"], cwd=ROOT, env=_no_docker())
    exported = dict(
        line.removeprefix("export ").split("=", 1) for line in out.splitlines() if line.startswith("export ")
    )
    env = {**_no_docker(), **exported}
    _run(["make", "docker-build", f"IMG={TAG}"], cwd=ROOT, env=env)
    archive = tmp_path_factory.mktemp("image") / "image.tar"
    _run(["podman", "save", "--format", "docker-archive", "-o", str(archive), TAG], env=env)
    return archive


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, image: Path) -> Iterator[Environment]:
    environment = Environment(
        tmp_path_factory.mktemp("helm-realnode") / "env", full=True, nodes=2, real_node=True
    )
    asyncio.run(environment.start())
    try:
        environment.import_image(image)
        assert environment.node is not None
        environment.node.ctr("images", "tag", TAG, TAG2)  # the second tag of the rolling update
        yield environment
    finally:
        if environment.node is not None:
            asyncio.run(environment.stop())


def _make(env: Environment, *args: str, timeout: float = 600) -> str:
    return _run(
        ["make", *args], cwd=ROOT, env={**os.environ, "KUBECONFIG": str(env.kubeconfig)}, timeout=timeout
    )


def _kubectl(env: Environment, *args: str, timeout: float = 600) -> str:
    kubectl = assets.ensure(["kubectl"])["kubectl"]
    return _run([str(kubectl), f"--kubeconfig={env.kubeconfig}", *args], timeout=timeout)


async def _get(env: Environment, path: str) -> Json:
    status, body = await env.request("GET", path)
    assert status == 200, (path, status, body)
    return dict(body)


async def _gone(env: Environment, path: str, *, timeout: float = 120) -> None:
    async def check() -> None:
        status, _ = await env.request("GET", path)
        assert status == 404, (path, status)

    await eventually(check, timeout=timeout, message=f"{path} was never deleted")


async def _manager_pods(env: Environment) -> list[Json]:
    pods = await _get(
        env, f"/api/v1/namespaces/{NS}/pods?labelSelector=app.kubernetes.io%2Fcomponent%3Dmanager"
    )
    return [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]


async def _namespace(env: Environment) -> str:
    ns = f"team-{uuid.uuid4().hex[:6]}"
    status, body = await env.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    assert status == 201, body
    return ns


def _trainjob(ns: str, name: str, runtime: str = "torch-distributed", nodes: int = 2) -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "runtimeRef": {"name": runtime},
            "trainer": {"numNodes": nodes, "command": ["torchrun", "t.py"]},
        },
    }


def _conditions(obj: Json) -> dict[str, str]:
    return {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions", [])}


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


def _fetch(url: str, token: str | None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the metrics server's certificate is self-signed
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _time(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


async def test_helm_install_runs_the_manager_on_the_real_node(env: Environment) -> None:
    started = time.monotonic()
    await asyncio.to_thread(
        _make, env, "helm-install", f"IMG={TAG}", f"HELM_ARGS=-f {HERE / 'helm-values.yaml'} --timeout 8m"
    )
    print(
        f"\nmake helm-install (rollout on the real node, runtimes through the webhook): {time.monotonic() - started:.1f} s"
    )

    (pod,) = await _manager_pods(env)
    assert pod["spec"]["nodeName"] == "envtest-real-node", pod["spec"].get("nodeName")
    (status,) = pod["status"]["containerStatuses"]
    assert status["ready"] and status["restartCount"] == 0, status
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    running = status["state"]["running"]["startedAt"]
    print(
        f"manager Pod created -> container started -> Ready (probe): "
        f"{_time(running) - _time(pod['metadata']['creationTimestamp']):.0f} s, "
        f"{_time(ready['lastTransitionTime']) - _time(running):.0f} s (API timestamps, 1 s resolution)"
    )
    container = pod["spec"]["containers"][0]
    assert container["readinessProbe"] and container["livenessProbe"], container

    # What the kubelet made of it, read from the host: UID 65532, a read-only root, the Secret.
    pid = await asyncio.to_thread(_process, env, pod)
    uids, root, mounted = await asyncio.to_thread(_inside, pid)
    assert uids == ["65532"] * 4, uids
    assert "ro" in root, root
    secret = await _get(env, f"/api/v1/namespaces/{NS}/secrets/kubeflow-trainer-webhook-cert")
    assert mounted and mounted == base64.b64decode(secret["data"]["tls.crt"]), (
        "the mounted certificate is not the Secret's"
    )

    # The webhooks name the Service; the runtimes were admitted, a bad TrainJob is refused.
    hooks = await _get(
        env,
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/validator.trainer.kubeflow.org",
    )
    assert all("service" in h["clientConfig"] and h["failurePolicy"] == "Fail" for h in hooks["webhooks"])
    await _get(env, "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/torch-distributed")
    ns = await _namespace(env)
    base = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs"
    code, body = await env.request("POST", base, _trainjob(ns, "nothing", "no-such-runtime"))
    assert code >= 400 and 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied' in str(
        body
    ), body

    # Metrics at the Service's endpoint (as a ServiceMonitor scrapes it), with a bearer token.
    slices = await _get(
        env,
        f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3D{NAME}",
    )
    (address,) = [a for s in slices["items"] for e in s["endpoints"] for a in e["addresses"]]
    assert address == pod["status"]["podIP"], (address, pod["status"])
    for obj, path in (
        ({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "scraper", "namespace": ns}},
         f"/api/v1/namespaces/{ns}/serviceaccounts"),
        ({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
          "metadata": {"name": f"scraper-{ns}"},
          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kubeflow-trainer-metrics-reader"},
          "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": ns}]},
         "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"),
    ):  # fmt: skip
        code, body = await env.request("POST", path, obj)
        assert code == 201, body
    code, token = await env.request(
        "POST",
        f"/api/v1/namespaces/{ns}/serviceaccounts/scraper/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600},
        },
    )
    assert code == 201, token
    url = f"https://{address}:8443/metrics"
    code, _ = await asyncio.to_thread(_fetch, url, None)
    assert code == 401, code
    code, metrics = await asyncio.to_thread(_fetch, url, token["status"]["token"])
    assert code == 200 and "controller_runtime_reconcile_total" in metrics, (code, metrics[:500])

    created = time.monotonic()
    code, body = await env.request("POST", base, _trainjob(ns, "mnist"))
    assert code == 201, body

    async def complete() -> None:
        job = await _get(env, f"{base}/mnist")
        assert _conditions(job).get("Complete") == "True", job.get("status")

    await eventually(complete, timeout=180, message="the TrainJob never completed")
    print(f"TrainJob created to Complete: {time.monotonic() - created:.1f} s")
    nodes = {p["spec"].get("nodeName") for p in (await _get(env, f"/api/v1/namespaces/{ns}/pods"))["items"]}
    assert nodes and all(str(n).startswith("kwok-node-") for n in nodes), nodes

    # `helm uninstall --wait` deletes the chart's runtimes and waits for them: remove the
    # TrainJob first (a runtime in use keeps its finalizer).
    code, body = await env.request("DELETE", f"/api/v1/namespaces/{ns}")
    assert code in (200, 202), body
    await _gone(env, f"/api/v1/namespaces/{ns}")
    await asyncio.to_thread(_make, env, "helm-uninstall")
    await _gone(env, f"/apis/apps/v1/namespaces/{NS}/deployments/{NAME}")
    await _gone(env, "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/torch-distributed")
    # The chart keeps its CRDs (helm.sh/resource-policy: keep); the next test deploys with
    # kustomize, so remove them as a user switching installers would.
    await env.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/scraper-{ns}")
    for crd in CRDS:
        await env.request("DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
    for crd in CRDS:
        await _gone(env, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")


async def test_rolling_update_keeps_a_leader_and_every_webhook_call(env: Environment) -> None:
    await asyncio.to_thread(
        _make,
        env,
        "deploy",
        "LEVEL=v2.1",  # where docs/realnode.md's figures were taken
        f"IMG={TAG}",
        f"DEPLOY_PATCH={HERE / 'rollout-patch.yaml'}",
        "DEPLOY_TIMEOUT=300s",
    )

    async def two_ready() -> list[Json]:
        pods = await _manager_pods(env)
        assert len(pods) == 2 and all(
            p["status"].get("containerStatuses", [{}])[0].get("ready") for p in pods
        ), [p["status"].get("containerStatuses") for p in pods]
        return pods

    old = {
        p["metadata"]["name"]
        for p in await eventually(two_ready, timeout=180, message="two replicas never Ready")
    }

    async def led() -> None:
        holder = (await _get(env, LEASE))["spec"].get("holderIdentity") or ""
        assert any(holder.startswith(name) for name in old), (holder, old)

    # A Lease left by the Helm release's Pod (not released on exit, as upstream) expires first.
    await eventually(led, timeout=90, message="no replica took the Lease")

    ns = await _namespace(env)
    base = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs"
    stop = asyncio.Event()
    names: list[str] = []
    failures: list[tuple[int, object]] = []
    observed: list[tuple[str, float, float]] = []  # holder, acquireTime, renewTime

    async def create() -> None:
        while not stop.is_set():
            name = f"roll-{len(names) + len(failures)}"
            code, body = await env.request("POST", base, _trainjob(ns, name, nodes=1))
            if code == 201:
                names.append(name)
            else:
                failures.append((code, body))
            await asyncio.sleep(0.2)

    async def watch() -> None:
        while not stop.is_set():
            spec = (await _get(env, LEASE))["spec"]
            holder = spec.get("holderIdentity") or ""
            if holder and spec.get("renewTime"):
                observed.append(
                    (holder, _time(spec.get("acquireTime") or spec["renewTime"]), _time(spec["renewTime"]))
                )
            else:
                observed.append(("", 0.0, 0.0))
            await asyncio.sleep(0.2)

    tasks = [asyncio.create_task(create()), asyncio.create_task(watch())]
    await asyncio.sleep(3)  # some TrainJobs before the update
    started = time.monotonic()
    await asyncio.to_thread(_kubectl, env, "-n", NS, "set", "image", f"deployment/{NAME}", f"manager={TAG2}")
    await asyncio.to_thread(
        _kubectl, env, "-n", NS, "rollout", "status", f"deployment/{NAME}", "--timeout=300s"
    )
    rolled = time.monotonic() - started
    new = {
        p["metadata"]["name"]
        for p in await eventually(two_ready, timeout=120, message="two new replicas never Ready")
    }
    assert not new & old, (new, old)

    async def new_leader() -> None:
        holder = (await _get(env, LEASE))["spec"].get("holderIdentity") or ""
        assert any(holder.startswith(name) for name in new), (holder, new)

    await eventually(new_leader, timeout=90, message="no new replica took the Lease")
    await asyncio.sleep(3)  # some TrainJobs after the update
    stop.set()
    await asyncio.gather(*tasks)

    # Time without a leader: from the last renewal seen of a holder to the next holder's acquisition.
    gaps: list[float] = []
    last: tuple[str, float] | None = None
    for holder, acquired, renewed in observed:
        if not holder:
            continue
        if last is not None and holder != last[0]:
            gaps.append(max(0.0, acquired - last[1]))
        last = (holder, renewed)
    assert gaps, f"leadership never moved: {observed[:3]} ... {observed[-3:]}"

    created = time.monotonic()

    async def converged() -> None:
        jobs = {j["metadata"]["name"]: j for j in (await _get(env, base))["items"]}
        jobsets = {
            j["metadata"]["name"]
            for j in (await _get(env, f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets"))["items"]
        }
        missing = [n for n in names if n not in jobsets]
        pending = [n for n in names if _conditions(jobs.get(n, {})).get("Complete") != "True"]
        assert not missing and not pending, (
            f"{len(missing)} without a JobSet, {len(pending)} not Complete: {pending[:5]}"
        )

    await eventually(converged, timeout=300, interval=1, message="not every TrainJob converged")
    print(
        f"\nrolling update (2 replicas, {TAG} -> {TAG2}): rollout {rolled:.1f} s; leader changes {len(gaps)}, "
        f"time without a leader {' + '.join(f'{g:.1f}' for g in gaps)} s (max {max(gaps):.1f} s); "
        f"TrainJobs created {len(names)}, webhook calls failed {len(failures)}, converged {len(names)} "
        f"(JobSet + Complete, {time.monotonic() - created:.1f} s after the last)"
    )
    assert failures == [], failures[:5]
    assert max(gaps) < 30, gaps  # leaseDuration 15 s + retryPeriod 2 s, with room for the load
    status, _ = await env.request("GET", f"/api/v1/namespaces/{ns}")
    assert status == 200


async def test_make_undeploy_returns_while_trainjobs_use_a_runtime(env: Environment) -> None:
    runtime = await _get(env, "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/torch-distributed")
    assert FINALIZER in runtime["metadata"].get("finalizers", []), runtime["metadata"]
    jobs = await _get(env, "/apis/trainer.kubeflow.org/v1alpha1/trainjobs")
    assert any(j["spec"]["runtimeRef"]["name"] == "torch-distributed" for j in jobs["items"]), (
        "no TrainJob to hold it"
    )

    started = time.monotonic()
    await asyncio.to_thread(_make, env, "undeploy", "LEVEL=v2.1", "DEPLOY_TIMEOUT=240s", timeout=400)
    print(
        f"\nmake undeploy with {len(jobs['items'])} TrainJobs naming torch-distributed: {time.monotonic() - started:.1f} s"
    )
    for crd in CRDS:
        await _gone(env, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}", timeout=5)
    await _gone(env, f"/apis/apps/v1/namespaces/{NS}/deployments/{NAME}")
    await _gone(env, f"/api/v1/namespaces/{NS}")

    assert env.node is not None
    state = env.node.state
    await env.stop()
    assert realnode.leaks(state) == []
