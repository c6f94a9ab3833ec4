"""Burst scenario, side by side: N TrainJobs on ``torch-distributed`` created at once.

For each side, one after the other (the machine has 2 cores), the conformance harness starts a
full local control plane (etcd, kube-apiserver, kube-controller-manager, scheduler, KWOK nodes)
at one API level (``--level``, default v2.3; ``bench_level.py`` maps it) served either by this
manager (``ours``: ``python -m trainer --api-level=<level>`` at its shipped defaults) or by the Go
originals of the level (``theirs``: jobset v0.12.0 and trainer v2.3.0 at v2.3, jobset v0.10.1 and
trainer v2.1.0 at v2.1; at the harness's settings: JobSet 500/500, its shipped default), each with
its level's CRDs, webhook configurations and shipped runtimes. Then N suspended (or, with ``--running``,
unsuspended) TrainJobs are created by ``--clients`` concurrent clients (16, as a load generator
with 16 threads) and two watches (JobSets, Jobs) time each TrainJob from its create returning to
its JobSet and to its first Job appearing. Measured per side:

- latency to JobSet and to Job: p50 / p99 / max; total time from the first create to the last Job;
- manager CPU seconds during the burst and peak RSS (``/proc/<pid>/stat``, ``VmHWM``), of the
  manager's process and its webhook process together;
- API requests by verb and reconcile errors by controller, from the managers' own ``/metrics``
  (``rest_client_requests_total``, ``controller_runtime_reconcile_errors_total``), as deltas;
- admission: the creates' wall time (p50 / p99 / max of each create, the whole create phase) and
  how long the API server waited for each webhook's answer, from its own
  ``apiserver_admission_webhook_admission_duration_seconds`` histogram (both sides' API servers
  are the same binary and measure the same way): per webhook, the answers during the create phase
  and during the whole burst, their mean (exact: the histogram's sum over its count) and p50 /
  p99 interpolated in the histogram's buckets (5 ms, 25 ms, 100 ms, 500 ms, 1 s, ...), as
  Prometheus' ``histogram_quantile`` does, and the share of answers slower than 25 ms and 100 ms.

Writes ``burst-<level>.json`` and ``burst-<level>.md`` (``burst-running-<level>.*`` with
``--running``; a table with ours / Go ratios) into ``--out``.

    python test/bench/burst.py --n 1000            # what ``make bench`` runs (level v2.3)
    python test/bench/burst.py --n 50 --sides ours  # a quick look
    python test/bench/burst.py --n 1000 --level v2.1
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import ssl
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import aiohttp
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_level  # the level seam of the benchmarks (a sibling module)

from manager import longrun
from manager.meta.object import Json
from trainer.conformance import harness
from trainer.conformance.kube import Kube

NAMESPACE = "default"
RUNTIME = bench_level.RUNTIME
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
TICKS = os.sysconf("SC_CLK_TCK")
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


#: Where the run is, for the line that says why it stopped (manager/longrun.py).
PROGRESS = longrun.Progress("bench", unit="sides")


def say(message: str) -> None:
    PROGRESS.say(message)


# -- /proc and /metrics -------------------------------------------------------------------------


def process_tree(pid: int) -> list[int]:
    """``pid`` and its live descendants: a manager and its webhook process
    (``--webhook-process``) are measured as one."""
    pids = [pid]
    for pid_ in pids:
        with contextlib.suppress(OSError):
            pids += [int(c) for c in Path(f"/proc/{pid_}/task/{pid_}/children").read_text().split()]
    return pids


def _own_cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:  # ended between the listing and the read
        return 0.0
    # utime, stime, and the children's it has waited for (cutime, cstime)
    return sum(int(f) for f in fields[11:15]) / TICKS


def cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and its descendants, the live and the ended."""
    return sum(_own_cpu_seconds(p) for p in process_tree(pid))


def webhook_cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid``'s descendants (its webhook process, ``--webhook-process``)."""
    return sum(_own_cpu_seconds(p) for p in process_tree(pid)[1:])


def profiled(pid: int, webhook: bool) -> int:
    """The process ``--profile`` samples: the manager, or with ``webhook`` its webhook process."""
    if not webhook:
        return pid
    children = process_tree(pid)[1:]
    if not children:
        raise SystemExit("--profile-webhook: the manager runs no webhook process (--no-webhook-process?)")
    return children[0]


def _status_mb(pid: int, field: str) -> float:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mb(pid: int) -> float:
    """The sum of each process's peak RSS (``VmHWM``) over ``pid`` and its live descendants (the
    peaks need not coincide: an upper bound of the tree's)."""
    return sum(_status_mb(p, "VmHWM:") for p in process_tree(pid))


def rss_mb(pid: int) -> float:
    """``VmRSS`` of ``pid`` and its live descendants, summed."""
    return sum(_status_mb(p, "VmRSS:") for p in process_tree(pid))


def parse_metrics(text: str) -> list[tuple[str, dict[str, str], float]]:
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if m:
            out.append((m.group(1), dict(LABEL.findall(m.group(3) or "")), float(m.group(4))))
    return out


def summarise(samples: Iterable[tuple[str, dict[str, str], float]]) -> dict[str, dict[str, float]]:
    """``requests``: by HTTP verb; ``codes``: by status code; ``errors``: reconcile errors by
    controller; ``reconciles``: reconciles (any result) by controller; ``served_s`` and
    ``served``: the webhook server's own time on its answers, and their count, by path
    (controller-runtime's ``controller_runtime_webhook_latency_seconds``, which ours keeps too:
    from reading the body to the answer, without the wait before it)."""
    requests: dict[str, float] = {}
    codes: dict[str, float] = {}
    errors: dict[str, float] = {}
    reconciles: dict[str, float] = {}
    served_s: dict[str, float] = {}
    served: dict[str, float] = {}
    for name, labels, value in samples:
        if name.startswith("controller_runtime_webhook_latency_seconds_"):
            hook = labels.get("webhook", "?")
            if name.endswith("_sum"):
                served_s[hook] = served_s.get(hook, 0.0) + value
            elif name.endswith("_count"):
                served[hook] = served.get(hook, 0.0) + value
            continue
        if name == "rest_client_requests_total":
            verb = labels.get("method", "?")
            requests[verb] = requests.get(verb, 0.0) + value
            code = labels.get("code", "?")
            codes[code] = codes.get(code, 0.0) + value
        elif name == "controller_runtime_reconcile_errors_total":
            ctrl = labels.get("controller", "?")
            errors[ctrl] = errors.get(ctrl, 0.0) + value
        elif name == "controller_runtime_reconcile_total":
            ctrl = labels.get("controller", "?")
            reconciles[ctrl] = reconciles.get(ctrl, 0.0) + value
    return {
        "requests": requests,
        "codes": codes,
        "errors": errors,
        "reconciles": reconciles,
        "served_s": served_s,
        "served": served,
    }


def delta(
    after: dict[str, dict[str, float]], before: dict[str, dict[str, float]]
) -> dict[str, dict[str, float]]:
    return {key: {k: v - before.get(key, {}).get(k, 0.0) for k, v in after[key].items()} for key in after}


# -- admission, as the API server saw it -----------------------------------------------------------

ADMISSION_METRIC = "apiserver_admission_webhook_admission_duration_seconds"
SLOW = (0.025, 0.1)
"""The answer times whose exceedance is reported (two of the histogram's bucket bounds)."""

Histograms = dict[str, dict[str, Any]]
"""Webhook name -> {"buckets": {upper bound: cumulative count}, "sum": s, "count": n}."""


def admission_histograms(samples: Iterable[tuple[str, dict[str, str], float]]) -> Histograms:
    """The API server's webhook answer times by webhook name (validating and mutating apart from
    each other only by their names, which differ), every operation and verdict added up."""
    out: Histograms = {}
    for name, labels, value in samples:
        if not name.startswith(ADMISSION_METRIC):
            continue
        hook = out.setdefault(labels.get("name", "?"), {"buckets": {}, "sum": 0.0, "count": 0.0})
        suffix = name[len(ADMISSION_METRIC) :]
        if suffix == "_bucket":
            le = float(labels["le"])
            hook["buckets"][le] = hook["buckets"].get(le, 0.0) + value
        elif suffix == "_sum":
            hook["sum"] += value
        elif suffix == "_count":
            hook["count"] += value
    return out


def histogram_delta(after: Histograms, before: Histograms) -> Histograms:
    out: Histograms = {}
    for name, hook in after.items():
        was = before.get(name, {"buckets": {}, "sum": 0.0, "count": 0.0})
        count = hook["count"] - was["count"]
        if count <= 0:
            continue
        out[name] = {
            "buckets": {le: v - was["buckets"].get(le, 0.0) for le, v in hook["buckets"].items()},
            "sum": hook["sum"] - was["sum"],
            "count": count,
        }
    return out


def histogram_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """Prometheus' ``histogram_quantile``: linear within the bucket the rank falls in; a rank in
    the ``+Inf`` bucket answers the largest finite bound."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    rank = q * buckets[bounds[-1]]
    lower, below = 0.0, 0.0
    for le in bounds:
        count = buckets[le]
        if count >= rank:
            if le == float("inf"):
                return lower
            return lower + (le - lower) * ((rank - below) / (count - below) if count > below else 0.0)
        lower, below = le, count
    return lower


ALL_WEBHOOKS = "*"
"""The key of every webhook's answers together in ``admission_summary``."""


def admission_summary(hists: Histograms) -> dict[str, dict[str, Any]]:
    """Per webhook, and all of them together (``ALL_WEBHOOKS``): answers, mean, p50, p99
    (seconds) and the shares slower than ``SLOW``."""
    out: dict[str, dict[str, Any]] = {}
    together: dict[str, Any] = {"buckets": {}, "sum": 0.0, "count": 0.0}
    for hook in hists.values():
        together["sum"] += hook["sum"]
        together["count"] += hook["count"]
        for le, v in hook["buckets"].items():
            together["buckets"][le] = together["buckets"].get(le, 0.0) + v
    every = {**hists, ALL_WEBHOOKS: together} if hists else {}
    for name, hook in sorted(every.items()):
        buckets, count = hook["buckets"], hook["count"]
        entry: dict[str, Any] = {
            "answers": int(count),
            "mean_s": round(hook["sum"] / count, 4),
            "p50_s": _round(histogram_quantile(0.50, buckets)),
            "p99_s": _round(histogram_quantile(0.99, buckets)),
        }
        for bound in SLOW:
            entry[f"over_{int(bound * 1000)}ms"] = round(1 - buckets.get(bound, 0.0) / count, 4)
        out[name] = entry
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


async def apiserver_metrics(kube: Kube) -> list[tuple[str, dict[str, str], float]]:
    status, body = await kube.request("GET", "/metrics")
    if status != 200 or not isinstance(body, str):
        raise RuntimeError(f"GET /metrics of the API server: {status}")
    return parse_metrics(body)


async def apiserver_histograms(kube: Kube) -> Histograms:
    return admission_histograms(await apiserver_metrics(kube))


async def apiserver_requests(kube: Kube) -> dict[str, float]:
    """The API server's requests served so far, every client's, by ``VERB resource[/subresource]``
    (``apiserver_request_total``; watches and the metrics reads left out)."""
    out: dict[str, float] = {}
    for name, labels, value in await apiserver_metrics(kube):
        if name != "apiserver_request_total" or labels.get("verb") in ("WATCH", "CONNECT"):
            continue
        resource = labels.get("resource") or labels.get("component", "?")
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        key = f"{labels.get('verb', '?')} {resource}"
        out[key] = out.get(key, 0.0) + value
    return out


def requests_since(before: dict[str, float], after: dict[str, float]) -> dict[str, int]:
    """The requests served between two ``apiserver_requests`` readings, those that happened."""
    return {k: int(v - before.get(k, 0.0)) for k, v in sorted(after.items()) if v - before.get(k, 0.0) >= 1}


async def metrics_token(side: harness.Side) -> str:
    """A ServiceAccount token allowed to GET /metrics (the Go JobSet manager serves it with authn/authz),
    returned once the API server authorizes it (the RBAC authorizer learns of a binding from its
    informer: a scrape right after the write could be refused)."""
    assert side.env is not None, "the metrics token is made on a local control plane"
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "bench-metrics"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "bench-metrics"},
        "subjects": [{"kind": "ServiceAccount", "name": "bench", "namespace": "default"}],
    }
    objs = [
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "bench-metrics"},
                "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
            },
        ),
        ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding),
    ]
    for path, body in objs:
        status, answer = await side.kube.request("POST", path, body)
        if status not in (201, 409):
            raise RuntimeError(f"POST {path}: {status} {answer}")
    await side.env.wait_binding_effective(binding)
    # the ServiceAccount is created with its token
    return await side.env.service_account_token("default", "bench", expiration_seconds=7200)


EMPTY_SCRAPE: dict[str, dict[str, float]] = {
    key: {} for key in ("requests", "codes", "errors", "reconciles", "served_s", "served")
}


def control_plane_pids(side: harness.Side) -> dict[str, int]:
    """The side's kube-apiserver and etcd processes (for their CPU seconds)."""
    procs = side.env.processes if side.env is not None else []
    return {p.name: p.pid for p in procs if p.pid is not None and p.name in ("kube-apiserver", "etcd")}


class Manager:
    """One manager process of a side and where its /metrics are."""

    def __init__(self, name: str, pid: int, url: str, token: str | None = None) -> None:
        self.name, self.pid, self.url, self.token = name, pid, url, token

    async def scrape(self, session: aiohttp.ClientSession) -> dict[str, dict[str, float]]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        try:
            async with session.get(
                self.url, headers=headers, ssl=ctx if self.url.startswith("https") else None
            ) as resp:
                if resp.status != 200:
                    say(f"{self.name}: GET {self.url} -> {resp.status}")
                    return dict(EMPTY_SCRAPE)
                return summarise(parse_metrics(await resp.text()))
        except aiohttp.ClientError as err:
            say(f"{self.name}: GET {self.url} failed: {err}")
            return dict(EMPTY_SCRAPE)


def _bind(address: str) -> str:
    return address if not address.startswith(":") else f"127.0.0.1{address}"


async def managers_of(side: harness.Side, workdir: Path) -> list[Manager]:
    procs = {p.name: p.pid for p in side.processes if p.pid is not None}
    if side.name == "ours":
        cfg = yaml.safe_load((workdir / "ours-manager" / "config.yaml").read_text())
        return [
            Manager(
                "trainer-py", procs["trainer-py"], f"http://{_bind(cfg['metrics']['bindAddress'])}/metrics"
            )
        ]
    js = yaml.safe_load((workdir / "theirs-managers" / "jobset-config.yaml").read_text())
    tr = yaml.safe_load((workdir / "theirs-managers" / "trainer-config.yaml").read_text())
    token = await metrics_token(side)
    return [
        Manager(
            "jobset-go", procs["jobset-go"], f"https://{_bind(js['metrics']['bindAddress'])}/metrics", token
        ),
        Manager("trainer-go", procs["trainer-go"], f"http://{_bind(tr['metrics']['bindAddress'])}/metrics"),
    ]


# -- the burst ----------------------------------------------------------------------------------


async def watch_events(
    kube: Kube, path: str, handle: Callable[[Json, float], object], ready: Callable[[], object]
) -> None:
    """Watch ``path`` until cancelled (again whenever the API server ends the watch): ``ready()``
    each time it is open, ``handle(object, monotonic arrival time)`` for each ADDED and MODIFIED."""
    cfg = kube.config
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=cfg.ssl_context or False)) as session:
        while True:
            headers = {"Accept": "application/json"}
            if auth := await cfg.authorization():
                headers["Authorization"] = auth
            url = cfg.host.rstrip("/") + path + "?watch=true&timeoutSeconds=3600"
            async with session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=None)) as resp:
                ready()
                async for line in resp.content:
                    now = time.monotonic()
                    event = json.loads(line)
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        handle(event["object"], now)


class Watcher:
    """First time each JobSet and each TrainJob's first Job is seen in a watch."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.jobsets: dict[str, float] = {}
        self.jobs: dict[str, float] = {}
        self.tasks: list[asyncio.Task[None]] = []
        self.ready = 0

    async def _watch(self, path: str, seen: dict[str, float], key_of: Callable[[Json], str | None]) -> None:
        def first_seen(obj: Json, now: float) -> None:
            key = key_of(obj)
            if key and key not in seen:
                seen[key] = now

        await watch_events(self.kube, path, first_seen, self._opened)

    def _opened(self) -> None:
        self.ready += 1

    def start(self) -> None:
        self.tasks = [
            asyncio.create_task(
                self._watch(
                    f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NAMESPACE}/jobsets",
                    self.jobsets,
                    lambda o: o["metadata"]["name"],
                )
            ),
            asyncio.create_task(
                self._watch(
                    f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs",
                    self.jobs,
                    lambda o: (o["metadata"].get("labels") or {}).get(JOBSET_LABEL),
                )
            ),
        ]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


SHIPPED_CONFIG = Path(__file__).resolve().parents[2] / "config" / "manager" / "config.yaml"
SHIPPED_KEYS = ("controller", "clientConnection")


def shipped_overrides() -> dict[str, Any]:
    """The shipped Configuration's ``controller`` (TrainJob: 5 workers, T-2) and
    ``clientConnection``: what a deployment of ours runs with, beyond the harness's minimal file."""
    configmap = yaml.safe_load(SHIPPED_CONFIG.read_text())
    cfg = yaml.safe_load(configmap["data"]["controller_manager_config.yaml"])
    return {k: cfg[k] for k in SHIPPED_KEYS if k in cfg}


def trainjob(name: str, suspend: bool, level: bench_level.BenchLevel) -> dict[str, Any]:
    """The burst's TrainJob, valid at ``level``."""
    return level.trainjob(name, NAMESPACE, suspend)


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p99": None, "max": None}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    return {"p50": at(0.50), "p99": at(0.99), "max": round(ordered[-1], 3)}


async def start_profile(pid: int, out: Path, gil: bool = False) -> asyncio.subprocess.Process:
    """py-spy sampling one manager process (collapsed stacks, ``--format raw``) until SIGINT."""
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        raise SystemExit("--profile needs py-spy (pip install -e '.[bench]')")
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = [spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "50", "--nonblocking"]
    # each thread apart; with ``gil``, only samples of the thread holding the GIL (how busy the
    # interpreter is), else every sample, waits included (where an answer's time goes)
    argv += ["--threads", "--gil"] if gil else ["--threads", "--idle"]
    return await asyncio.create_subprocess_exec(*argv, "-o", str(out), stdout=asyncio.subprocess.DEVNULL)


async def stop_profile(proc: asyncio.subprocess.Process | None) -> None:
    if proc is not None and proc.returncode is None:
        proc.send_signal(signal.SIGINT)
        await proc.wait()


async def burst(
    side: harness.Side,
    workdir: Path,
    n: int,
    running: bool,
    timeout: float,
    level: bench_level.BenchLevel,
    profile: Path | None = None,
    clients: int = 16,
    profile_creates_only: bool = False,
    profile_gil: bool = False,
    profile_webhook: bool = False,
) -> dict[str, Any]:
    managers = await managers_of(side, workdir)
    watcher = Watcher(side.kube)
    watcher.start()
    while watcher.ready < 2:  # noqa: ASYNC110 -- polling a counter
        await asyncio.sleep(0.1)
    async with aiohttp.ClientSession() as session:
        await asyncio.sleep(2)  # let start-up settle before the baseline
        before = {m.name: await m.scrape(session) for m in managers}
        admission_before = await apiserver_histograms(side.kube)
        requests_before = await apiserver_requests(side.kube)
        cpu_before = {m.name: cpu_seconds(m.pid) for m in managers}
        webhook_before = {m.name: webhook_cpu_seconds(m.pid) for m in managers}
        plane = control_plane_pids(side)
        plane_before = {name: cpu_seconds(pid) for name, pid in plane.items()}
        created: dict[str, float] = {}
        create_s: list[float] = []
        failures: list[str] = []
        names = [f"burst-{i:05d}" for i in range(n)]
        pending = iter(names)

        async def client() -> None:
            # one of ``clients`` load-generator lanes: its next create once the last one returned
            for name in pending:
                sent = time.monotonic()
                status, body = await side.kube.create(trainjob(name, not running, level), NAMESPACE)
                created[name] = time.monotonic()
                create_s.append(created[name] - sent)
                if status != 201:
                    failures.append(f"{name}: {status} {str(body)[:200]}")

        spy = (
            await start_profile(profiled(managers[0].pid, profile_webhook), profile, profile_gil)
            if profile and side.name == "ours"
            else None
        )
        start = time.monotonic()
        await asyncio.gather(*(client() for _ in range(clients)))
        created_all = time.monotonic() - start
        plane_creates = {name: round(cpu_seconds(pid) - plane_before[name], 2) for name, pid in plane.items()}
        managers_creates = {m.name: round(cpu_seconds(m.pid) - cpu_before[m.name], 2) for m in managers}
        webhook_creates = {
            m.name: round(webhook_cpu_seconds(m.pid) - webhook_before[m.name], 2) for m in managers
        }
        if profile_creates_only:
            await stop_profile(spy)
        admission_created = await apiserver_histograms(side.kube)
        requests_created = await apiserver_requests(side.kube)
        say(f"{side.name}: {n} TrainJobs created in {created_all:.1f}s ({len(failures)} failed)")
        deadline = start + timeout
        while time.monotonic() < deadline and (len(watcher.jobsets) < n or len(watcher.jobs) < n):  # noqa: ASYNC110
            await asyncio.sleep(0.2)
        done = time.monotonic()
        await asyncio.sleep(3)  # the status writes after the last Job
        await stop_profile(spy)
        admission_after = await apiserver_histograms(side.kube)
        requests_after = await apiserver_requests(side.kube)
        cpu = {m.name: round(cpu_seconds(m.pid) - cpu_before[m.name], 2) for m in managers}
        webhook_cpu = {
            m.name: round(webhook_cpu_seconds(m.pid) - webhook_before[m.name], 2) for m in managers
        }
        plane_cpu = {name: round(cpu_seconds(pid) - plane_before[name], 2) for name, pid in plane.items()}
        after = {m.name: await m.scrape(session) for m in managers}
        rss = {m.name: round(peak_rss_mb(m.pid), 1) for m in managers}
    await watcher.stop()
    to_jobset = [watcher.jobsets[k] - created[k] for k in names if k in watcher.jobsets and k in created]
    to_job = [watcher.jobs[k] - created[k] for k in names if k in watcher.jobs and k in created]
    last = max([*watcher.jobs.values(), start]) if watcher.jobs else done
    requests: dict[str, float] = {}
    codes: dict[str, float] = {}
    errors: dict[str, float] = {}
    reconciles: dict[str, float] = {}
    served_s: dict[str, float] = {}
    served: dict[str, float] = {}
    for m in managers:
        d = delta(after[m.name], before[m.name])
        for hook, v in d.get("served_s", {}).items():
            served_s[hook] = served_s.get(hook, 0.0) + v
        for hook, v in d.get("served", {}).items():
            served[hook] = served.get(hook, 0.0) + v
        for verb, v in d["requests"].items():
            requests[verb] = requests.get(verb, 0.0) + v
        for code, v in d.get("codes", {}).items():
            codes[code] = codes.get(code, 0.0) + v
        for ctrl, v in d["errors"].items():
            if v:
                errors[f"{m.name}/{ctrl}"] = v
        for ctrl, v in d.get("reconciles", {}).items():
            if v:
                reconciles[f"{m.name}/{ctrl}"] = v
    return {
        "side": side.name,
        "n": n,
        "running": running,
        "create_failures": failures[:10],
        "create_failures_count": len(failures),
        "clients": clients,
        "created_all_s": round(created_all, 2),
        "create_s": percentiles(create_s),
        # CPU seconds during the creates: the managers' and the control plane's (the API server
        # and etcd share the cores with the managers)
        "cpu_s_creates": managers_creates,
        # of which the webhook processes' (``--webhook-process``; 0 where the webhooks answer
        # from the manager's own process, as Go's do)
        "webhook_process_cpu_s_creates": webhook_creates,
        "control_plane_cpu_s_creates": plane_creates,
        # what the API server served during the creates, every client's (the N creates, and the
        # managers' reconciles of the TrainJobs created so far, which share its cores)
        "apiserver_requests_creates": requests_since(requests_before, requests_created),
        "control_plane_cpu_s": plane_cpu,
        # what the API server served over the whole burst, every client's, by verb and resource:
        # which writes the managers' reconciles cost it
        "apiserver_requests_burst": requests_since(requests_before, requests_after),
        "admission_creates": admission_summary(histogram_delta(admission_created, admission_before)),
        "admission_burst": admission_summary(histogram_delta(admission_after, admission_before)),
        "jobsets_seen": len(watcher.jobsets),
        "jobs_seen": len(watcher.jobs),
        "to_jobset_s": percentiles(to_jobset),
        "to_job_s": percentiles(to_job),
        # every TrainJob's latency, sorted (the PNG of ``make bench`` plots their distribution)
        "to_jobset_all_s": sorted(round(v, 3) for v in to_jobset),
        "to_job_all_s": sorted(round(v, 3) for v in to_job),
        "total_s": round(last - start, 2),
        "cpu_s": cpu,
        "cpu_s_total": round(sum(cpu.values()), 2),
        "webhook_process_cpu_s": webhook_cpu,
        "peak_rss_mb": rss,
        "peak_rss_mb_total": round(sum(rss.values()), 1),
        "requests_by_verb": {k: int(v) for k, v in sorted(requests.items())},
        "requests_total": int(sum(requests.values())),
        "responses_by_code": {k: int(v) for k, v in sorted(codes.items()) if v},
        "conflicts": int(codes.get("409", 0.0)),
        "reconcile_errors": {k: int(v) for k, v in sorted(errors.items())},
        "reconcile_errors_total": int(sum(errors.values())),
        "reconciles": {k: int(v) for k, v in sorted(reconciles.items())},
        "reconciles_total": int(sum(reconciles.values())),
        # the managers' own time per answer (ms), by path: what the API server's wait adds to it
        # is the time before the server read the request and after it wrote the answer
        "webhook_served_mean_ms": {
            hook: round(1000 * served_s.get(hook, 0.0) / n, 2) for hook, n in sorted(served.items()) if n
        },
    }


LEVELS = bench_level.LEVEL_NAMES
"""The API levels the burst runs at (``bench_level.BenchLevel`` says what each gives it)."""


async def run_side(
    name: str,
    n: int,
    running: bool,
    timeout: float,
    profile: Path | None = None,
    overrides: dict[str, Any] | None = None,
    *,
    level: str = bench_level.DEFAULT,
    clients: int = 16,
    profile_creates_only: bool = False,
    profile_gil: bool = False,
    profile_webhook: bool = False,
) -> dict[str, Any]:
    workdir = harness.new_workdir()
    at = bench_level.get(level)
    say(f"{name}: starting the control plane and the managers (level {level}) in {workdir}")
    try:
        side = await (
            harness.start_ours(
                workdir, config_overrides=overrides, level=at.harness_level, runtimes=at.runtimes()
            )
            if name == "ours"
            else harness.start_theirs(workdir, level=at.harness_level, runtimes=at.runtimes())
        )
        try:
            result = await burst(
                side,
                workdir,
                n,
                running,
                timeout,
                at,
                profile,
                clients,
                profile_creates_only,
                profile_gil,
                profile_webhook,
            )
            result["config_overrides"] = overrides if name == "ours" else None
            result["level"] = level
            result["load_average"] = os.getloadavg()[0]
            return result
        finally:
            await side.stop()
    finally:  # also after a failed or interrupted start
        shutil.rmtree(workdir, ignore_errors=True)


# -- the report ---------------------------------------------------------------------------------


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "n/a"


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


TRAINJOB_HOOKS = frozenset(hook for name in LEVELS for hook in bench_level.get(name).trainjob_webhooks())
"""The webhooks a TrainJob create goes through at some level (the ones the creates wait on)."""


def admission_hooks(sides: Iterable[dict[str, Any]]) -> list[str]:
    """The webhooks the burst's creates went through, the TrainJob's first."""
    seen = {
        hook
        for s in sides
        for window in ("admission_creates", "admission_burst")
        for hook in s.get(window, {})
    }
    return sorted(seen, key=lambda h: (h not in TRAINJOB_HOOKS, h == ALL_WEBHOOKS, h))


def table(results: dict[str, dict[str, Any]]) -> str:
    ours, theirs = results.get("ours"), results.get("theirs")
    sides = [s for s in (ours, theirs) if s is not None]
    rows: list[tuple[str, list[float | None]]] = []
    for key, label in (("to_jobset_s", "TrainJob to JobSet"), ("to_job_s", "TrainJob to Job")):
        for q in ("p50", "p99", "max"):
            rows.append((f"{label} {q} (s)", [s[key][q] for s in sides]))
    rows.append(("total, first create to last Job (s)", [s["total_s"] for s in sides]))
    if all("create_s" in s for s in sides):
        rows.append(
            (
                f"creating the {sides[0]['n']} ({sides[0]['clients']} clients) (s)",
                [s["created_all_s"] for s in sides],
            )
        )
        for q in ("p50", "p99"):
            rows.append((f"one create {q} (ms)", [_ms(s["create_s"][q]) for s in sides]))
        for hook in admission_hooks(sides):
            # the TrainJob's webhooks answer the creates; the others (JobSets, Pods) the
            # reconcilers' writes, all through the burst
            window = "admission_creates" if hook in TRAINJOB_HOOKS else "admission_burst"
            what = "during the creates" if hook in TRAINJOB_HOOKS else "whole burst"
            name = "every webhook" if hook == ALL_WEBHOOKS else f"`{hook}`"
            stats = [s[window].get(hook) for s in sides]
            for key, label in (("p50_s", "p50"), ("p99_s", "p99"), ("mean_s", "mean")):
                rows.append(
                    (f"{name} answer {label}, {what} (ms)", [_ms(st[key]) if st else None for st in stats])
                )
    rows.append(("manager CPU (s)", [s["cpu_s_total"] for s in sides]))
    rows.append(("peak RSS (MB)", [s["peak_rss_mb_total"] for s in sides]))
    verbs = sorted({v for s in sides for v in s["requests_by_verb"]})
    for verb in verbs:
        rows.append((f"API requests {verb}", [s["requests_by_verb"].get(verb, 0) for s in sides]))
    rows.append(("API requests total", [s["requests_total"] for s in sides]))
    rows.append(("409 Conflict responses", [s.get("conflicts") for s in sides]))
    rows.append(("reconcile errors", [s["reconcile_errors_total"] for s in sides]))
    rows.append(("reconciles, all controllers", [s.get("reconciles_total") for s in sides]))
    head = ["", *(("ours" if s is ours else "Go trainer + Go jobset") for s in sides)]
    if ours and theirs:
        head.append("ours / Go")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, values in rows:
        cells = [label, *("n/a" if v is None else f"{v:g}" for v in values)]
        if ours and theirs:
            cells.append(_ratio(values[0], values[1]))
        lines.append("| " + " | ".join(cells) + " |")
    first = sides[0]
    mode = "running" if first["running"] else "suspended"
    detail = "; ".join(
        f"{s['side']}: CPU {s['cpu_s']}, RSS {s['peak_rss_mb']}, errors {s['reconcile_errors'] or 0}, "
        f"reconciles {s.get('reconciles') or 0}"
        for s in sides
    )
    level = first.get("level", bench_level.UNRECORDED)
    return (
        f"{first['n']} {mode} TrainJobs on `{RUNTIME}` created at once (API level {level}).\n\n"
        + "\n".join(lines)
        + f"\n\n{detail}\n"
    )


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1000, help="TrainJobs in the burst (default 1000)")
    parser.add_argument("--sides", default="ours,theirs", help="ours, theirs or both (default both)")
    parser.add_argument("--running", action="store_true", help="unsuspended TrainJobs (pods on KWOK nodes)")
    bench_level.add_argument(parser)
    parser.add_argument("--clients", type=int, default=16, help="concurrent creating clients (default 16)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the Jobs")
    parser.add_argument(
        "--out", type=Path, default=Path("bench-results"), help="where burst-<level>.json/.md go"
    )
    parser.add_argument(
        "--profile", type=Path, help="py-spy our manager during the burst: collapsed stacks into this file"
    )
    parser.add_argument(
        "--profile-creates",
        action="store_true",
        help="with --profile: sample the create phase only (where an admission answer's time goes)",
    )
    parser.add_argument(
        "--profile-gil",
        action="store_true",
        help="with --profile: only samples of the thread holding the GIL (how busy the interpreter is)",
    )
    parser.add_argument(
        "--profile-webhook",
        action="store_true",
        help="with --profile: sample our webhook process (--webhook-process) instead of the manager",
    )
    parser.add_argument(
        "--harness-config",
        action="store_true",
        help="ours with the harness's minimal Configuration only (1 TrainJob worker), not the shipped "
        "controller and clientConnection sections",
    )
    parser.add_argument(
        "--ours-concurrency",
        action="append",
        default=[],
        metavar="KIND.GROUP=N",
        help="extra controller.groupKindConcurrency for ours, e.g. JobSet.jobset.x-k8s.io=5",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser_ = parser()
    args = parser_.parse_args(argv)
    overrides = {} if args.harness_config else shipped_overrides()
    for item in args.ours_concurrency:
        key, _, value = item.partition("=")
        gkc = overrides.setdefault("controller", {}).setdefault("groupKindConcurrency", {})
        gkc[key] = int(value)
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    for name in sides:
        if name not in ("ours", "theirs"):
            parser_.error(f"--sides: unknown side {name!r} (ours, theirs)")
    return longrun.command(PROGRESS, lambda: run_sides(args, sides, overrides))


def run_sides(args: argparse.Namespace, sides: list[str], overrides: dict[str, Any]) -> int:
    results: dict[str, dict[str, Any]] = {}
    for name in sides:
        with PROGRESS.scenario(name):
            results[name] = longrun.run_async(
                run_side(
                    name,
                    args.n,
                    args.running,
                    args.timeout,
                    args.profile,
                    overrides,
                    level=args.level,
                    clients=args.clients,
                    profile_creates_only=args.profile_creates,
                    profile_gil=args.profile_gil,
                    profile_webhook=args.profile_webhook,
                )
            )
        say(json.dumps({k: v for k, v in results[name].items() if not k.endswith("_all_s")}))
    args.out.mkdir(parents=True, exist_ok=True)
    at = bench_level.get(args.level)
    stem = "burst-running" if args.running else "burst"
    (args.out / at.result_name(stem, ".json")).write_text(json.dumps(results, indent=2) + "\n")
    report = table(results)
    (args.out / at.result_name(stem, ".md")).write_text(report)
    print(report)
    incomplete = [
        r["side"] for r in results.values() if r["jobs_seen"] < r["n"] or r["create_failures_count"]
    ]
    if incomplete:
        say(f"incomplete burst on: {', '.join(incomplete)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
