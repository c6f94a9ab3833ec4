"""Scale scenario, side by side: a large simulated cluster already there when
a manager starts.

One full local control plane (etcd, kube-apiserver, kube-controller-manager, scheduler, KWOK) is
filled once, in three steps, and after each step every side is started fresh, measured and
stopped, one after the other (the machine has 2 cores):

* S0: ``--nodes`` KWOK nodes, ``--trainjobs`` suspended TrainJobs on ``torch-distributed`` (a
  warm-up run of our manager first creates their JobSets and Jobs, so every measured run sees the
  same objects), one ElasticQuota per namespace, no Pods;
* S1: + the relevant Pods (``--relevant`` of ``--pods``, default 10 %): two thirds carry JobSet
  labels (``jobset.sigs.k8s.io/jobset-name`` ...), one third a pod-group label with their
  PodGroups;
* S2: + the unrelated Pods: labelled like a Deployment's (``app``, ``pod-template-hash``) in
  ``--namespaces`` namespaces. No Deployment or ReplicaSet objects exist: they would make the
  kube-controller-manager (not a manager under test) do the work of 100k Pods, and an owner
  reference to an absent owner gets the Pod garbage-collected, so the Pods carry labels only.

Every Pod is created pre-bound (``spec.nodeName`` set: the scheduler is not the bottleneck) and
made Running by the harness itself, one status PATCH right after its create with the fields KWOK
would write (phase, conditions, IPs, container status): KWOK alone made Pods Running at 7-12/s
here, 3 to 4 hours for 100k. A Pod with ``status.podIP`` set is one KWOK's pod stages skip, so
nothing rewrites them afterwards (none is owned by a Job, so they stay Running). KWOK renews node leases
once an hour and the kube-controller-manager's node monitor waits two hours, so 5,000 nodes'
heartbeats do not swamp the API server (and no taint evicts the Pods).

Per run: seconds from process start to every controller's ``Starting workers`` log line (all of
its caches synced) and to the Pod controller's; to the first TrainJob reconcile and to one per
TrainJob (``controller_runtime_reconcile_total``); steady RSS (``VmRSS`` once the CPU is quiet),
peak RSS (``VmHWM``), CPU seconds, API requests by verb until then (``rest_client_requests_total``);
at S2 also the latency of one suspended TrainJob created into the cluster to its JobSet and its
Job (watches). RSS per relevant Pod is (S1 - S0) / relevant Pods, per unrelated Pod
(S2 - S1) / unrelated Pods.

The cluster, both sides and the TrainJobs are of one API level (``--level``, default v2.3;
``bench_level.py``): the level's CRDs and shipped runtimes, TrainJobs valid at it. Sides:
``ours`` (``python -m trainer --api-level=<level>``, every component: the
ElasticQuota controller needs every Pod, so our Pod cache runs in its all-Pods mode) and
``theirs`` (the Go originals of the level, jobset v0.12.0 and trainer v2.3.0 at v2.3, jobset
v0.10.1 and trainer v2.1.0 at v2.1, as the conformance harness runs them, plus the
scheduler-plugins v0.34.7 controller when ``--scheduler-plugins`` is given and it builds).
Each side's admission webhooks (ours: the level's manifests'; theirs: upstream's of the level)
are registered while it runs and removed when it stops (a stopped manager's webhooks would
refuse every write to the shared cluster). Both sides run a bare Configuration's defaults (ours:
1 TrainJob worker, qps 1000; Go's: trainer 1 worker and qps 50 / burst 100, jobset qps 500);
``--shipped`` gives each its shipped ``controller`` and ``clientConnection`` instead, as the burst
runs them (ours: 5 TrainJob workers; Go's trainer: qps 500 / burst 1000, its shipped TrainJob
workers never apply, docs/divergences.md T-2).

    python test/bench/scale.py                          # 5,000 nodes, 100,000 Pods
    python test/bench/scale.py --pods 10000 --nodes 500 # the smaller scenario `make bench` runs
    python test/bench/scale.py --pods 2000 --nodes 50 --trainjobs 50 --sides ours  # a quick look

Writes ``scale-<pods>-<level>.json`` and ``.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import aiohttp
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_level
import burst

from manager import longrun
from manager.envtest import Environment
from manager.envtest.assets import GoMain, ensure_go_main, find_go_main
from manager.envtest.certs import TinyCA
from manager.envtest.environment import kwok_node
from manager.envtest.process import Process, free_port, wait_http
from trainer.conformance import harness, webhook_probes
from trainer.conformance.kube import Kube

NS = burst.NAMESPACE  # TrainJobs and the relevant Pods (the burst Watcher watches it)
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
SCHEDULER_PLUGINS = GoMain(
    "sigs.k8s.io/scheduler-plugins",
    "v0.34.7",
    "sigs.k8s.io/scheduler-plugins/cmd/controller",
    "scheduler-plugins-controller",
)
KWOK_ARGS = ["--node-lease-duration-seconds=3600"]
KCM_ARGS = ["--node-monitor-grace-period=2h", "--controllers=-taint-eviction-controller"]
TRAINJOB_CONTROLLER = "trainjob_controller"  # upstream's name, ours too
STARTING = re.compile(r'Starting workers.*?controller["=:\s]+"?([\w.-]+)')
say = burst.say


# -- filling the cluster -----------------------------------------------------------------------


async def bounded(jobs: Iterable[Callable[[], Awaitable[None]]], limit: int = 48) -> None:
    sem = asyncio.Semaphore(limit)

    async def one(job: Callable[[], Awaitable[None]]) -> None:
        async with sem:
            await job()

    await asyncio.gather(*(one(j) for j in jobs))


async def post_all(
    kube: Kube,
    path_of: Callable[[dict[str, Any]], str],
    objs: list[dict[str, Any]],
    what: str,
    then: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
) -> None:
    failures: list[str] = []
    start = time.monotonic()

    def job(obj: dict[str, Any]) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            for _ in range(5):
                status, body = await kube.request("POST", path_of(obj), obj)
                if status in (201, 409):
                    if then is not None:
                        await then(obj)
                    return
                if status not in (500, 503, 504, 403):  # 403: a new namespace's ServiceAccount
                    break
                await asyncio.sleep(1)
            failures.append(f"{obj['metadata']['name']}: {status} {str(body)[:200]}")

        return call

    await bounded(job(o) for o in objs)
    seconds = time.monotonic() - start
    say(
        f"created {len(objs) - len(failures)} {what} in {seconds:.0f}s ({len(objs) / max(seconds, 0.1):.0f}/s)"
    )
    if failures:
        raise RuntimeError(f"{len(failures)} {what} not created, e.g. {failures[:3]}")


def node(i: int) -> dict[str, Any]:
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    return kwok_node(f"kwok-node-{i}", resources, {"topology.kubernetes.io/zone": f"zone-{i % 8}"})


def _pod(
    name: str, ns: str, node_name: str, labels: dict[str, str], annotations: dict[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels, "annotations": annotations},
        "spec": {
            "nodeName": node_name,
            "containers": [
                {
                    "name": "app",
                    "image": "registry.k8s.io/pause:3.10",
                    "ports": [{"containerPort": 8080, "name": "http"}],
                    "env": [{"name": "MODE", "value": "bench"}, {"name": "POD", "value": name}],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                        "limits": {"memory": "256Mi"},
                    },
                }
            ],
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }


def _hash(text: str, n: int = 10) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:n]


def relevant_pods(count: int, nodes: int) -> tuple[list[dict[str, Any]], list[str]]:
    """Two thirds JobSet Pods (10 per JobSet), one third pod-group Pods (10 per PodGroup)."""
    pods: list[dict[str, Any]] = []
    groups: list[str] = []
    jobset_pods = count * 2 // 3
    for i in range(count):
        node_name = f"kwok-node-{(i * 7) % nodes}"
        if i < jobset_pods:
            js, k = f"js-{i // 10}", i % 10
            key = _hash(f"{NS}/{js}-node-0", 40)
            labels = {
                JOBSET_LABEL: js,
                "jobset.sigs.k8s.io/replicatedjob-name": "node",
                "jobset.sigs.k8s.io/job-index": "0",
                "jobset.sigs.k8s.io/job-key": key,
                "batch.kubernetes.io/job-name": f"{js}-node-0",
                "job-name": f"{js}-node-0",
                "batch.kubernetes.io/job-completion-index": str(k),
            }
            annotations = {
                "batch.kubernetes.io/job-completion-index": str(k),
                "jobset.sigs.k8s.io/jobset-name": js,
            }
            pods.append(_pod(f"{js}-node-0-{k}-{_hash(str(i), 5)}", NS, node_name, labels, annotations))
        else:
            j = i - jobset_pods
            group = f"pg-{j // 10}"
            if j % 10 == 0:
                groups.append(group)
            labels = {POD_GROUP_LABEL: group, "app": group}
            pods.append(_pod(f"{group}-{j % 10}", NS, node_name, labels, {}))
    return pods, groups


def unrelated_pods(count: int, nodes: int, namespaces: int, offset: int) -> list[dict[str, Any]]:
    """Pods as a Deployment's ReplicaSet labels them, 100 per "Deployment"."""
    pods = []
    for i in range(offset, offset + count):
        deployment = i // 100
        template_hash = _hash(f"d{deployment}", 10)
        ns = f"apps-{deployment % namespaces}"
        labels = {"app": f"web-{deployment}", "pod-template-hash": template_hash, "tier": "frontend"}
        name = f"web-{deployment}-{template_hash}-{_hash(str(i), 5)}"
        pods.append(_pod(name, ns, f"kwok-node-{i % nodes}", labels, {}))
    return pods


def pod_path(obj: dict[str, Any]) -> str:
    return f"/api/v1/namespaces/{obj['metadata']['namespace']}/pods"


def running_status(obj: dict[str, Any], index: int) -> dict[str, Any]:
    """The status KWOK's pod-ready stage writes: Running, Ready, an IP from KWOK's ``--cidr``."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ip = f"10.{244 + (index >> 16)}.{(index >> 8) & 255}.{index & 255}"
    container = obj["spec"]["containers"][0]
    conditions = ("Initialized", "Ready", "ContainersReady", "PodScheduled")
    return {
        "status": {
            "phase": "Running",
            "hostIP": "10.243.0.1",
            "hostIPs": [{"ip": "10.243.0.1"}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": now,
            "conditions": [{"type": t, "status": "True", "lastTransitionTime": now} for t in conditions],
            "containerStatuses": [
                {
                    "name": container["name"],
                    "image": container["image"],
                    "imageID": "",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
            ],
        }
    }


def mark_running(kube: Kube) -> Callable[[dict[str, Any]], Awaitable[None]]:
    """A ``post_all`` step: PATCH the created Pod's status to Running (retried on a 5xx)."""
    counter = iter(range(1 << 30))

    async def patch(obj: dict[str, Any]) -> None:
        body = running_status(obj, next(counter))
        path = f"{pod_path(obj)}/{obj['metadata']['name']}/status"
        for _ in range(5):
            status, answer = await kube.request(
                "PATCH", path, body, content_type="application/merge-patch+json"
            )
            if status == 200:
                return
            if status < 500:
                break
            await asyncio.sleep(1)
        raise RuntimeError(
            f"Pod {obj['metadata']['name']}: status PATCH answered {status} {str(answer)[:200]}"
        )

    return patch


async def wait_pods_running(kube: Kube, expected: int, timeout: float) -> float:
    """Until every Pod is Running (none Pending); seconds waited."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        status, body = await kube.request("GET", "/api/v1/pods?fieldSelector=status.phase%3DPending&limit=1")
        if status == 200 and not body.get("items"):
            return time.monotonic() - start
        await asyncio.sleep(3)
    raise RuntimeError(f"Pods still Pending after {timeout:.0f}s (of {expected})")


async def ensure_namespaces(kube: Kube, names: list[str]) -> None:
    for name in names:
        await kube.request(
            "POST",
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )
    for name in names:  # Pods are refused until the namespace's default ServiceAccount exists
        deadline = time.monotonic() + 60
        while True:
            status, body = await kube.request("GET", f"/api/v1/namespaces/{name}/serviceaccounts/default")
            if status == 200:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"namespace {name}: no default ServiceAccount after 60s ({status} {body})")
            await asyncio.sleep(0.5)


def elastic_quota(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "quota", "namespace": ns},
        "spec": {"min": {"cpu": "100", "memory": "100Gi"}, "max": {"cpu": "100000", "memory": "100000Gi"}},
    }


def pod_group(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"minMember": 10},
    }


# -- the sides ---------------------------------------------------------------------------------


class Run:
    """The manager processes of one side on the shared cluster."""

    def __init__(
        self,
        side: str,
        env: Environment,
        workdir: Path,
        scheduler_plugins: bool,
        level: bench_level.BenchLevel,
        shipped: bool = False,
    ) -> None:
        self.side, self.env, self.kubeconfig, self.workdir = side, env, env.kubeconfig, workdir
        self.level = level
        self.shipped = shipped
        """Each side with its shipped Configuration's ``controller`` and ``clientConnection``
        (ours: 5 TrainJob workers, qps 1000; Go's trainer: qps 500, its shipped TrainJob workers
        never apply, T-2), as the burst runs them; else both at a bare Configuration's defaults."""
        self.hooks: list[tuple[dict[str, Any], int]] = []  # webhook configuration, port serving it
        self.scheduler_plugins = scheduler_plugins
        self.processes: list[Process] = []
        self.metrics: list[burst.Manager] = []
        self.started_at = 0.0

    async def start(self, kube: Kube) -> None:
        base = self.workdir / f"{self.side}-{int(time.time())}"
        base.mkdir(parents=True)
        ca = TinyCA("scale-webhook-ca")
        env = {"KUBECONFIG": str(self.kubeconfig)}
        readiness: list[tuple[Process, int]] = []
        if self.side == "ours":
            overrides = burst.shipped_overrides() if self.shipped else None
            ours = self.level.our_manager(ca, base, self.kubeconfig, overrides)  # every component
            self.processes.append(ours.process)
            self.metrics.append(burst.Manager("trainer-py", 0, f"http://127.0.0.1:{ours.metrics}/metrics"))
            readiness.append((ours.process, ours.health))
            self.hooks = self.level.our_hooks(ours)
        else:
            # the Go defaults for client QPS/burst, as the scale figures were measured, unless shipped
            go = self.level.go_managers(ca, base, self.kubeconfig, client_connection=self.shipped)
            self.processes += [go.jobset, go.trainer]
            token = await burst.metrics_token(harness.Side("theirs", kube, env=self.env))
            self.metrics.append(
                burst.Manager("jobset-go", 0, f"https://127.0.0.1:{go.jobset_metrics}/metrics", token)
            )
            self.metrics.append(
                burst.Manager("trainer-go", 0, f"http://127.0.0.1:{go.trainer_metrics}/metrics")
            )
            readiness += [(go.jobset, go.jobset_health), (go.trainer, go.trainer_health)]
            self.hooks = self.level.their_hooks(go)
            if self.scheduler_plugins and (binary := find_go_main(SCHEDULER_PLUGINS)) is not None:
                sp_metrics, sp_probe = free_port(), free_port()
                sp = Process(
                    name="scheduler-plugins-go",
                    argv=[
                        str(binary),
                        f"--kubeconfig={self.kubeconfig}",
                        f"--metricsAddr=127.0.0.1:{sp_metrics}",
                        f"--probeAddr=127.0.0.1:{sp_probe}",
                    ],
                    log=base / "scheduler-plugins-go.log",
                    extra_env=env,
                )
                self.processes.append(sp)
                self.metrics.append(
                    burst.Manager("scheduler-plugins-go", 0, f"http://127.0.0.1:{sp_metrics}/metrics")
                )
        # The admission webhooks of this side, as a deployment has them (the JobSet defaults
        # come from its mutating webhook), registered before the processes start so that no
        # object is written without them; removed again when the side stops.
        for i, (doc, port) in enumerate(self.hooks):
            hook_file = base / f"webhook-{i:02d}.yaml"
            hook_file.write_text(yaml.safe_dump(doc))
            await self.env.install_webhooks([hook_file], host="127.0.0.1", port=port, ca_bundle=ca.cert_pem)
        self.started_at = time.monotonic()
        for proc in self.processes:
            proc.start(detached=False)
        pids = {p.name: p.pid for p in self.processes}
        for m in self.metrics:
            m.pid = int(pids[m.name] or 0)
        await asyncio.gather(
            *(wait_http(p, f"http://127.0.0.1:{port}/readyz", timeout=600) for p, port in readiness)
        )
        # ... and in effect: the API server calls these configurations, not the stopped side's
        hooks = [doc for doc, _port in self.hooks]
        await webhook_probes.wait_webhooks_effective(self.env, hooks, "default", timeout=120)

    async def stop(self, kube: Kube) -> None:
        for doc, _port in self.hooks:
            if doc.get("kind", "").endswith("WebhookConfiguration"):
                plural = doc["kind"].lower() + "s"
                await kube.request(
                    "DELETE", f"/apis/admissionregistration.k8s.io/v1/{plural}/{doc['metadata']['name']}"
                )
        for proc in reversed(self.processes):
            proc.stop(timeout=20)

    def started_controllers(self) -> dict[str, float]:
        """Controller -> when its ``Starting workers`` line was first seen (seconds since start)."""
        return dict(self._seen)

    _seen: dict[str, float]

    def poll_logs(self) -> None:
        if not hasattr(self, "_seen"):
            self._seen = {}
        now = time.monotonic() - self.started_at
        for proc in self.processes:
            try:
                text = proc.log.read_text(errors="replace")
            except OSError:
                continue
            for match in STARTING.finditer(text):
                self._seen.setdefault(f"{proc.name}/{match.group(1)}", round(now, 2))


def metric_sum(text: str, name: str, **labels: str) -> float:
    return sum(
        v
        for n, lab, v in burst.parse_metrics(text)
        if n == name and all(lab.get(k) == want for k, want in labels.items())
    )


async def scrape_text(session: aiohttp.ClientSession, m: burst.Manager) -> str:
    import ssl

    headers = {"Authorization": f"Bearer {m.token}"} if m.token else {}
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        async with session.get(
            m.url, headers=headers, ssl=ctx if m.url.startswith("https") else False
        ) as resp:
            return await resp.text() if resp.status == 200 else ""
    except aiohttp.ClientError:
        return ""


async def measure(
    run: Run, kube: Kube, trainjobs: int, probe: str | None, quiet_s: float, timeout: float
) -> dict[str, Any]:
    served_before = await burst.apiserver_requests(kube)
    admission_before = await burst.apiserver_histograms(kube)
    applies_before = await apiserver_apply_seconds(kube)
    sync_before = await apiserver_sync_costs(kube)
    await run.start(kube)
    ready_s = round(time.monotonic() - run.started_at, 2)
    # what the sync waited on: the API server's LISTs (by resource) and its CPU, restart → ready
    startup_sync = sync_summary(sync_before, await apiserver_sync_costs(kube))
    startup_sync["manager_cpu_s"] = round(sum(burst.cpu_seconds(m.pid) for m in run.metrics), 2)
    first_reconcile = all_reconciled = None
    async with aiohttp.ClientSession() as session:
        deadline = run.started_at + timeout
        while time.monotonic() < deadline:
            run.poll_logs()
            texts = [await scrape_text(session, m) for m in run.metrics]
            done = sum(
                metric_sum(t, "controller_runtime_reconcile_total", controller=TRAINJOB_CONTROLLER)
                for t in texts
            )
            now = round(time.monotonic() - run.started_at, 2)
            if done >= 1 and first_reconcile is None:
                first_reconcile = now
            if done >= trainjobs:
                all_reconciled = now
                break
            await asyncio.sleep(0.5)
        # what the first reconciles waited on: the API server's time per JobSet apply, and the
        # webhooks' answers within it (mjobset, vjobset), from the restart to the last first pass
        admission = burst.admission_summary(
            burst.histogram_delta(await burst.apiserver_histograms(kube), admission_before)
        )
        applies = await apiserver_apply_seconds(kube)
        apply_n = applies[1] - applies_before[1]
        apply_mean_ms = round(1000 * (applies[0] - applies_before[0]) / apply_n, 1) if apply_n else None
        # steady: CPU quiet for quiet_s (under 5 % of a core), at most 120 s more
        pids = [m.pid for m in run.metrics]
        cpu = sum(burst.cpu_seconds(p) for p in pids)
        quiet_since = time.monotonic()
        give_up = time.monotonic() + 120
        while time.monotonic() < give_up:
            await asyncio.sleep(1)
            run.poll_logs()
            now_cpu = sum(burst.cpu_seconds(p) for p in pids)
            if now_cpu - cpu > 0.05:
                quiet_since = time.monotonic()
            cpu = now_cpu
            if time.monotonic() - quiet_since >= quiet_s:
                break
        steady_s = round(time.monotonic() - run.started_at, 2)
        rss = {m.name: round(burst.rss_mb(m.pid), 1) for m in run.metrics}
        peak = {m.name: round(burst.peak_rss_mb(m.pid), 1) for m in run.metrics}
        cpu_s = {m.name: round(burst.cpu_seconds(m.pid), 2) for m in run.metrics}
        scraped = [burst.summarise(burst.parse_metrics(await scrape_text(session, m))) for m in run.metrics]
        requests: dict[str, int] = {}
        for s in scraped:
            for verb, v in s["requests"].items():
                requests[verb] = requests.get(verb, 0) + int(v)
        errors = {m.name: int(sum(s["errors"].values())) for m, s in zip(run.metrics, scraped, strict=True)}
        # every client's writes the API server served meanwhile, by verb and resource: which
        # objects the managers wrote (the bench's own clients are idle in this window; KWOK's
        # node heartbeats are in it)
        served = await burst.apiserver_requests(kube)
        writes = {
            key: int(n - served_before.get(key, 0.0))
            for key, n in sorted(served.items())
            if key.split(" ")[0] in ("POST", "PUT", "PATCH", "APPLY", "DELETE")
            and n > served_before.get(key, 0.0)
        }
        latency = await probe_latency(kube, probe, run.level) if probe else None
    controllers = run.started_controllers()
    await run.stop(kube)
    pod_started = [v for k, v in controllers.items() if k.endswith("/pod")]
    return {
        "side": run.side,
        "processes": [m.name for m in run.metrics],
        "ready_s": ready_s,
        "caches_synced_s": max(controllers.values()) if controllers else None,
        "pod_controller_synced_s": max(pod_started) if pod_started else None,
        "controllers_started": controllers,
        "first_trainjob_reconcile_s": first_reconcile,
        "all_trainjobs_reconciled_s": all_reconciled,
        "steady_at_s": steady_s,
        "rss_mb": rss,
        "rss_mb_total": round(sum(rss.values()), 1),
        "peak_rss_mb_total": round(sum(peak.values()), 1),
        "cpu_s_total": round(sum(cpu_s.values()), 2),
        "requests_by_verb": dict(sorted(requests.items())),
        "apiserver_writes_by_resource": writes,
        "requests_total": sum(requests.values()),
        "reconcile_errors": errors,
        "probe": latency,
        "startup_jobset_applies": {"count": int(apply_n), "mean_ms": apply_mean_ms},
        "startup_admission": admission,
        "startup_sync": startup_sync,
    }


async def apiserver_apply_seconds(kube: Kube) -> tuple[float, float]:
    """The API server's ``apiserver_request_duration_seconds`` sum and count of JobSet APPLYs
    so far (webhooks included: the API server calls them inside the request)."""
    total = count = 0.0
    for name, labels, value in await burst.apiserver_metrics(kube):
        if labels.get("verb") != "APPLY" or labels.get("resource") != "jobsets" or labels.get("subresource"):
            continue
        if name == "apiserver_request_duration_seconds_sum":
            total += value
        elif name == "apiserver_request_duration_seconds_count":
            count += value
    return total, count


async def apiserver_sync_costs(kube: Kube) -> dict[str, float]:
    """The API server's own figures a cache sync costs it: ``LIST <resource>`` duration sums and
    counts (``apiserver_request_duration_seconds``) and its ``process_cpu_seconds_total``."""
    out: dict[str, float] = {}
    for name, labels, value in await burst.apiserver_metrics(kube):
        if name == "process_cpu_seconds_total":
            out["cpu"] = value
        elif labels.get("verb") == "LIST" and name.startswith("apiserver_request_duration_seconds_"):
            field = name.rsplit("_", 1)[1]
            if field in ("sum", "count"):
                key = f"{labels.get('resource', '?')} {field}"
                out[key] = out.get(key, 0.0) + value
    return out


def sync_summary(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """Per listed resource: the LISTs served between the two scrapes and the API server's mean
    time each; and its CPU seconds meanwhile (every client's work, KWOK's heartbeats included)."""
    lists: dict[str, dict[str, float]] = {}
    for key in after:
        resource, _, field = key.rpartition(" ")
        if field != "count" or after[key] <= before.get(key, 0.0):
            continue
        n = after[key] - before.get(key, 0.0)
        spent = after[f"{resource} sum"] - before.get(f"{resource} sum", 0.0)
        lists[resource] = {"count": int(n), "sum_s": round(spent, 2), "mean_ms": round(1000 * spent / n, 1)}
    return {"apiserver_cpu_s": round(after.get("cpu", 0.0) - before.get("cpu", 0.0), 2), "lists": lists}


async def probe_latency(kube: Kube, name: str, level: bench_level.BenchLevel) -> dict[str, Any]:
    """One suspended TrainJob into the full cluster: seconds to its JobSet and to its Job."""
    watcher = burst.Watcher(kube)
    watcher.start()
    while watcher.ready < 2:  # noqa: ASYNC110
        await asyncio.sleep(0.1)
    await asyncio.sleep(2)  # the initial ADDED events of what exists
    start = time.monotonic()
    status, body = await kube.create(level.trainjob(name, NS, True), NS)
    created = time.monotonic()
    if status != 201:
        await watcher.stop()
        return {"error": f"{status} {str(body)[:200]}"}
    while time.monotonic() - start < 120 and (name not in watcher.jobsets or name not in watcher.jobs):  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    await watcher.stop()
    result = {
        "to_jobset_s": round(watcher.jobsets[name] - created, 3) if name in watcher.jobsets else None,
        "to_job_s": round(watcher.jobs[name] - created, 3) if name in watcher.jobs else None,
    }
    await kube.request(
        "DELETE",
        f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NS}/trainjobs/{name}",
        {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
    )
    return result


# -- the scenario ------------------------------------------------------------------------------


async def scenario(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="scale-"))
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    level = bench_level.get(args.level)
    if "theirs" in sides:
        level.originals().build()
        if args.scheduler_plugins:
            try:
                ensure_go_main(SCHEDULER_PLUGINS)
            except Exception as err:
                say(f"scheduler-plugins controller not built: {err}")
    env = Environment(
        workdir / "cluster",
        full=True,
        nodes=0,
        crd_paths=level.crds(),
        kwok_args=KWOK_ARGS,
        controller_manager_args=KCM_ARGS,
    )
    say(f"starting the control plane (level {level.name}) in {workdir}")
    await env.start()
    kube = await Kube.from_kubeconfig(env.kubeconfig)
    results: dict[str, Any] = {
        "params": vars(args) | {"out": str(args.out)},
        "level": level.name,
        "states": {},
    }
    try:
        n_rel = int(args.pods * args.relevant)
        n_unrel = args.pods - n_rel
        namespaces = [f"apps-{i}" for i in range(args.namespaces)]
        await ensure_namespaces(kube, [NS, *namespaces])
        await post_all(kube, lambda _o: "/api/v1/nodes", [node(i) for i in range(args.nodes)], "nodes")
        await env.apply_manifests(level.runtimes(), field_manager="scale")
        quotas = [elastic_quota(ns) for ns in [NS, *namespaces]]
        await post_all(
            kube,
            lambda o: (
                f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{o['metadata']['namespace']}/elasticquotas"
            ),
            quotas,
            "ElasticQuotas",
        )
        tjs = [level.trainjob(f"scale-{i:05d}", NS, True) for i in range(args.trainjobs)]
        await post_all(
            kube,
            lambda _o: f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NS}/trainjobs",
            tjs,
            "TrainJobs",
        )
        say("warm-up: our manager creates the TrainJobs' JobSets and Jobs")
        warm = Run("ours", env, workdir, False, level, args.shipped)
        results["warmup"] = await measure(warm, kube, args.trainjobs, None, args.quiet, args.timeout)

        wanted = (
            {tuple(m.split(":", 1)) for m in args.measure.split(",") if m.strip()} if args.measure else None
        )

        async def measure_all(state: str, probe: bool) -> None:
            results["states"][state] = {}
            for side in sides:
                if wanted is not None and (state, side) not in wanted:
                    continue
                say(f"{state}: measuring {side}")
                run = Run(side, env, workdir, args.scheduler_plugins, level, args.shipped)
                r = await measure(
                    run,
                    kube,
                    args.trainjobs,
                    f"probe-{side}-{state.lower()}" if probe else None,
                    args.quiet,
                    args.timeout,
                )
                results["states"][state][side] = r
                say(json.dumps(r))
                await asyncio.sleep(5)  # the probe's JobSet and Jobs go away

        if not args.final_only:
            await measure_all("S0", False)
        pods, groups = relevant_pods(n_rel, args.nodes)
        await post_all(
            kube,
            lambda _o: f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups",
            [pod_group(g) for g in groups],
            "PodGroups",
        )
        running = mark_running(kube)
        await post_all(kube, pod_path, pods, "relevant Pods", running)
        say(f"relevant Pods Running after {await wait_pods_running(kube, n_rel, args.timeout):.0f}s more")
        if not args.final_only:
            await measure_all("S1", False)
        chunk = 20000  # generated and created in chunks: 100k Pod dicts at once are 1 GB here
        for offset in range(0, n_unrel, chunk):
            part = unrelated_pods(min(chunk, n_unrel - offset), args.nodes, args.namespaces, offset)
            await post_all(kube, pod_path, part, f"unrelated Pods ({offset + len(part)}/{n_unrel})", running)
        say(
            f"unrelated Pods Running after {await wait_pods_running(kube, args.pods, args.timeout):.0f}s more"
        )
        await measure_all("S2", True)
        results["pods"] = {"relevant": n_rel, "unrelated": n_unrel}
    finally:
        await kube.close()
        await env.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return results


# -- the report ----------------------------------------------------------------------------------


def derive(results: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    states = results["states"]
    n_rel, n_unrel = results["pods"]["relevant"], results["pods"]["unrelated"]
    out: dict[str, dict[str, float | None]] = {}
    for side in states.get("S2", {}):
        s2 = states["S2"][side]["rss_mb_total"]
        s1 = states.get("S1", {}).get(side, {}).get("rss_mb_total")
        s0 = states.get("S0", {}).get(side, {}).get("rss_mb_total")
        kb = 1024.0
        out[side] = {
            "kb_per_relevant_pod": round((s1 - s0) * kb / n_rel, 2)
            if s0 is not None and s1 is not None and n_rel
            else None,
            "kb_per_unrelated_pod": round((s2 - s1) * kb / n_unrel, 2)
            if s1 is not None and n_unrel
            else None,
            "kb_per_pod": round((s2 - s0) * kb / (n_rel + n_unrel), 2) if s0 is not None else None,
        }
    return out


def _cell(v: Any) -> str:
    return "n/a" if v is None else f"{v:g}" if isinstance(v, (int, float)) else str(v)


def _sync(run: dict[str, Any], key: str) -> Any:
    return (run.get("startup_sync") or {}).get(key)


def _pod_lists(run: dict[str, Any]) -> str | None:
    pods = ((run.get("startup_sync") or {}).get("lists") or {}).get("pods")
    return f"{pods['count']} · {pods['mean_ms']:g}" if pods else None


def table(results: dict[str, Any], command: str) -> str:
    s2 = results["states"]["S2"]
    sides = [s for s in ("ours", "theirs") if s in s2]
    per = derive(results)
    names = {"ours": "ours", "theirs": " + ".join(s2["theirs"]["processes"]) if "theirs" in s2 else "Go"}
    rows: list[tuple[str, list[Any]]] = [
        ("readyz (s)", [s2[s]["ready_s"] for s in sides]),
        ("every controller's caches synced (s)", [s2[s]["caches_synced_s"] for s in sides]),
        ("Pod controller's caches synced (s)", [s2[s]["pod_controller_synced_s"] for s in sides]),
        ("first TrainJob reconcile (s)", [s2[s]["first_trainjob_reconcile_s"] for s in sides]),
        ("every TrainJob reconciled once (s)", [s2[s]["all_trainjobs_reconciled_s"] for s in sides]),
        ("until ready: manager CPU (s)", [_sync(s2[s], "manager_cpu_s") for s in sides]),
        ("until ready: API server CPU (s)", [_sync(s2[s], "apiserver_cpu_s") for s in sides]),
        ("until ready: LIST pods served · API server's mean (ms)", [_pod_lists(s2[s]) for s in sides]),
        ("steady RSS (MB)", [s2[s]["rss_mb_total"] for s in sides]),
        ("peak RSS (MB)", [s2[s]["peak_rss_mb_total"] for s in sides]),
    ]
    for state in ("S0", "S1"):
        if state in results["states"]:
            rows.append(
                (
                    f"steady RSS at {state} (MB)",
                    [results["states"][state].get(s, {}).get("rss_mb_total") for s in sides],
                )
            )
    rows += [
        ("RSS per relevant Pod (KB)", [per[s]["kb_per_relevant_pod"] for s in sides]),
        ("RSS per unrelated Pod (KB)", [per[s]["kb_per_unrelated_pod"] for s in sides]),
        ("CPU until steady (s)", [s2[s]["cpu_s_total"] for s in sides]),
        ("API requests until steady", [s2[s]["requests_total"] for s in sides]),
    ]
    for verb in sorted({v for s in sides for v in s2[s]["requests_by_verb"]}):
        rows.append((f"  {verb}", [s2[s]["requests_by_verb"].get(verb, 0) for s in sides]))
    rows += [
        ("one TrainJob to JobSet (s)", [(s2[s]["probe"] or {}).get("to_jobset_s") for s in sides]),
        ("one TrainJob to Job (s)", [(s2[s]["probe"] or {}).get("to_job_s") for s in sides]),
        ("reconcile errors", [sum(s2[s]["reconcile_errors"].values()) for s in sides]),
    ]
    head = ["", *(names[s] for s in sides)] + (["ours / Go"] if len(sides) == 2 else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, values in rows:
        cells = [label, *(_cell(v) for v in values)]
        if len(sides) == 2:
            a, b = values
            cells.append(
                f"{a / b:.2f}x"
                if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b
                else "n/a"
            )
        lines.append("| " + " | ".join(cells) + " |")
    p = results["params"]
    pods = results["pods"]
    level = results.get("level", bench_level.UNRECORDED)
    return (
        f"API level {level}: {p['nodes']} KWOK nodes, {pods['relevant'] + pods['unrelated']} Running Pods "
        f"({pods['relevant']} of JobSets/PodGroups, {pods['unrelated']} unrelated), "
        f"{p['trainjobs']} suspended TrainJobs with their JobSets and Jobs, {p['namespaces'] + 1} ElasticQuotas.\n"
        f"Command: `{command}`\n\n" + "\n".join(lines) + "\n"
    )


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100000)
    parser.add_argument("--relevant", type=float, default=0.1, help="fraction of Pods of JobSets/PodGroups")
    parser.add_argument("--trainjobs", type=int, default=1000)
    parser.add_argument("--namespaces", type=int, default=20, help="namespaces of the unrelated Pods")
    parser.add_argument("--sides", default="ours,theirs")
    parser.add_argument(
        "--scheduler-plugins", action="store_true", help="add the Go scheduler-plugins controller to theirs"
    )
    parser.add_argument("--final-only", action="store_true", help="measure S2 only (no per-Pod RSS)")
    parser.add_argument(
        "--shipped",
        action="store_true",
        help="each side with its shipped controller and clientConnection settings (ours 5 TrainJob "
        "workers, qps 1000; Go's trainer qps 500), as the burst; default: a bare Configuration's",
    )
    parser.add_argument(
        "--measure",
        default="",
        help="only these runs, e.g. S1:ours,S2:ours,S2:theirs (a loaded machine: RSS per unrelated "
        "Pod of ours and the S2 comparison, without S0 and Go's S1); default every state and side",
    )
    parser.add_argument("--quiet", type=float, default=8.0, help="seconds of quiet CPU that count as steady")
    parser.add_argument("--timeout", type=float, default=1800.0)
    bench_level.add_argument(parser)
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    command = "python test/bench/scale.py " + " ".join(argv if argv is not None else sys.argv[1:])
    burst.PROGRESS.unit = None  # one cluster, its states measured in turn (the last said names it)
    return longrun.command(burst.PROGRESS, lambda: run_scale(args, command))


def run_scale(args: argparse.Namespace, command: str) -> int:
    results = longrun.run_async(scenario(args))
    results["per_pod"] = derive(results)
    args.out.mkdir(parents=True, exist_ok=True)
    level = bench_level.get(args.level)
    stem = f"scale-{args.pods}"
    (args.out / level.result_name(stem, ".json")).write_text(json.dumps(results, indent=2) + "\n")
    report = table(results, command.strip())
    (args.out / level.result_name(stem, ".md")).write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
