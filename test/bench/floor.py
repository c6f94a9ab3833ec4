"""Floor scenario: the API server's own write rate for the burst's JobSets and Jobs.

On the same full local control plane as the burst (etcd, kube-apiserver, kube-controller-manager,
scheduler, KWOK nodes; ``trainer.conformance.harness``), at one API level (``--level``, default
v2.3; ``bench_level.py``: the level's CRDs, webhook configurations, shipped runtimes and
``--api-level``), our manager first turns one TrainJob on
``torch-distributed`` (suspended, or with ``--running`` not) into its JobSet and Jobs, which become
the templates. Then the manager is stopped and the webhook configurations are deleted (nothing
answers them any more), and a bare aiohttp client (no framework, no cache, no rate limit) writes N
copies at once: per copy its JobSet, then its Jobs (owned by that JobSet), all N lanes in flight
(aiohttp's 100 connections), as the managers would if they did nothing else. With ``--running``
the Jobs are unsuspended, so KCM creates their Pods and the scheduler binds them on the same
cores, as in the running burst.

Measured: time from the first write to the last Job created, JobSets and Jobs per second, and the
time from the start to each copy's JobSet and Job (p50/p99/max), to read the burst's
"TrainJob to JobSet / to Job" figures against.

Writes ``floor-<level>.json`` and ``.md`` (``floor-running-<level>.*`` with ``--running``).

    python test/bench/floor.py --n 1000 [--running] [--level v2.1]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_level  # what each API level gives a benchmark

from manager import longrun
from trainer.conformance import harness
from trainer.conformance.kube import Kube

NAMESPACE = "default"
RUNTIME = bench_level.RUNTIME
TEMPLATE = "floor-template"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSETS = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NAMESPACE}/jobsets"  # at every level
JOBS = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
WEBHOOK_CONFIGS = (
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
)
#: Labels the API server sets on a Job's pod template (from its uid and name): not copied.
JOB_SET_LABELS = (
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
)


#: Where the run is, for the line that says why it stopped (manager/longrun.py).
PROGRESS = longrun.Progress("bench", unit=None)


def say(message: str) -> None:
    PROGRESS.say(message)


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p99": None, "max": None}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    return {"p50": at(0.50), "p99": at(0.99), "max": round(ordered[-1], 3)}


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    keep = {
        k: meta[k] for k in ("name", "namespace", "labels", "annotations", "ownerReferences") if k in meta
    }
    return keep


def jobset_template(jobset: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": jobset["apiVersion"],
        "kind": jobset["kind"],
        "metadata": _meta(jobset),
        "spec": jobset["spec"],
    }


def job_template(job: dict[str, Any]) -> dict[str, Any]:
    spec = copy.deepcopy(job["spec"])
    spec.pop("selector", None)
    labels = spec["template"].get("metadata", {}).get("labels") or {}
    for key in JOB_SET_LABELS:
        labels.pop(key, None)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(job), "spec": spec}


def renamed(template: dict[str, Any], name: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(template).replace(TEMPLATE, name))
    return out


async def capture(
    kube: Kube, running: bool, level: bench_level.BenchLevel, timeout: float = 180.0
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The JobSet and Jobs our manager makes of one TrainJob, as templates."""
    status, body = await kube.create(level.trainjob(TEMPLATE, NAMESPACE, not running), NAMESPACE)
    if status != 201:
        raise RuntimeError(f"template TrainJob: {status} {body}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, jobset = await kube.request("GET", f"{JOBSETS}/{TEMPLATE}")
        _, jobs = await kube.request("GET", f"{JOBS}?labelSelector={JOBSET_LABEL}%3D{TEMPLATE}")
        items = (jobs or {}).get("items") or [] if isinstance(jobs, dict) else []
        if status == 200 and items:
            return jobset_template(jobset), [job_template(j) for j in items]
        await asyncio.sleep(0.5)
    raise RuntimeError("the template TrainJob got no JobSet and Jobs")


async def without_webhooks(kube: Kube, jobset: dict[str, Any], timeout: float = 60.0) -> None:
    """Delete every webhook configuration and return once the API server no longer calls them:
    its admission informer drops a deleted configuration a moment later, and until then each
    JobSet write fails calling the stopped manager (failurePolicy Fail). A dry-run create of the
    template JobSet is admitted only then."""
    for path in WEBHOOK_CONFIGS:
        _, listed = await kube.request("GET", path)
        for item in (listed or {}).get("items") or []:
            status, body = await kube.request("DELETE", f"{path}/{item['metadata']['name']}")
            if status not in (200, 202, 404):
                raise RuntimeError(f"deleting {item['metadata']['name']}: {status} {body}")
    deadline = time.monotonic() + timeout
    while True:
        status, body = await kube.request("POST", f"{JOBSETS}?dryRun=All", renamed(jobset, "floor-probe"))
        if status == 201:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"JobSet writes still refused {timeout:.0f}s after the webhooks' removal: {status} {body}"
            )
        await asyncio.sleep(0.1)


async def write(kube: Kube, n: int, jobset: dict[str, Any], jobs: list[dict[str, Any]]) -> dict[str, Any]:
    names = [f"floor-{i:05d}" for i in range(n)]
    to_jobset: dict[str, float] = {}
    to_job: dict[str, float] = {}
    failures: list[str] = []
    start = time.monotonic()

    async def lane(name: str) -> None:
        status, body = await kube.create(renamed(jobset, name), NAMESPACE)
        to_jobset[name] = time.monotonic() - start
        if status != 201:
            failures.append(f"jobset {name}: {status} {str(body)[:200]}")
            return
        owner = {
            "apiVersion": body["apiVersion"],
            "kind": body["kind"],
            "name": name,
            "uid": body["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        for template in jobs:
            job = renamed(template, name)
            job["metadata"]["ownerReferences"] = [owner]
            status, body = await kube.create(job, NAMESPACE)
            if status != 201:
                failures.append(f"job of {name}: {status} {str(body)[:200]}")
                return
        to_job[name] = time.monotonic() - start

    async def guarded(name: str) -> None:
        try:
            await lane(name)
        except (TimeoutError, aiohttp.ClientError) as err:  # a loaded machine: a failed copy, counted
            failures.append(f"{name}: {type(err).__name__} {err}")

    await asyncio.gather(*(guarded(name) for name in names))
    total = time.monotonic() - start
    written = len(to_jobset) + len(to_job) * len(jobs)
    return {
        "n": n,
        "jobs_per_jobset": len(jobs),
        "failures": failures[:10],
        "failures_count": len(failures),
        "total_s": round(total, 2),
        "objects_per_s": round(written / total, 1),
        "jobsets_per_s": round(len(to_jobset) / total, 1),
        "to_jobset_s": percentiles(list(to_jobset.values())),
        "to_job_s": percentiles(list(to_job.values())),
    }


async def run(n: int, running: bool, level: bench_level.BenchLevel) -> dict[str, Any]:
    workdir = harness.new_workdir()
    say(f"floor: the control plane and our manager at level {level.name} (templates) in {workdir}")
    try:
        side = await harness.start_ours(workdir, level=level.harness_level, runtimes=level.runtimes())
        try:
            jobset, jobs = await capture(side.kube, running, level)
            for proc in side.processes:  # from here on, nothing but this client writes
                proc.stop(timeout=15)
            side.processes.clear()
            await without_webhooks(side.kube, jobset)
            result = await write(side.kube, n, jobset, jobs)
            result["running"] = running
            result["level"] = level.name
            say(json.dumps(result))
            return result
        finally:
            await side.stop()
    finally:  # also after a failed or interrupted start
        shutil.rmtree(workdir, ignore_errors=True)


def table(result: dict[str, Any]) -> str:
    mode = "running" if result["running"] else "suspended"
    rows = [
        ("first write to last Job (s)", result["total_s"]),
        ("objects written per second", result["objects_per_s"]),
        ("JobSets per second", result["jobsets_per_s"]),
        *((f"start to JobSet {q} (s)", result["to_jobset_s"][q]) for q in ("p50", "p99", "max")),
        *((f"start to Job {q} (s)", result["to_job_s"][q]) for q in ("p50", "p99", "max")),
    ]
    lines = ["| floor (bare aiohttp client) | |", "|---|---|"]
    lines += [f"| {label} | {'n/a' if v is None else f'{v:g}'} |" for label, v in rows]
    level = result.get("level", bench_level.UNRECORDED)
    return (
        f"{result['n']} {mode} JobSets of `{RUNTIME}` and their {result['jobs_per_jobset']} Job(s) each, "
        f"written at once by a bare client (API level {level}).\n\n" + "\n".join(lines) + "\n"
    )


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1000, help="JobSets (default 1000)")
    parser.add_argument("--running", action="store_true", help="unsuspended JobSets and Jobs (pods on KWOK)")
    bench_level.add_argument(parser)
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="where floor-*.json/.md go")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return longrun.command(PROGRESS, lambda: floor(args))


def floor(args: argparse.Namespace) -> int:
    level = bench_level.get(args.level)
    result = longrun.run_async(run(args.n, args.running, level))
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "floor-running" if args.running else "floor"
    (args.out / level.result_name(stem, ".json")).write_text(json.dumps(result, indent=2) + "\n")
    report = table(result)
    (args.out / level.result_name(stem, ".md")).write_text(report)
    print(report)
    return 1 if result["failures_count"] else 0


if __name__ == "__main__":
    sys.exit(main())
