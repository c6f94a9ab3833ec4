"""The chaos run: a full local cluster, two leader-elected managers behind a fault-injecting
proxy, a mixed workload in flight, and faults at random points; then the end-state checks and
the figures.

It runs at one API level (``Params.level``, ``LEVELS``): the cluster holds that level's CRDs, the
managers run ``--api-level=<level>`` behind the level's webhook configurations, and the workload
is the level's (``workload_v2_1.py``, ``workload_v2_3.py``) on the level's shipped runtimes.

Faults (in a shuffled order with random gaps, while the workload is still being created and
running): kube-apiserver SIGKILLed and restarted on the same port and etcd; etcd compacted and
every open watch ended with 410 Gone (each informer must relist); the leader manager
SIGKILLed (failover timed from the kill to the other replica holding the Lease, then the
killed one restarted, as a Deployment would); a window of proxy faults (429 + Retry-After,
500, dropped connections before and after the write, slow answers). A manager that exits on
its own is restarted too and counted: exiting on a lost lease is designed, anything else is a
crash and fails the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import itertools
import json
import os
import random
import re
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from faultproxy import FaultPlan, FaultProxy, TcpForwarder
from workload import (
    Item,
    JobHistory,
    LevelWorkload,
    Snapshot,
    build,
    events_per_object,
    finished_path_absent,
    history_problems,
    jobset_state,
    problems,
    settled_problems,
)
from workload_v2_1 import V2_1
from workload_v2_3 import V2_3

from manager.envtest import Environment
from manager.envtest.certs import TinyCA
from manager.envtest.process import free_port
from trainer import levels
from trainer.conformance import harness as conformance
from trainer.conformance.webhook_probes import configurations, wait_webhooks_effective

ROOT = Path(__file__).resolve().parents[2]
Json = dict[str, Any]
NS = "chaos"
LEASE_NS = "chaos-system"
LEASE = "chaos-trainer-leader"
# the event sources of the manager's controllers (TrainJob, JobSet, PodGroup, ElasticQuota)
OURS = frozenset({"trainer-trainjob-controller", "jobset", "PodGroupController", "ElasticQuotaController"})
# The managers log at debug by default, so a failed run's logs name every Job the JobSet controller
# created or deleted and every reconcile (`CHAOS_LOG_LEVEL=info` for the leaner product default).
LOG_LEVEL = os.environ.get("CHAOS_LOG_LEVEL", "debug")
JOB_POLL_SECONDS = 1.0
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class ChaosLevel:
    """What a run at one API level installs and creates (one stack per level, as test/e2e/kueue)."""

    workload: LevelWorkload
    crds: Callable[[], list[Path]]
    """The CRDs the cluster serves (the scheduler-plugins kinds included)."""
    webhooks: Callable[[], list[Json]]
    """The level's webhook configurations (before they are limited to the run's namespace)."""


def _v2_1_webhooks() -> list[Json]:
    return configurations(sorted((ROOT / "config" / "webhook").glob("*.yaml")))


LEVELS: dict[str, ChaosLevel] = {
    # config/crd, config/webhook and config/runtimes, as the suite ran before levels
    "v2.1": ChaosLevel(V2_1, lambda: [ROOT / "config" / "crd"], _v2_1_webhooks),
    # config/overlays/v2.3's CRDs (+ PodGroup/ElasticQuota) and webhook configurations, the TrainJob
    # defaulter included (what the conformance harness installs at the level)
    "v2.3": ChaosLevel(
        V2_3,
        lambda: conformance.LevelInputs(levels.get("v2.3")).our_crds(),
        lambda: conformance.LevelInputs(levels.get("v2.3")).our_webhooks(),
    ),
}


def for_namespace(docs: list[Json], namespace: str) -> list[Json]:
    """The webhook configurations with every namespaced webhook limited to ``namespace`` (the
    ClusterTrainingRuntime webhook keeps its cluster scope)."""
    out = copy.deepcopy(docs)
    for doc in out:
        for hook in doc.get("webhooks", []):
            if hook["name"] != "validator.clustertrainingruntime.trainer.kubeflow.org":
                hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    return out


@dataclass
class Params:
    level: str = "v2.1"
    """The API level of the cluster, the managers and the workload (``LEVELS``)."""
    trainjobs: int = 500
    jobsets: int = 50
    podgroups: int = 25
    apiserver_restarts: int = 5
    compactions: int = 2
    leader_kills: int = 2
    fault_window_seconds: float = 45.0
    nodes: int = 10
    pod_run_seconds: float = 20.0
    pod_jitter_seconds: float = 20.0
    lease_duration: float = 10.0
    renew_deadline: float = 7.0
    retry_period: float = 1.0
    converge_timeout: float = 1200.0
    max_events_per_object: int = 20
    gap_seconds: tuple[float, float] = (3.0, 10.0)
    deadline_seconds: float = 60.0
    """``activeDeadlineSeconds`` of the TrainJobs that must expire (level v2.3), counted from
    their creation: shorter than the faults last, so most expire while they run."""
    update_gap_seconds: tuple[float, float] = (3.0, 10.0)
    """Before each of an item's updates (level v2.3: a runtime patch changed while suspended,
    then the resume)."""
    seed: int = field(default_factory=lambda: int(os.environ.get("CHAOS_SEED", random.randrange(1 << 30))))


# -- one manager replica ---------------------------------------------------------------------


class Replica:
    """``python -m trainer`` with leader election, through the proxy; restartable."""

    def __init__(self, name: str, directory: Path, kubeconfig: Path, ca: TinyCA, params: Params) -> None:
        self.name = name
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.kubeconfig = kubeconfig
        self.webhook_port = free_port()
        self.health_port = free_port()
        self.metrics_port = free_port()
        ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
            self.dir / "tls.crt", self.dir / "tls.key"
        )
        # the shipped Configuration (controller concurrency, client QPS, ...) with this
        # replica's loopback ports, plain-HTTP metrics, certificates from a file and the
        # suite's lease timings
        config = shipped_configuration()
        config |= {
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{self.metrics_port}", "secureServing": False},
            "webhook": {"port": self.webhook_port, "host": "127.0.0.1"},
            "certManagement": {"enable": False},
            "leaderElection": {
                "leaderElect": True,
                "resourceName": LEASE,
                "resourceNamespace": LEASE_NS,
                "leaseDuration": f"{params.lease_duration}s",
                "renewDeadline": f"{params.renew_deadline}s",
                "retryPeriod": f"{params.retry_period}s",
            },
        }
        (self.dir / "config.yaml").write_text(yaml.safe_dump(config))
        self.level = params.level
        self.proc: asyncio.subprocess.Process | None = None
        self.incarnation = 0
        self.killed = False
        self.metrics: dict[int, str] = {}  # last scrape per incarnation
        self.exits: list[tuple[int, int | None, float]] = []  # (incarnation, code, wall time)

    @property
    def log(self) -> Path:
        return self.dir / f"manager-{self.incarnation}.log"

    def logs(self) -> list[Path]:
        return sorted(self.dir.glob("manager-*.log"))

    async def start(self) -> None:
        self.incarnation += 1
        # `killed` stays True until the new process exists: the supervisor must not take the
        # old, SIGKILLed process for a crash while this one is being spawned
        with self.log.open("wb") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "trainer",
                f"--config={self.dir / 'config.yaml'}",
                f"--kubeconfig={self.kubeconfig}",
                f"--webhook-cert-dir={self.dir}",
                # as the shipped Deployments of both levels name theirs
                f"--api-level={self.level}",
                "--log-format=json",
                f"--zap-log-level={LOG_LEVEL}",
                cwd=ROOT,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
            )
        self.killed = False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def kill(self) -> float:
        assert self.proc is not None
        self.killed = True
        self.proc.send_signal(signal.SIGKILL)
        t = time.time()
        await self.proc.wait()
        self.exits.append((self.incarnation, self.proc.returncode, t))
        return t

    async def terminate(self) -> int | None:
        if not self.alive():
            return self.proc.returncode if self.proc else None
        assert self.proc is not None
        self.killed = True
        self.proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(self.proc.wait(), 60)
        self.exits.append((self.incarnation, code, time.time()))
        return code

    def identity(self) -> str | None:
        for line in _lines(self.log):
            if line.get("msg") == "attempting to acquire leader lease":
                return str(line.get("identity"))
        return None

    async def scrape(self, http: aiohttp.ClientSession) -> None:
        if not self.alive():
            return
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            async with http.get(
                f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=aiohttp.ClientTimeout(total=5)
            ) as r:
                if r.status == 200:
                    self.metrics[self.incarnation] = await r.text()

    async def scrape_final(self) -> None:
        async with aiohttp.ClientSession() as http:
            await self.scrape(http)


def shipped_configuration() -> Json:
    """The Configuration of config/manager/config.yaml (what a deployment runs)."""
    cm = yaml.safe_load((ROOT / "config" / "manager" / "config.yaml").read_text())
    config: Json = yaml.safe_load(cm["data"]["controller_manager_config.yaml"])
    return config


def _lines(path: Path) -> list[Json]:
    out = []
    with contextlib.suppress(OSError):
        for raw in path.read_text(errors="replace").splitlines():
            if raw.startswith("{"):
                with contextlib.suppress(json.JSONDecodeError):
                    out.append(json.loads(raw))
    return out


def _epoch(ts: Any) -> float:
    """A log line's ``ts``: epoch seconds, or RFC 3339 with nanoseconds (--zap-time-encoding)."""
    if isinstance(ts, int | float):
        return float(ts)
    text = str(ts).replace("Z", "+00:00")
    if "." in text:  # fromisoformat takes at most microseconds
        head, rest = text.split(".", 1)
        digits = "".join(itertools.takewhile(str.isdigit, rest))
        text = f"{head}.{digits[:6]}{rest[len(digits) :]}"
    return datetime.datetime.fromisoformat(text).timestamp()


_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:]+)\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+-]+)$")


def metric_sum(texts: list[str], name: str, **match: str) -> dict[str, float]:
    """Sum of ``name`` samples over the texts, keyed by the label ``by`` (``match['by']``)."""
    by = match.pop("by", "")
    out: Counter[str] = Counter()
    for text in texts:
        for line in text.splitlines():
            m = _SAMPLE.match(line)
            if not m or m["name"] != name:
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m["labels"]))
            if any(labels.get(k) != v for k, v in match.items()):
                continue
            out[labels.get(by, "")] += float(m["value"])
    return dict(out)


# -- the run ---------------------------------------------------------------------------------


@dataclass
class Figures:
    level: str = ""
    seed: int = 0
    params: Json = field(default_factory=dict)
    objects_created: Json = field(default_factory=dict)
    faults: Json = field(default_factory=dict)
    fault_log: list[str] = field(default_factory=list)
    apiserver_down_seconds: list[float] = field(default_factory=list)
    failover_seconds: list[float] = field(default_factory=list)
    failover_target_seconds: float = 0.0
    relists_after_expiry: list[Json] = field(default_factory=list)
    lease_loss_restarts: int = 0
    crashes: list[str] = field(default_factory=list)
    leader_overlaps: list[str] = field(default_factory=list)
    converge_seconds_after_last_fault: float = 0.0
    run_seconds: float = 0.0
    rest_requests_by_code: Json = field(default_factory=dict)
    retried_429_in_client: float = 0.0
    workqueue_retries: float = 0.0
    reconcile_errors: float = 0.0
    proxy_requests: int = 0
    max_events_per_object: int = 0
    max_events_object: str = ""
    events_total: int = 0
    events_all_components: int = 0
    max_events_any_component: str = ""
    problems: list[str] = field(default_factory=list)
    diagnosis: list[str] = field(default_factory=list)
    # Jobs a Completed JobSet lacks by design (workload.finished_path_absent), by what the polls saw
    finished_path_jobs: Json = field(default_factory=dict)
    finished_path_details: list[str] = field(default_factory=list)
    # level v2.3: when the TrainJobs with a short activeDeadlineSeconds failed, against the faults
    deadlines_expired: Json = field(default_factory=dict)
    updates_applied: int = 0
    pvcs_created: int = 0

    def table(self) -> str:
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items()))
        lines = [
            f"chaos run at level {self.level} (seed {self.seed}): {self.objects_created}",
            f"  faults injected: {faults}",
            f"  kube-apiserver down (s): {[round(x, 1) for x in self.apiserver_down_seconds]}",
            f"  leader failover (s): {[round(x, 1) for x in self.failover_seconds]} "
            f"(target < {self.failover_target_seconds:.0f})",
            f"  relists after watch expiry: {self.relists_after_expiry}",
            f"  restarts after a lost lease: {self.lease_loss_restarts}; crashes: {len(self.crashes)}",
            f"  time to converge after the last fault: {self.converge_seconds_after_last_fault:.1f} s "
            f"(whole run {self.run_seconds:.0f} s)",
            f"  manager requests by code: {self.rest_requests_by_code}",
            f"  retried: {self.retried_429_in_client:.0f} throttled requests (429, in the client), "
            f"{self.workqueue_retries:.0f} requeues (workqueue_retries_total), "
            f"{self.reconcile_errors:.0f} reconcile errors",
            f"  proxy requests: {self.proxy_requests}",
            f"  Jobs absent by JobSet's finished path (an MPI node outlived by its launcher): "
            f"{self.finished_path_jobs}",
            f"  deadlines expired (DeadlineExceeded): {self.deadlines_expired}; updates applied "
            f"(runtime patch while suspended, resume): {self.updates_applied}; PVCs created: {self.pvcs_created}",
            f"  events: {self.events_total} by the manager, at most {self.max_events_per_object} "
            f"per object ({self.max_events_object}); {self.events_all_components} by every component, "
            f"at most {self.max_events_any_component} per object",
        ]
        return "\n".join(lines)


class ChaosRun:
    def __init__(self, params: Params, work: Path) -> None:
        self.p = params
        self.work = work
        self.rng = random.Random(params.seed)
        # the updates' own draws: the faults' order and gaps stay those of the seed
        self.update_rng = random.Random(params.seed + 1)
        self.level = LEVELS[params.level]
        self.fig = Figures(
            level=params.level,
            seed=params.seed,
            params=asdict(params),
            failover_target_seconds=params.lease_duration + 5,
        )
        self.items = build(
            NS,
            params.trainjobs,
            params.jobsets,
            params.podgroups,
            self.level.workload,
            deadline_seconds=params.deadline_seconds,
        )
        self.replicas: list[Replica] = []
        self.t0 = time.monotonic()
        self.job_history = JobHistory()
        self.jobset_history = JobHistory()
        self.pvc_history = JobHistory()
        self.faults_wall: tuple[float, float] = (0.0, 0.0)

    def note(self, text: str) -> None:
        line = f"[{time.monotonic() - self.t0:7.1f}s] {text}"
        self.fig.fault_log.append(line)
        print(line, flush=True)

    # -- admin requests (directly to the API server, retried through its restarts) ------------

    async def admin(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        ok: tuple[int, ...] = (),
        content_type: str = "application/json",
    ) -> tuple[int, Any]:
        deadline = time.monotonic() + 300
        while True:
            try:
                status, data = await self.env.request(method, path, body, content_type=content_type)
            except (aiohttp.ClientError, TimeoutError, OSError):
                status, data = 0, None
            if (status < 300 and status != 0) or status in ok:
                return status, data
            if status in (400, 403, 404, 422) and status not in ok:
                raise AssertionError(f"{method} {path}: {status} {data}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{method} {path} kept failing: {status} {data}")
            await asyncio.sleep(0.5)

    @staticmethod
    def collection(obj: Json) -> str:
        api = obj["apiVersion"]
        base = f"/apis/{api}" if "/" in api else f"/api/{api}"
        plural = {
            "TrainJob": "trainjobs",
            "JobSet": "jobsets",
            "PodGroup": "podgroups",
            "Job": "jobs",
            "PersistentVolume": "persistentvolumes",
        }[obj["kind"]]
        namespace = obj["metadata"].get("namespace")
        return f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"

    async def create(self, obj: Json) -> None:
        path = self.collection(obj)
        status, body = await self.admin("POST", path, obj, ok=(409, 422))
        if status == 422:
            # a create retried after kube-apiserver died answering it: the JobSet webhook refuses a
            # JobSet whose claims already exist (its controller made them meanwhile); it was created
            got, _ = await self.admin("GET", f"{path}/{obj['metadata']['name']}", ok=(404,))
            assert got == 200, f"POST {path}: 422 {body}"

    async def apply_updates(self, item: Item) -> None:
        """The item's merge patches, each a few seconds after the previous step."""
        path = f"{self.collection(item.objects[-1])}/{item.name}"
        for patch in item.updates:
            await asyncio.sleep(self.update_rng.uniform(*self.p.update_gap_seconds))
            await self.admin("PATCH", path, patch, content_type=MERGE_PATCH)
            self.fig.updates_applied += 1

    async def list(self, path: str) -> list[Json]:
        _, body = await self.admin("GET", path)
        return list(body["items"])

    async def snapshot(self) -> Snapshot:
        ns = f"/namespaces/{NS}"

        def by_name(items: list[Json]) -> dict[str, Json]:
            return {o["metadata"]["name"]: o for o in items}

        return Snapshot(
            trainjobs=by_name(await self.list(f"/apis/trainer.kubeflow.org/v1alpha1{ns}/trainjobs")),
            jobsets=by_name(await self.list(f"/apis/jobset.x-k8s.io/v1alpha2{ns}/jobsets")),
            jobs=by_name(await self.list(f"/apis/batch/v1{ns}/jobs")),
            podgroups=by_name(await self.list(f"/apis/scheduling.x-k8s.io/v1alpha1{ns}/podgroups")),
            pods=await self.list(f"/api/v1{ns}/pods"),
            secrets=await self.list(f"/api/v1{ns}/secrets"),
            configmaps=await self.list(f"/api/v1{ns}/configmaps"),
            events=await self.list(f"/api/v1{ns}/events"),
            pvcs=await self.list(f"/api/v1{ns}/persistentvolumeclaims"),
        )

    # -- lease ---------------------------------------------------------------------------------

    async def holder(self) -> str:
        try:
            status, body = await self.env.request(
                "GET", f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases/{LEASE}"
            )
        except (aiohttp.ClientError, TimeoutError, OSError):
            return ""
        return str((body or {}).get("spec", {}).get("holderIdentity") or "") if status == 200 else ""

    async def leader(self, timeout: float = 120) -> Replica:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            holder = await self.holder()
            for r in self.replicas:
                if holder and r.alive() and r.identity() == holder:
                    return r
            await asyncio.sleep(0.2)
        raise AssertionError("no live replica holds the lease")

    # -- faults --------------------------------------------------------------------------------

    async def restart_apiserver(self) -> None:
        down = self.rng.uniform(0, 3)
        seconds = await self.env.restart_apiserver(kill=True, down_seconds=down)
        self.fig.apiserver_down_seconds.append(seconds)
        self.note(f"kube-apiserver SIGKILLed and restarted (unreachable {seconds:.1f} s)")

    def relist_lines(self) -> int:
        return sum(
            1
            for r in self.replicas
            for log in r.logs()
            for line in _lines(log)
            if "expired at rv" in str(line.get("msg", ""))
        )

    async def compact_and_expire(self) -> None:
        before = self.relist_lines()
        revision = await self.env.compact_etcd()
        expired = self.proxy.expire_watches()
        self.note(f"etcd compacted at revision {revision}; {expired} open watches ended with 410 Gone")
        deadline = time.monotonic() + 60
        while True:
            if self.relist_lines() - before >= expired or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        relisted = self.relist_lines() - before
        self.fig.relists_after_expiry.append({"expired": expired, "relisted": relisted})
        assert relisted >= expired, f"{expired} watches expired but only {relisted} relists logged"

    def observing_since(self, r: Replica) -> float | None:
        """When this incarnation started watching the lease (its first acquire attempt)."""
        for line in _lines(r.log):
            if line.get("msg") == "attempting to acquire leader lease":
                return _epoch(line["ts"])
        return None

    async def warm_standby(self, leader: Replica) -> None:
        """Wait until every other replica has watched the lease for one lease duration: a
        candidate takes over only after seeing the record unchanged for ``leaseDuration`` from
        its *first* read (client-go's rule), so a replica started a moment before the leader
        dies cannot meet the failover target, whatever the code does."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            since = [self.observing_since(r) for r in self.replicas if r is not leader]
            if all(s is not None and time.time() - s >= self.p.lease_duration for s in since):
                return
            await asyncio.sleep(0.5)
        last = (
            f"; last of {len(self.fig.crashes)} crashes: {self.fig.crashes[-1][-800:]}"
            if self.fig.crashes
            else ""
        )
        raise AssertionError(f"the standby replica never started watching the lease{last}")

    async def kill_leader(self) -> None:
        leader = await self.leader()
        await self.warm_standby(leader)
        leader = await self.leader()  # (it may have changed meanwhile)
        others = [r for r in self.replicas if r is not leader]
        await leader.kill()
        start = time.monotonic()
        self.note(f"leader {leader.name}#{leader.incarnation} SIGKILLed")
        new = await self.leader(timeout=self.p.lease_duration * 6)
        failover = time.monotonic() - start
        assert new in others
        self.fig.failover_seconds.append(failover)
        self.note(f"{new.name}#{new.incarnation} took the lease {failover:.1f} s after the kill")
        await leader.start()

    async def fault_window(self) -> None:
        plan = FaultPlan()
        self.proxy.faults_on(plan)
        self.note(f"proxy faults on for {self.p.fault_window_seconds:.0f} s: {plan}")
        try:
            await asyncio.sleep(self.p.fault_window_seconds)
        finally:
            self.proxy.faults_off()
        self.note(f"proxy faults off: {dict(self.proxy.injected)}")

    async def supervise(self) -> None:
        """Restart a replica that exited on its own (a Deployment would); tell a lost lease
        (designed: exit before another leader acts) from a crash."""
        while True:
            for r in self.replicas:
                if r.proc is not None and r.proc.returncode is not None and not r.killed:
                    r.exits.append((r.incarnation, r.proc.returncode, time.time()))
                    tail = r.log.read_text(errors="replace")[-3000:]
                    if "leader election lost" in tail:
                        self.fig.lease_loss_restarts += 1
                        self.note(f"{r.name}#{r.incarnation} exited on a lost lease: restarting")
                    else:
                        self.fig.crashes.append(
                            f"{r.name}#{r.incarnation} exited {r.proc.returncode}: {tail}"
                        )
                        self.note(
                            f"{r.name}#{r.incarnation} CRASHED ({r.proc.returncode}): restarting\n{tail[-1500:]}"
                        )
                    await r.start()
            await asyncio.sleep(0.3)

    async def job_history_loop(self) -> None:
        """Poll the namespace's Jobs, JobSets and PVCs straight from the API server (a failed poll
        is skipped: the API server restarts during the run). ``resourceVersion=0`` is served from
        the watch cache, so a thousand Jobs a second cost the API server no etcd read."""
        polled = (
            (f"/apis/batch/v1/namespaces/{NS}/jobs", self.job_history),
            (f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NS}/jobsets", self.jobset_history),
            (f"/api/v1/namespaces/{NS}/persistentvolumeclaims", self.pvc_history),
        )
        while True:
            for path, history in polled:
                with contextlib.suppress(aiohttp.ClientError, TimeoutError, OSError):
                    status, body = await self.env.request("GET", f"{path}?resourceVersion=0")
                    if status == 200:
                        history.observe(list(body["items"]), time.monotonic() - self.t0)
            await asyncio.sleep(JOB_POLL_SECONDS)

    def diagnose(self, found: list[str], snap: Snapshot) -> list[str]:
        """For each missing Job: what the polls saw of it, and its JobSet's state."""
        out = []
        for problem in found:
            if problem.startswith("missing Job "):
                name = problem.removeprefix("missing Job ")
                js = snap.jobsets.get(name.rsplit("-", 2)[0]) or {}
                out.append(f"{self.job_history.explain(name)}; JobSet {jobset_state(js)}")
        return out

    async def scrape_loop(self) -> None:
        async with aiohttp.ClientSession() as http:
            while True:
                for r in self.replicas:
                    await r.scrape(http)
                await asyncio.sleep(2)

    # -- checks --------------------------------------------------------------------------------

    def leadership_overlaps(self) -> list[str]:
        """Each incarnation leads from its 'successfully acquired lease' until it died; no two
        such intervals may overlap (at most one active leader)."""
        intervals = []
        for r in self.replicas:
            ends = {inc: t for inc, _code, t in r.exits}
            for log in r.logs():
                inc = int(log.stem.split("-")[1])
                acquired = [
                    line["ts"] for line in _lines(log) if line.get("msg") == "successfully acquired lease"
                ]
                lost = [line["ts"] for line in _lines(log) if line.get("msg") == "leader election lost"]
                if acquired:
                    # it stops leading when it logs the loss (it exits right after), else at death
                    end = _epoch(lost[0]) if lost else ends.get(inc, time.time())
                    intervals.append((_epoch(acquired[0]), end, f"{r.name}#{inc}"))
        intervals.sort()
        out = []
        for (_s1, e1, n1), (s2, _e2, n2) in itertools.pairwise(intervals):
            if s2 < e1:
                out.append(f"{n2} acquired at {s2:.2f} while {n1} led until {e1:.2f}")
        return out

    # -- everything ----------------------------------------------------------------------------

    async def run(self) -> Figures:
        p = self.p
        self.note(f"level {p.level}, seed {p.seed}: {len(self.items)} objects, {p.nodes} KWOK nodes")
        env = Environment(
            self.work / "env",
            full=True,
            nodes=p.nodes,
            crd_paths=self.level.crds(),
            pod_run_seconds=p.pod_run_seconds,
            pod_run_jitter_seconds=p.pod_jitter_seconds,
        )
        async with env:
            self.env = env
            async with FaultProxy(env.url, env.ssl_context(), seed=p.seed) as proxy:
                self.proxy = proxy
                return await self._run(env, proxy)

    async def _run(self, env: Environment, proxy: FaultProxy) -> Figures:
        p = self.p
        kubeconfig = self.work / "proxy.kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "proxy", "cluster": {"server": proxy.url}}],
                    "users": [{"name": "anonymous", "user": {}}],
                    "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "anonymous"}}],
                    "current-context": "proxy",
                }
            )
        )
        for ns in (NS, LEASE_NS):
            await self.admin(
                "POST",
                "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                ok=(409,),
            )
        ca = TinyCA("chaos-webhook-ca")
        self.replicas = [Replica(n, self.work / n, kubeconfig, ca, p) for n in ("a", "b")]
        forwarder = TcpForwarder([r.webhook_port for r in self.replicas])
        await forwarder.start()
        tasks: list[asyncio.Task[Any]] = []
        try:
            for r in self.replicas:
                await r.start()
            first = await self.leader(timeout=180)
            self.note(f"{first.name} leads")
            await self._install(env, forwarder.port, ca)
            tasks = [
                asyncio.create_task(self.supervise()),
                asyncio.create_task(self.scrape_loop()),
                asyncio.create_task(self.job_history_loop()),
            ]
            creator = asyncio.create_task(self._create_all())
            # faults start once a quarter of the workload is in
            while True:
                if self.created >= len(self.items) // 4 or creator.done():
                    break
                await asyncio.sleep(0.5)
            await self._faults()
            t_last = time.monotonic()
            await creator
            await self._converge(t_last)
            self.fig.leader_overlaps = self.leadership_overlaps()
            for r in self.replicas:
                await r.scrape_final()
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            codes = {r.name: await r.terminate() for r in self.replicas}
            await forwarder.stop()
            for name, history in (
                ("jobs", self.job_history),
                ("jobsets", self.jobset_history),
                ("pvcs", self.pvc_history),
            ):
                (self.work / f"{name}-history.json").write_text(json.dumps(history.to_json(), indent=1))
        self.fig.run_seconds = time.monotonic() - self.t0
        self._metrics()
        assert all(c == 0 for c in codes.values()), f"managers did not stop cleanly: {codes}"
        return self.fig

    async def _install(self, env: Environment, webhook_port: int, ca: TinyCA) -> None:
        workload = self.level.workload
        # the shipped runtimes first: the TrainJob defaulter's probe (level v2.3) names one
        await env.apply_manifests(list(workload.shipped_runtimes), field_manager="chaos")
        docs = for_namespace(self.level.webhooks(), NS)
        path = self.work / "webhooks.yaml"
        path.write_text(yaml.safe_dump_all(docs))
        await env.install_webhooks([path], host="127.0.0.1", port=webhook_port, ca_bundle=ca.cert_pem)
        # the workload relies on the webhooks (JobSet defaults): create nothing before they answer
        await wait_webhooks_effective(env, docs, NS, timeout=120)
        for rt in workload.namespaced_runtimes(NS):
            await self.admin(
                "POST", f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NS}/trainingruntimes", rt, ok=(409,)
            )

    created = 0

    async def _create_all(self) -> None:
        queue: asyncio.Queue[Item] = asyncio.Queue()
        for item in self.items:
            queue.put_nowait(item)

        updates: list[asyncio.Task[None]] = []

        async def worker() -> None:
            while not queue.empty():
                item = queue.get_nowait()
                for obj in item.objects:
                    await self.create(obj)
                self.created += 1
                if item.updates:
                    updates.append(asyncio.create_task(self.apply_updates(item)))

        try:
            await asyncio.gather(*(worker() for _ in range(8)))
            await asyncio.gather(*updates)
        finally:
            for task in updates:
                task.cancel()
        kinds = Counter(i.flavour for i in self.items)
        self.fig.objects_created = dict(kinds)
        self.note(f"all {len(self.items)} objects created")

    async def _faults(self) -> None:
        p = self.p
        plan = (
            ["restart"] * p.apiserver_restarts
            + ["compact"] * p.compactions
            + ["kill"] * p.leader_kills
            + ["window"]
        )
        self.rng.shuffle(plan)
        actions = {
            "restart": self.restart_apiserver,
            "compact": self.compact_and_expire,
            "kill": self.kill_leader,
            "window": self.fault_window,
        }
        start = 0.0
        for i, name in enumerate(plan):
            await asyncio.sleep(self.rng.uniform(*p.gap_seconds))
            start = start if i else time.time()
            await actions[name]()
        self.faults_wall = (start, time.time())
        self.fig.faults = {
            "kube-apiserver restarts": p.apiserver_restarts,
            "etcd compactions": p.compactions,
            "watches expired (410)": proxy_count(self.proxy, "watch-410"),
            "leader SIGKILLs": p.leader_kills,
            "proxy 429": proxy_count(self.proxy, "429"),
            "proxy 500": proxy_count(self.proxy, "500"),
            "proxy dropped connections": proxy_count(self.proxy, "drop"),
            "proxy slow answers": proxy_count(self.proxy, "slow"),
        }
        self.note("last fault done")

    async def _converge(self, t_last: float) -> None:
        deadline = t_last + self.p.converge_timeout
        last: list[str] = []
        snapshots = self.level.workload.runtime_snapshots
        while True:
            snap = await self.snapshot()
            last = problems(self.items, snap, runtime_snapshots=snapshots)
            if not last:
                break
            if time.monotonic() > deadline:
                self.fig.problems = last
                history = self.diagnose(last, snap)
                self.fig.diagnosis = history
                raise AssertionError(
                    f"not converged {self.p.converge_timeout:.0f} s after the last fault; "
                    f"{len(last)} problems, first: {last[:15]}; what happened: {history[:15]} "
                    f"(Job history in {self.work / 'jobs-history.json'}, manager logs in "
                    f"{self.work}/a and {self.work}/b)"
                )
            await asyncio.sleep(3)
        self.fig.converge_seconds_after_last_fault = time.monotonic() - t_last
        self.note(f"converged {self.fig.converge_seconds_after_last_fault:.1f} s after the last fault")
        # level-triggered and settled: nothing changes any more (no duplicate appears later)
        converged = snap
        await asyncio.sleep(10)
        snap = await self.snapshot()
        self.fig.problems = (
            problems(self.items, snap, runtime_snapshots=snapshots)
            + settled_problems(self.items, converged, snap)
            + history_problems(self.items, self.jobset_history, self.pvc_history)
        )
        self.fig.diagnosis = self.diagnose(self.fig.problems, snap)
        self.fig.deadlines_expired = self.deadlines_expired(snap)
        self.fig.pvcs_created = len(self.pvc_history.jobs)
        absent = finished_path_absent(snap)
        self.fig.finished_path_jobs = {
            "deleted while active": sum(1 for name in absent if self.job_history.jobs.get(name)),
            "completed before created": sum(1 for name in absent if not self.job_history.jobs.get(name)),
        }
        self.fig.finished_path_details = [
            f"{self.job_history.explain(name)}; "
            + "; ".join(
                self.job_history.explain(f"{name.rsplit('-', 2)[0]}-{rj}-0")
                for rj in ("launcher",)
                if f"{name.rsplit('-', 2)[0]}-{rj}-0" in snap.jobs
            )
            for name in absent
        ]
        per = events_per_object(snap.events, OURS)
        self.fig.events_total = sum(per.values())
        if per:
            self.fig.max_events_object, self.fig.max_events_per_object = per.most_common(1)[0]
        everyone = events_per_object(snap.events)
        self.fig.events_all_components = sum(everyone.values())
        if everyone:
            obj, n = everyone.most_common(1)[0]
            self.fig.max_events_any_component = f"{n} ({obj})"

    def deadlines_expired(self, snap: Snapshot) -> Json:
        """How many TrainJobs failed on their own ``activeDeadlineSeconds`` before, during and
        after the faults (by the Failed condition's transition time, whole seconds)."""
        start, end = self.faults_wall
        out: Counter[str] = Counter()
        for item in self.items:
            tj = snap.trainjobs.get(item.name)
            if item.spec.reason != "DeadlineExceeded" or tj is None:
                continue
            cond = next(
                (c for c in tj.get("status", {}).get("conditions", []) if c["type"] == "Failed"), None
            )
            if cond is None:
                continue
            at = _epoch(cond["lastTransitionTime"])
            out[
                "before the faults"
                if at < int(start)
                else "after the faults"
                if at > end
                else "during the faults"
            ] += 1
        return dict(out)

    def _metrics(self) -> None:
        texts = [t for r in self.replicas for t in r.metrics.values()]
        codes = metric_sum(texts, "rest_client_requests_total", by="code")
        self.fig.rest_requests_by_code = {k: int(v) for k, v in sorted(codes.items())}
        self.fig.retried_429_in_client = codes.get("429", 0.0)
        self.fig.workqueue_retries = sum(metric_sum(texts, "workqueue_retries_total", by="name").values())
        self.fig.reconcile_errors = sum(
            metric_sum(texts, "controller_runtime_reconcile_total", result="error", by="controller").values()
        )
        self.fig.proxy_requests = self.proxy.requests


def proxy_count(proxy: FaultProxy, key: str) -> int:
    return int(proxy.injected.get(key, 0))


def check(fig: Figures, params: Params) -> None:
    """What the run must show (after the figures are printed)."""
    assert not fig.problems, (
        f"{len(fig.problems)} problems after converging: {fig.problems[:15]}; what happened: {fig.diagnosis[:15]}"
    )
    assert not fig.crashes, f"manager crashes: {[c[:500] for c in fig.crashes]}"
    assert not fig.leader_overlaps, f"two leaders at once: {fig.leader_overlaps}"
    target = fig.failover_target_seconds
    assert len(fig.failover_seconds) == params.leader_kills
    assert all(f < target for f in fig.failover_seconds), f"failover {fig.failover_seconds} over {target} s"
    assert fig.events_total > 0, "the manager reported no event at all: the event check would be vacuous"
    assert fig.max_events_per_object <= params.max_events_per_object, (
        f"event storm: {fig.max_events_object} has {fig.max_events_per_object} events"
    )
    if params.fault_window_seconds > 0:
        assert fig.faults["proxy 429"] > 0 and fig.faults["proxy 500"] > 0
        assert fig.retried_429_in_client > 0, "the managers' metrics show no throttled request"


def write(fig: Figures, path: Path) -> None:
    path.write_text(json.dumps(asdict(fig), indent=2, default=str))


LEVELS_ENV = "CHAOS_LEVELS"
"""The API levels the chaos tests run at, comma-separated (default: every level of ``LEVELS``);
``-k v2_3`` selects one as well."""
CHAOS_LEVELS = [n for n in os.environ.get(LEVELS_ENV, ",".join(LEVELS)).split(",") if n]


def level_id(name: str) -> str:
    return name.replace(".", "_")


async def run_and_check(params: Params, work: Path, out: Path) -> Figures:
    """One run: the figures written to ``out`` and printed, then checked."""
    fig = await ChaosRun(params, work).run()
    out.parent.mkdir(parents=True, exist_ok=True)
    write(fig, out)
    print(fig.table())
    check(fig, params)
    return fig


__all__ = [
    "CHAOS_LEVELS",
    "LEVELS",
    "ChaosRun",
    "Figures",
    "Params",
    "check",
    "level_id",
    "run_and_check",
    "write",
]
