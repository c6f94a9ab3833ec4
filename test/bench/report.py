"""Assemble one ``make bench`` run: one JSON file, one markdown table, one PNG.

Reads what the scenario scripts wrote into ``--in`` at the API level ``--level`` (default v2.3,
what ``make bench`` runs): ``burst-<level>.json``, ``burst-running-<level>.json``,
``kueue-burst.json``, ``scale-<pods>-<level>.json``, ``admission.json`` (its medians of the
level), ``framework.json`` (no API level: the framework alone), ``floor-<level>.json``,
``floor-running-<level>.json``. A file named without its level (written before the scenarios
took ``--level``) is read when the level it records is ``--level`` (none recorded: v2.1). A
missing one is reported as not run. Writes:

- ``bench.json``: every scenario's results under one key each, and ``levels``: the API level of
  each scenario's figures;
- ``bench.md``: the summary table (ours against the Go managers, kopf, controller-runtime and the
  floor, with ratios, each row with the API level it was taken at), then each scenario's own
  table;
- ``--png`` (default ``bench-latency.png`` in ``--in``): the burst's latency distribution per
  manager (TrainJob to JobSet and to Job, suspended and running), needs matplotlib (``.[bench]``).

    python test/bench/report.py --in bench-results --png docs/bench-latency.png [--level v2.1]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_level  # what each API level gives a benchmark


def load(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


NO_LEVEL = "none"
"""The level column of the framework scenario (``manager/`` alone, no Trainer API)."""


def recorded_level(data: Any) -> str | None:
    """The API level a scenario's result says it ran at: its own ``level``, else its sides'
    (``ours``, ``theirs``); ``bench_level.UNRECORDED`` for a result from before levels were
    recorded; None for no result."""
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("level"), str):
        return str(data["level"])
    for side in ("ours", "theirs"):
        if isinstance(data.get(side), dict) and isinstance(data[side].get("level"), str):
            return str(data[side]["level"])
    return bench_level.UNRECORDED


def load_level(directory: Path, stem: str, level: bench_level.BenchLevel) -> Any:
    """``<stem>-<level>.json``, else ``<stem>.json`` when the level it records is ``level``."""
    named = load(directory / level.result_name(stem, ".json"))
    if named is not None:
        return named
    unnamed = load(directory / f"{stem}.json")
    return unnamed if recorded_level(unnamed) == level.name else None


def _scale(directory: Path, level: bench_level.BenchLevel) -> tuple[Any, str | None]:
    """The level's scale result with the most Pods, and its markdown file's name."""
    found = []
    for path in directory.glob("scale-*.json"):
        data = load(path)
        if recorded_level(data) == level.name:
            pods = (data.get("pods") or {}).get("relevant", 0) + (data.get("pods") or {}).get("unrelated", 0)
            found.append((pods, path))
    if not found:
        return None, None
    _pods, path = max(found)
    md = path.with_suffix(".md")
    return load(path), md.name if md.is_file() else None


def _admission(directory: Path, level: bench_level.BenchLevel) -> Any:
    data = load(directory / "admission.json")
    return ((data or {}).get("medians") or {}).get(level.name)


def collect(directory: Path, level: bench_level.BenchLevel) -> dict[str, Any]:
    scale, _md = _scale(directory, level)
    data: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.node()}: {platform.machine()}, {_cores()} cores (shared)",
        "level": level.name,
        "burst": load_level(directory, "burst", level),
        "burst_running": load_level(directory, "burst-running", level),
        "kueue_burst": load_level(directory, "kueue-burst", level),
        "admission": _admission(directory, level),
        "scale": scale,
        "framework": load(directory / "framework.json"),
        "floor": load_level(directory, "floor", level),
        "floor_running": load_level(directory, "floor-running", level),
    }
    data["levels"] = {
        key: NO_LEVEL if key == "framework" else recorded_level(data[key])
        for key in SCENARIOS
        if data.get(key) is not None
    }
    return data


SCENARIOS = (
    "burst",
    "burst_running",
    "kueue_burst",
    "admission",
    "scale",
    "framework",
    "floor",
    "floor_running",
)


def _cores() -> int:
    import os

    return os.cpu_count() or 0


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "n/a"


def _fmt(v: Any) -> str:
    return "n/a" if v is None else f"{v:g}" if isinstance(v, int | float) else str(v)


Row = tuple[str, Any, Any, str, str]
"""What, ours, the other, what the other is, the API level the figures were taken at."""


def summary(data: dict[str, Any]) -> str:
    levels = data.get("levels") or {}
    rows: list[Row] = []
    for key, mode in (("burst", "suspended"), ("burst_running", "running")):
        burst = data.get(key)
        if not burst:
            rows.append((f"burst, {mode}", None, None, "not run", ""))
            continue
        level = levels.get(key, "")
        ours, go = burst.get("ours"), burst.get("theirs")
        n = (ours or go or {}).get("n")
        for label, get in (
            ("TrainJob to JobSet p99 (s)", lambda s: s["to_jobset_s"]["p99"]),
            ("TrainJob to Job p99 (s)", lambda s: s["to_job_s"]["p99"]),
            ("first create to last Job (s)", lambda s: s["total_s"]),
            ("manager CPU (s)", lambda s: s["cpu_s_total"]),
            ("peak RSS (MB)", lambda s: s["peak_rss_mb_total"]),
            ("reconcile errors", lambda s: s["reconcile_errors_total"]),
        ):
            rows.append(
                (
                    f"burst {n} {mode}: {label}",
                    get(ours) if ours else None,
                    get(go) if go else None,
                    "Go trainer + Go jobset",
                    level,
                )
            )
        floor_key = "floor" if key == "burst" else "floor_running"
        floor = data.get(floor_key)
        if floor and ours:
            rows.append(
                (
                    f"burst {n} {mode}: first create to last Job (s), against the floor",
                    ours["total_s"],
                    floor["total_s"],
                    "floor (bare client, JobSets + Jobs only)",
                    _both(level, levels.get(floor_key, "")),
                )
            )
    rows += _kueue_rows(data.get("kueue_burst"), levels.get("kueue_burst", ""))
    rows += _admission_rows(data.get("admission"), levels.get("admission", ""))
    fw = data.get("framework")
    if fw and "ours" in fw:
        ours = fw["ours"]
        for other in ("kopf", "controller-runtime", "python-io", "floor"):
            if other not in fw:
                continue
            theirs = fw[other]
            rows.append(
                (
                    f"framework {ours['n']}: objects/s",
                    ours["objects_per_s"],
                    theirs["objects_per_s"],
                    other,
                    NO_LEVEL,
                )
            )
            if other != "floor":
                rows.append(
                    (
                        f"framework {ours['n']}: CPU per 1,000 reconciles (s)",
                        ours["cpu_s_per_1000"],
                        theirs["cpu_s_per_1000"],
                        other,
                        NO_LEVEL,
                    )
                )
                rows.append(
                    (
                        f"framework {ours['n']}: peak RSS (MB)",
                        ours["peak_rss_mb"],
                        theirs["peak_rss_mb"],
                        other,
                        NO_LEVEL,
                    )
                )
    elif not fw:
        rows.append(("framework", None, None, "not run", ""))
    rows += _scale_rows(data.get("scale"), levels.get("scale", ""))
    lines = [
        "| measure | API level | ours | other | ours / other | other is |",
        "|---|---|---|---|---|---|",
    ]
    for what, ours_v, other_v, against, level in rows:
        lines.append(
            f"| {what} | {level} | {_fmt(ours_v)} | {_fmt(other_v)} | {_ratio(ours_v, other_v)} | {against} |"
        )
    return "\n".join(lines) + "\n"


def _both(a: str, b: str) -> str:
    """One level, or both when two results of different levels are compared."""
    return a if a == b else f"{a} / {b}"


def _kueue_rows(kueue: dict[str, Any] | None, level: str) -> list[Row]:
    """The Kueue burst (``kueue_burst.py``): time to the last completion, CPU, errors."""
    if not kueue:
        return [("burst with Kueue", None, None, "not run (make bench-kueue)", "")]
    ours, go = kueue.get("ours"), kueue.get("theirs")
    first = ours or go or {}
    rows: list[Row] = []
    for label, get in (
        ("first create to last Complete (s)", lambda s: s["total_s"]),
        ("manager CPU (s)", lambda s: s["cpu_s_total"]),
        ("Kueue CPU (s)", lambda s: s["kueue_cpu_s"]),
        ("reconcile errors", lambda s: s["reconcile_errors_total"]),
    ):
        rows.append(
            (
                f"Kueue burst {first.get('n')} / quota {first.get('quota')}: {label}",
                get(ours) if ours else None,
                get(go) if go else None,
                "Go trainer + Go jobset",
                level,
            )
        )
    return rows


def _scale_rows(scale: dict[str, Any] | None, level: str) -> list[Row]:
    """The scale scenario (``scale.py``): its final state (S2), ours against the Go managers."""
    if not scale:
        return [("scale", None, None, "not run (test/bench/scale.py)", "")]
    final = (scale.get("states") or {}).get("S2") or {}
    ours, go = final.get("ours"), final.get("theirs")
    pods = scale.get("pods") or {}
    total = pods.get("relevant", 0) + pods.get("unrelated", 0)
    rows: list[Row] = []
    for label, get in (
        ("every controller's caches synced (s)", lambda s: s["caches_synced_s"]),
        ("steady RSS (MB)", lambda s: s["rss_mb_total"]),
        ("CPU until steady (s)", lambda s: s["cpu_s_total"]),
    ):
        rows.append(
            (
                f"scale {total} Pods: {label}",
                get(ours) if ours else None,
                get(go) if go else None,
                " + ".join(go["processes"]) if go else "Go trainer + Go jobset",
                level,
            )
        )
    return rows


ADMISSION_ROWS = (
    "one create p99 (ms)",
    "`validator.trainjob.trainer.kubeflow.org` answer p99, during the creates (ms)",
    "TrainJob to JobSet p99 (s)",
)
"""The admission benchmark's medians the summary shows (its own table has them all)."""


def _admission_rows(admission: dict[str, Any] | None, level: str) -> list[Row]:
    """The admission benchmark (``admission.py``): medians over its runs."""
    if not admission:
        return [("admission", None, None, "not run (make bench-admission)", "")]
    medians = admission.get("medians") or {}
    rows: list[Row] = []
    for label in ADMISSION_ROWS:
        if label in medians:
            rows.append(
                (
                    f"admission {admission.get('n')}, median of {admission.get('runs')}: {label}",
                    medians[label].get("ours"),
                    medians[label].get("theirs"),
                    "Go trainer + Go jobset",
                    level,
                )
            )
    return rows


def sections(directory: Path, data: dict[str, Any], level: bench_level.BenchLevel) -> str:
    """Each scenario's own table: the markdown next to the result ``collect`` read."""
    _scale_data, scale_md = _scale(directory, level)
    names: list[str | None] = []
    for key, stem in (
        ("burst", "burst"),
        ("burst_running", "burst-running"),
        ("kueue_burst", "kueue-burst"),
        ("admission", "admission"),
    ):
        names.append(_md_of(directory, stem, level) if data.get(key) else None)
    names.append(scale_md)
    names.append("framework.md" if data.get("framework") else None)
    for key, stem in (("floor", "floor"), ("floor_running", "floor-running")):
        names.append(_md_of(directory, stem, level) if data.get(key) else None)
    parts = [
        f"### {name}\n\n" + (directory / name).read_text()
        for name in names
        if name is not None and (directory / name).is_file()
    ]
    return "\n".join(parts)


def _md_of(directory: Path, stem: str, level: bench_level.BenchLevel) -> str:
    named = level.result_name(stem, ".md")
    return named if (directory / named).is_file() else f"{stem}.md"


def plot(data: dict[str, Any], png: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report: no matplotlib (pip install -e '.[bench]'): no PNG", file=sys.stderr)
        return False
    bursts = [(k, m) for k, m in (("burst", "suspended"), ("burst_running", "running")) if data.get(k)]
    if not bursts:
        return False
    fig, axes = plt.subplots(1, len(bursts), figsize=(6.5 * len(bursts), 4.5), squeeze=False)
    styles = {"ours": ("tab:blue", "ours (Python)"), "theirs": ("tab:orange", "Go trainer + Go jobset")}
    for ax, (key, mode) in zip(axes[0], bursts, strict=True):
        n = 0
        for side, (color, label) in styles.items():
            result = data[key].get(side)
            if not result:
                continue
            n = result["n"]
            for field, line, what in (("to_jobset_all_s", "--", "JobSet"), ("to_job_all_s", "-", "Job")):
                values = result.get(field) or []
                if values:
                    ys = [100 * (i + 1) / n for i in range(len(values))]
                    ax.plot(values, ys, line, color=color, label=f"{label}: to {what}")
        level = (data.get("levels") or {}).get(key, "")
        ax.set_title(f"{n} {mode} TrainJobs created at once (API level {level})")
        ax.set_xlabel("seconds from TrainJob create to its JobSet / first Job")
        ax.set_ylabel("% of TrainJobs")
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    fig.suptitle(f"make bench, {data['date']}, {data['machine']}", fontsize=9)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return True


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--in", dest="directory", type=Path, default=Path("bench-results"))
    parser.add_argument("--png", type=Path, help="where the latency PNG goes (default: in --in)")
    bench_level.add_argument(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    level = bench_level.get(args.level)
    data = collect(args.directory, level)
    (args.directory / "bench.json").write_text(json.dumps(data, indent=2) + "\n")
    md = (
        f"# make bench, {data['date']}\n\n{data['machine']}\n\nAPI level {level.api.describe()}; "
        "the framework scenario has none (`manager/` alone).\n\n## Summary\n\n"
        + summary(data)
        + "\n## Scenarios\n\n"
        + sections(args.directory, data, level)
    )
    (args.directory / "bench.md").write_text(md)
    png = args.png or args.directory / "bench-latency.png"
    if plot(data, png):
        print(f"report: {png}", file=sys.stderr)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
