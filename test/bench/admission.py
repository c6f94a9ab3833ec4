"""Admission under load, side by side: how fast the webhooks answer during the TrainJob burst.

The API server holds every create open while it waits for the webhooks, so their answers are
what ``kubectl apply`` (and every controller's create) waits on. For each API level in
``--level`` (repeated; default every level) and each of ``--runs`` runs, ``test/bench/burst.py``'s burst (N suspended TrainJobs
on ``torch-distributed``, 16 creating clients) runs on each side, one after the other on fresh
control planes: ours, and the Go managers of the level (v2.1: trainer v2.1.0 + jobset v0.10.1,
as every burst before; v2.3: trainer v2.3.0 + jobset v0.12.0; ``bench_level.py``). The
side that goes first alternates from run to run, so a machine getting busier or quieter does
not favour one side. Measured per run and side (``burst.py`` says how):

- creating the N: the whole create phase, and each create's wall time (p50, p99);
- the webhooks' answers as the API server timed them
  (``apiserver_admission_webhook_admission_duration_seconds``, the same binary on both sides):
  the TrainJob's (the level's webhooks on TrainJob creates: v2.1 the validator, v2.3 the
  defaulter and the validator) during the creates, every webhook
  (JobSets' too) through the whole burst, p50 / p99 interpolated in the histogram's buckets,
  the mean exact;
- the managers' own time per TrainJob answer (``controller_runtime_webhook_latency_seconds``);
- the burst figures that must not regress: TrainJob to JobSet p99, manager CPU, reconcile errors;
- the load average when each side ended (the machine is shared: say how loaded it was).

Writes ``admission.json`` (every run whole, and the medians) and ``admission.md`` (the medians
with ours / Go, and each run's figures) into ``--out``; a benchmark reports, it asserts nothing.

    python test/bench/admission.py --n 1000 --runs 3 --level v2.3  # what ``make bench`` runs
    python test/bench/admission.py --n 1000 --runs 3               # both levels
    python test/bench/admission.py --n 200 --runs 1 --level v2.1   # a quick look
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from manager import longrun

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_level  # what each API level gives a benchmark
import burst  # the burst scenario this one repeats (a sibling script, as scale.py imports it)

PROGRESS = longrun.Progress("bench-admission", unit="sides")
SIDES = ("ours", "theirs")
VALIDATOR = "validator.trainjob.trainer.kubeflow.org"
VALIDATOR_PATH = "/validate-trainer-kubeflow-org-v1alpha1-trainjob"


def _hook(window: str, hook: str, key: str) -> Callable[[dict[str, Any]], float | None]:
    def get(result: dict[str, Any]) -> float | None:
        stats = result.get(window, {}).get(hook)
        return None if stats is None or stats.get(key) is None else round(1000 * stats[key], 1)

    return get


def _figures(level: str) -> list[tuple[str, Callable[[dict[str, Any]], float | None]]]:
    """(row label, how to read it from one side's burst result), in the table's order."""
    rows: list[tuple[str, Callable[[dict[str, Any]], float | None]]] = [
        ("creating the N TrainJobs (s)", lambda r: r["created_all_s"]),
        ("one create p50 (ms)", lambda r: round(1000 * r["create_s"]["p50"], 1)),
        ("one create p99 (ms)", lambda r: round(1000 * r["create_s"]["p99"], 1)),
    ]
    for hook in bench_level.get(level).trainjob_webhooks():
        for key, label in (("p50_s", "p50"), ("p99_s", "p99"), ("mean_s", "mean")):
            rows.append(
                (f"`{hook}` answer {label}, during the creates (ms)", _hook("admission_creates", hook, key))
            )
    for key, label in (("p50_s", "p50"), ("p99_s", "p99"), ("mean_s", "mean")):
        rows.append(
            (
                f"every webhook's answer {label}, whole burst (ms)",
                _hook("admission_burst", burst.ALL_WEBHOOKS, key),
            )
        )
    rows += [
        (
            "TrainJob validator: the manager's own time per answer, mean (ms)",
            lambda r: r.get("webhook_served_mean_ms", {}).get(VALIDATOR_PATH),
        ),
        ("TrainJob to JobSet p99 (s)", lambda r: r["to_jobset_s"]["p99"]),
        ("TrainJob to Job p99 (s)", lambda r: r["to_job_s"]["p99"]),
        ("manager CPU (s)", lambda r: r["cpu_s_total"]),
        ("peak RSS (MB)", lambda r: r["peak_rss_mb_total"]),
        ("reconcile errors", lambda r: r["reconcile_errors_total"]),
        ("load average (1 min) at the side's end", lambda r: round(r["load_average"], 1)),
    ]
    return rows


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 3) if present else None


def level_report(level: str, runs: list[dict[str, dict[str, Any]]]) -> tuple[dict[str, Any], str]:
    """The medians over ``runs`` (each {side: burst result}) and their markdown."""
    n = runs[0]["ours"]["n"]
    medians: dict[str, dict[str, float | None]] = {}
    lines = [
        f"API level {level}: {n} suspended TrainJobs on `{burst.RUNTIME}`, {len(runs)} runs; ours against "
        f"the Go managers of the level. Medians over the runs (each run: one burst per side, one after "
        f"the other).",
        "",
        "| | ours | Go trainer + Go jobset | ours / Go |",
        "|---|---|---|---|",
    ]
    for label, get in _figures(level):
        label = label.replace("N TrainJobs", f"{n:,} TrainJobs")
        ours = median([get(run["ours"]) for run in runs])
        theirs = median([get(run["theirs"]) for run in runs])
        medians[label] = {"ours": ours, "theirs": theirs}
        ratio = burst._ratio(ours, theirs)
        lines.append(f"| {label} | {_fmt(ours)} | {_fmt(theirs)} | {ratio} |")
    lines += ["", "Each run (ours / Go):", ""]
    for i, run in enumerate(runs, 1):
        o, t = run["ours"], run["theirs"]
        first = run["first"]
        lines.append(
            f"- run {i} ({first} first): creating {o['created_all_s']} / {t['created_all_s']} s; validator "
            f"p99 {_fmt(_hook('admission_creates', VALIDATOR, 'p99_s')(o))} / "
            f"{_fmt(_hook('admission_creates', VALIDATOR, 'p99_s')(t))} ms, mean "
            f"{_fmt(_hook('admission_creates', VALIDATOR, 'mean_s')(o))} / "
            f"{_fmt(_hook('admission_creates', VALIDATOR, 'mean_s')(t))} ms; TrainJob to JobSet p99 "
            f"{o['to_jobset_s']['p99']} / {t['to_jobset_s']['p99']} s; CPU {o['cpu_s_total']} / "
            f"{t['cpu_s_total']} s; load {o['load_average']:.1f} / {t['load_average']:.1f}"
        )
    return {"level": level, "n": n, "runs": len(runs), "medians": medians}, "\n".join(lines) + "\n"


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:g}"


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1000, help="TrainJobs in each burst (default 1000)")
    parser.add_argument(
        "--runs", type=int, default=3, help="runs per level, each side once a run (default 3)"
    )
    parser.add_argument(
        "--level",
        action="append",
        choices=bench_level.LEVEL_NAMES,
        help=f"an API level to run at, repeated for several (default every level: "
        f"{', '.join(bench_level.LEVEL_NAMES)})",
    )
    parser.add_argument("--clients", type=int, default=16, help="concurrent creating clients (default 16)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for each burst's Jobs")
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="where admission.json/.md go")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser_ = parser()
    args = parser_.parse_args(argv)
    levels = list(dict.fromkeys(args.level or bench_level.LEVEL_NAMES))
    if args.runs < 1:
        parser_.error("--runs: at least 1")
    return longrun.command(PROGRESS, lambda: run(args, levels))


def run(args: argparse.Namespace, levels: list[str]) -> int:
    overrides = burst.shipped_overrides()
    results: dict[str, list[dict[str, Any]]] = {}
    for level in levels:
        for i in range(args.runs):
            order = SIDES if i % 2 == 0 else SIDES[::-1]
            one: dict[str, Any] = {"first": order[0]}
            for side in order:
                with PROGRESS.scenario(f"{level} run {i + 1} {side}"):
                    one[side] = longrun.run_async(
                        burst.run_side(
                            side,
                            args.n,
                            False,
                            args.timeout,
                            None,
                            overrides,
                            level=level,
                            clients=args.clients,
                        )
                    )
                PROGRESS.say(
                    f"{level} run {i + 1} {side}: created in {one[side]['created_all_s']} s, load "
                    f"{one[side]['load_average']:.1f}"
                )
            results.setdefault(level, []).append(one)
    reports = [level_report(level, runs) for level, runs in results.items()]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "admission.json").write_text(
        json.dumps(
            {
                "clients": args.clients,
                "medians": {r[0]["level"]: r[0] for r in reports},
                # every run whole, without the per-TrainJob latency lists
                "runs": {
                    level: [
                        {
                            k: (
                                {kk: vv for kk, vv in v.items() if not kk.endswith("_all_s")}
                                if k in SIDES
                                else v
                            )
                            for k, v in run.items()
                        }
                        for run in runs
                    ]
                    for level, runs in results.items()
                },
            },
            indent=2,
        )
        + "\n"
    )
    md = "\n".join(text for _, text in reports)
    (args.out / "admission.md").write_text(md)
    print(md)
    incomplete = [
        f"{level} {side}"
        for level, runs in results.items()
        for run in runs
        for side in SIDES
        if run[side]["jobs_seen"] < run[side]["n"] or run[side]["create_failures_count"]
    ]
    if incomplete:
        PROGRESS.say(f"incomplete bursts: {', '.join(incomplete)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
