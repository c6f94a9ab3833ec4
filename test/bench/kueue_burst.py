"""Burst with Kueue in the loop, side by side: N TrainJobs through one ClusterQueue of quota Q.

For each side, one after the other (the machine has 2 cores), the conformance harness starts a
full local control plane (KWOK nodes) at one API level (``--level``, default v2.3) served by this
manager (``ours``, at its shipped ``controller`` and ``clientConnection``, as ``burst.py``) or by
the Go jobset and trainer managers of the level (``theirs``), and the level's Kueue release in
front of it (``trainer.conformance.kueue``; v0.17.0 at v2.3, v0.15.0 at v2.1; the release's
Configuration with 5 workers for TrainJobs and JobSets and the client rate of the harness's Go
managers, ``kueue_overrides``, the same on both sides). A ResourceFlavor,
one ClusterQueue of ``--quota`` CPUs and a LocalQueue in ``default``; then N TrainJobs of one
node and 1 CPU on ``torch-distributed``, queued there, created at once: Kueue admits Q at a time,
each TrainJob's pod runs ``--pod-run-seconds`` on KWOK, and as TrainJobs complete their quota goes
to the next. Watches of TrainJobs and Workloads time every admission and completion.

Measured per side: time from the first create to the last TrainJob ``Complete``; admissions (each
Workload's first ``Admitted``) and the most Workloads admitted and not finished at any moment;
each manager's CPU seconds and peak RSS, and Kueue's (``/proc``); the managers' API requests and
reconcile errors from their ``/metrics`` (as ``burst.py``). A benchmark reports, it asserts
nothing about time; the run fails (exit 1) only when a side did not admit and complete every
TrainJob within ``--timeout``.

Writes ``kueue-burst.json`` and ``kueue-burst.md`` (a table with ours / Go ratios) into ``--out``.

    python test/bench/kueue_burst.py --n 1000 --quota 100   # what ``make bench-kueue`` runs
    python test/bench/kueue_burst.py --n 50 --quota 10 --sides ours   # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
from burst import (
    NAMESPACE,
    PROGRESS,
    RUNTIME,
    Manager,
    _ratio,
    cpu_seconds,
    delta,
    managers_of,
    peak_rss_mb,
    percentiles,
    say,
    shipped_overrides,
    start_profile,
    stop_profile,
    watch_events,
)

from manager import longrun
from manager.meta.object import Json
from trainer import levels
from trainer.conformance import harness
from trainer.conformance import kueue as kq
from trainer.conformance.kube import Kube
from trainer.levels import ApiLevel

KUEUE_WORKERS = {"TrainJob.trainer.kubeflow.org": 5, "JobSet.jobset.x-k8s.io": 5}
"""Kueue's workers for TrainJobs and JobSets in the burst, on top of the release's own
``groupKindConcurrency`` (5 for Jobs, Pods and Workloads; none set for these, so 1): with one
worker, each reconcile a dry-run Workload create (Kueue computes a TrainJob's pod sets that way),
Kueue's TrainJob controller, not the managers, decided the pace (a first run: 5 of 100 admitted
TrainJobs started within 7 minutes)."""
KUEUE_CLIENT = {"qps": 500, "burst": 1000}
"""Kueue's client rate in the burst: the Go managers' of the harness (the release: 50 / 100)."""


def kueue_overrides(level: ApiLevel) -> dict[str, Any]:
    """Kueue's Configuration in the burst, the same on both sides: the release's controller section
    with ``KUEUE_WORKERS`` added, and ``KUEUE_CLIENT``."""
    controller = kq.release_controller(kq.manifests(level))
    workers = {**(controller.get("groupKindConcurrency") or {}), **KUEUE_WORKERS}
    return {
        "controller": {**controller, "groupKindConcurrency": workers},
        "clientConnection": dict(KUEUE_CLIENT),
    }


NODES = 4
"""KWOK nodes of 32 CPUs and 110 pods each: room for a quota of 100 one-CPU pods at once."""
QUEUE = "burst"
FLAVOR = "bench-burst"
CLUSTER_QUEUE = "bench-burst"


def queue_objects(quota: int) -> list[dict[str, Any]]:
    """A ResourceFlavor, a ClusterQueue of ``quota`` CPUs on it, a LocalQueue in ``default``."""
    return [
        kq.resource_flavor(FLAVOR),
        kq.cluster_queue(CLUSTER_QUEUE, FLAVOR, str(quota)),
        kq.local_queue(QUEUE, NAMESPACE, CLUSTER_QUEUE),
    ]


def trainjob(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {kq.QUEUE_LABEL: QUEUE}},
        "spec": {
            "runtimeRef": {"name": RUNTIME},
            "trainer": {"numNodes": 1, "resourcesPerNode": {"requests": {"cpu": "1"}}},
        },
    }


def _true(obj: dict[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


class Timeline:
    """First time (monotonic) each TrainJob completed and each Workload was admitted and finished,
    from two watches; the most Workloads admitted and not yet finished at any moment."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.completed: dict[str, float] = {}
        self.failed: dict[str, float] = {}
        self.admitted: dict[str, float] = {}
        self.finished: dict[str, float] = {}
        self.admissions = 0  # every Admitted transition seen, re-admissions included
        self.running: set[str] = set()
        self.most_running = 0
        self.ready = 0
        self.tasks: list[asyncio.Task[None]] = []

    def _trainjob(self, obj: dict[str, Any], now: float) -> None:
        name = obj["metadata"]["name"]
        if _true(obj, "Complete"):
            self.completed.setdefault(name, now)
        if _true(obj, "Failed"):
            self.failed.setdefault(name, now)

    def _workload(self, obj: dict[str, Any], now: float) -> None:
        owner = next(
            (r["name"] for r in obj["metadata"].get("ownerReferences") or []), obj["metadata"]["name"]
        )
        if _true(obj, "Finished"):
            self.finished.setdefault(owner, now)
            self.running.discard(owner)
        elif _true(obj, "Admitted"):
            if owner not in self.running:
                self.admissions += 1
                self.running.add(owner)
                self.most_running = max(self.most_running, len(self.running))
            self.admitted.setdefault(owner, now)
        else:
            self.running.discard(owner)

    async def _watch(self, path: str, handle: Callable[[Json, float], object]) -> None:
        await watch_events(self.kube, path, handle, self._opened)

    def _opened(self) -> None:
        self.ready += 1

    def start(self) -> None:
        self.tasks = [
            asyncio.create_task(
                self._watch(
                    f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NAMESPACE}/trainjobs", self._trainjob
                )
            ),
            asyncio.create_task(
                self._watch(f"/apis/{kq.API_VERSION}/namespaces/{NAMESPACE}/workloads", self._workload)
            ),
        ]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def _apply_queues(side: harness.Side, quota: int) -> None:
    for obj in queue_objects(quota):
        namespace = NAMESPACE if obj["kind"] == "LocalQueue" else None
        status, body = await side.kube.create(obj, namespace)
        if status != 201:
            raise RuntimeError(f"{side.name}: creating {obj['kind']} answered {status}: {body}")
    deadline = time.monotonic() + 60
    while True:
        _, cq = await side.kube.get(kq.API_VERSION, "ClusterQueue", CLUSTER_QUEUE, None)
        _, lq = await side.kube.get(kq.API_VERSION, "LocalQueue", QUEUE, NAMESPACE)
        if _true(cq, "Active") and _true(lq, "Active"):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{side.name}: the ClusterQueue or LocalQueue never became Active")
        await asyncio.sleep(0.2)


async def kueue_burst(
    side: harness.Side,
    workdir: Path,
    kueue: kq.KueueProcess,
    n: int,
    quota: int,
    timeout: float,
    profile: Path | None = None,
) -> dict[str, Any]:
    managers = await managers_of(side, workdir)
    assert kueue.process.pid is not None
    kueue_pid = kueue.process.pid
    await _apply_queues(side, quota)
    timeline = Timeline(side.kube)
    timeline.start()
    while timeline.ready < 2:  # noqa: ASYNC110 -- polling a counter
        await asyncio.sleep(0.1)
    async with aiohttp.ClientSession() as session:
        await asyncio.sleep(2)  # let start-up settle before the baseline
        before = {m.name: await m.scrape(session) for m in managers}
        cpu_before = {m.name: cpu_seconds(m.pid) for m in managers}
        kueue_cpu_before = cpu_seconds(kueue_pid)
        created: dict[str, float] = {}
        failures: list[str] = []

        async def create(name: str) -> None:
            status, body = await side.kube.create(trainjob(name), NAMESPACE)
            created[name] = time.monotonic()
            if status != 201:
                failures.append(f"{name}: {status} {str(body)[:200]}")

        names = [f"burst-{i:05d}" for i in range(n)]
        spy = await start_profile(managers[0].pid, profile) if profile and side.name == "ours" else None
        start = time.monotonic()
        await asyncio.gather(*(create(name) for name in names))
        say(
            f"{side.name}: {n} queued TrainJobs created in {time.monotonic() - start:.1f}s ({len(failures)} failed)"
        )
        deadline = start + timeout
        last_said = start
        while time.monotonic() < deadline and len(timeline.completed) + len(timeline.failed) < n:
            await asyncio.sleep(0.5)
            if time.monotonic() - last_said > 30:
                last_said = time.monotonic()
                say(
                    f"{side.name}: {len(timeline.admitted)} admitted, {len(timeline.completed)} complete, "
                    f"{len(timeline.running)} running after {last_said - start:.0f}s"
                )
        done = time.monotonic()
        await asyncio.sleep(3)  # the writes after the last completion
        await stop_profile(spy)
        cpu = {m.name: round(cpu_seconds(m.pid) - cpu_before[m.name], 2) for m in managers}
        kueue_cpu = round(cpu_seconds(kueue_pid) - kueue_cpu_before, 2)
        after = {m.name: await m.scrape(session) for m in managers}
        rss = {m.name: round(peak_rss_mb(m.pid), 1) for m in managers}
        kueue_rss = round(peak_rss_mb(kueue_pid), 1)
    await timeline.stop()
    return _result(
        side,
        managers,
        before,
        after,
        n,
        quota,
        failures,
        created,
        timeline,
        start,
        done,
        cpu,
        rss,
        kueue_cpu,
        kueue_rss,
    )


def _result(
    side: harness.Side,
    managers: list[Manager],
    before: dict[str, dict[str, dict[str, float]]],
    after: dict[str, dict[str, dict[str, float]]],
    n: int,
    quota: int,
    failures: list[str],
    created: dict[str, float],
    timeline: Timeline,
    start: float,
    done: float,
    cpu: dict[str, float],
    rss: dict[str, float],
    kueue_cpu: float,
    kueue_rss: float,
) -> dict[str, Any]:
    requests: dict[str, float] = {}
    errors: dict[str, float] = {}
    for m in managers:
        d = delta(after[m.name], before[m.name])
        for verb, v in d["requests"].items():
            requests[verb] = requests.get(verb, 0.0) + v
        for ctrl, v in d["errors"].items():
            if v:
                errors[f"{m.name}/{ctrl}"] = v
    to_admitted = [timeline.admitted[k] - created[k] for k in created if k in timeline.admitted]
    to_complete = [timeline.completed[k] - created[k] for k in created if k in timeline.completed]
    last = max(timeline.completed.values(), default=done)
    return {
        "side": side.name,
        "n": n,
        "quota": quota,
        "create_failures": failures[:10],
        "create_failures_count": len(failures),
        "admitted": len(timeline.admitted),
        "admissions": timeline.admissions,
        "most_admitted_at_once": timeline.most_running,
        "completed": len(timeline.completed),
        "failed": len(timeline.failed),
        "workloads_finished": len(timeline.finished),
        "to_admitted_s": percentiles(to_admitted),
        "to_complete_s": percentiles(to_complete),
        "total_s": round(last - start, 2),
        "throughput_per_min": round(len(timeline.completed) / max(last - start, 1e-9) * 60, 1),
        "cpu_s": cpu,
        "cpu_s_total": round(sum(cpu.values()), 2),
        "peak_rss_mb": rss,
        "peak_rss_mb_total": round(sum(rss.values()), 1),
        "kueue_cpu_s": kueue_cpu,
        "kueue_peak_rss_mb": kueue_rss,
        "requests_by_verb": {k: int(v) for k, v in sorted(requests.items())},
        "requests_total": int(sum(requests.values())),
        "reconcile_errors": {k: int(v) for k, v in sorted(errors.items())},
        "reconcile_errors_total": int(sum(errors.values())),
    }


async def run_side(
    name: str,
    level: ApiLevel,
    n: int,
    quota: int,
    run_seconds: float,
    timeout: float,
    overrides: dict[str, Any],
    profile: Path | None = None,
) -> dict[str, Any]:
    workdir = harness.new_workdir()
    say(f"{name}: starting the control plane, the managers and Kueue {kq.version_for(level)} in {workdir}")
    timing = harness.PodTiming(run_seconds)
    try:
        side = await (
            harness.start_ours(workdir, NODES, timing=timing, level=level, config_overrides=overrides)
            if name == "ours"
            else harness.start_theirs(workdir, NODES, timing=timing, level=level)
        )
        try:
            kueue = await harness.add_kueue(side, level, config_overrides=kueue_overrides(level))
            result = await kueue_burst(side, workdir, kueue, n, quota, timeout, profile)
            result["level"] = level.name
            result["kueue"] = kq.version_for(level)
            result["pod_run_seconds"] = run_seconds
            result["config_overrides"] = overrides if name == "ours" else None
            result["kueue_config"] = {k: kueue.config[k] for k in ("controller", "clientConnection")}
            return result
        finally:
            await side.stop()
    finally:  # also after a failed or interrupted start
        shutil.rmtree(workdir, ignore_errors=True)


# -- the report ---------------------------------------------------------------------------------


def table(results: dict[str, dict[str, Any]]) -> str:
    ours, theirs = results.get("ours"), results.get("theirs")
    sides = [s for s in (ours, theirs) if s is not None]
    rows: list[tuple[str, list[float | None]]] = [
        ("TrainJobs admitted (of N)", [s["admitted"] for s in sides]),
        ("TrainJobs Complete (of N)", [s["completed"] for s in sides]),
        ("most admitted at once (quota)", [s["most_admitted_at_once"] for s in sides]),
    ]
    for key, label in (("to_admitted_s", "create to admitted"), ("to_complete_s", "create to Complete")):
        for q in ("p50", "p99", "max"):
            rows.append((f"{label} {q} (s)", [s[key][q] for s in sides]))
    rows += [
        ("total, first create to last Complete (s)", [s["total_s"] for s in sides]),
        ("TrainJobs completed per minute", [s["throughput_per_min"] for s in sides]),
        ("manager CPU (s)", [s["cpu_s_total"] for s in sides]),
        ("manager peak RSS (MB)", [s["peak_rss_mb_total"] for s in sides]),
        ("Kueue CPU (s)", [s["kueue_cpu_s"] for s in sides]),
        ("manager API requests", [s["requests_total"] for s in sides]),
        ("manager reconcile errors", [s["reconcile_errors_total"] for s in sides]),
    ]
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
    detail = "; ".join(
        f"{s['side']}: CPU {s['cpu_s']}, RSS {s['peak_rss_mb']}, Kueue RSS {s['kueue_peak_rss_mb']} MB, "
        f"requests {s['requests_by_verb']}, errors {s['reconcile_errors'] or 0}"
        for s in sides
    )
    return (
        f"{first['n']} TrainJobs (1 node, 1 CPU) on `{RUNTIME}` queued at once in one ClusterQueue of "
        f"{first['quota']} CPUs; Kueue {first['kueue']} at level {first['level']}; pods run "
        f"{first['pod_run_seconds']:g} s.\n\n" + "\n".join(lines) + f"\n\n{detail}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1000, help="TrainJobs in the burst (default 1000)")
    parser.add_argument(
        "--quota", type=int, default=100, help="CPUs of the ClusterQueue: TrainJobs at once (100)"
    )
    parser.add_argument("--level", choices=sorted(kq.KUEUE_VERSIONS), default=levels.DEFAULT.name)
    parser.add_argument("--sides", default="ours,theirs", help="ours, theirs or both (default both)")
    parser.add_argument(
        "--pod-run-seconds", type=float, default=harness.POD_RUN_SECONDS, help="each pod's run time"
    )
    parser.add_argument(
        "--timeout", type=float, default=3600.0, help="seconds to wait for every TrainJob per side"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("bench-results"), help="where kueue-burst.json/.md go"
    )
    parser.add_argument(
        "--profile", type=Path, help="py-spy our manager during the burst: collapsed stacks into this file"
    )
    args = parser.parse_args(argv)
    if args.n < 1 or args.quota < 1:
        parser.error("--n and --quota must be at least 1")
    if args.quota > NODES * 32:
        parser.error(f"--quota {args.quota}: the {NODES} KWOK nodes hold {NODES * 32} one-CPU pods at most")
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    for name in sides:
        if name not in ("ours", "theirs"):
            parser.error(f"--sides: unknown side {name!r} (ours, theirs)")
    return longrun.command(PROGRESS, lambda: run_sides(args, sides))


def run_sides(args: argparse.Namespace, sides: list[str]) -> int:
    level = levels.get(args.level)
    overrides = shipped_overrides()
    results: dict[str, dict[str, Any]] = {}
    for name in sides:
        with PROGRESS.scenario(name):
            results[name] = longrun.run_async(
                run_side(
                    name,
                    level,
                    args.n,
                    args.quota,
                    args.pod_run_seconds,
                    args.timeout,
                    overrides,
                    args.profile,
                )
            )
        say(json.dumps(results[name]))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kueue-burst.json").write_text(json.dumps(results, indent=2) + "\n")
    report = table(results)
    (args.out / "kueue-burst.md").write_text(report)
    print(report)
    incomplete = [
        r["side"]
        for r in results.values()
        if r["completed"] < r["n"] or r["admitted"] < r["n"] or r["create_failures_count"]
    ]
    if incomplete:
        say(f"not every TrainJob was admitted and completed on: {', '.join(incomplete)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
