"""Assemble one ``make bench`` run: one JSON file, one markdown table, one PNG.

Reads what the scenario scripts wrote into ``--in`` (``burst.json``, ``burst-running.json``,
``kueue-burst.json``, ``scale-*.json``, ``framework.json``, ``floor.json``, ``floor-running.json``;
a missing one is reported as not run) and writes:

- ``bench.json``: every scenario's results under one key each;
- ``bench.md``: the summary table (ours against the Go managers, kopf, controller-runtime and the
  floor, with ratios), then each scenario's own table;
- ``--png`` (default ``bench-latency.png`` in ``--in``): the burst's latency distribution per
  manager (TrainJob to JobSet and to Job, suspended and running), needs matplotlib (``.[bench]``).

    python test/bench/report.py --in bench-results --png docs/bench-latency.png
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path
from typing import Any


def load(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


def collect(directory: Path) -> dict[str, Any]:
    scale = sorted(directory.glob("scale-*.json"))
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.node()}: {platform.machine()}, {_cores()} cores (shared)",
        "burst": load(directory / "burst.json"),
        "burst_running": load(directory / "burst-running.json"),
        "kueue_burst": load(directory / "kueue-burst.json"),
        "scale": load(scale[-1]) if scale else None,
        "framework": load(directory / "framework.json"),
        "floor": load(directory / "floor.json"),
        "floor_running": load(directory / "floor-running.json"),
    }


def _cores() -> int:
    import os

    return os.cpu_count() or 0


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "n/a"


def _fmt(v: Any) -> str:
    return "n/a" if v is None else f"{v:g}" if isinstance(v, int | float) else str(v)


def summary(data: dict[str, Any]) -> str:
    rows: list[tuple[str, Any, Any, str]] = []  # what, ours, theirs, against
    for key, mode in (("burst", "suspended"), ("burst_running", "running")):
        burst = data.get(key)
        if not burst:
            rows.append((f"burst, {mode}", None, None, "not run"))
            continue
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
                )
            )
        floor = data.get("floor" if key == "burst" else "floor_running")
        if floor and ours:
            rows.append(
                (
                    f"burst {n} {mode}: first create to last Job (s), against the floor",
                    ours["total_s"],
                    floor["total_s"],
                    "floor (bare client, JobSets + Jobs only)",
                )
            )
    rows += _kueue_rows(data.get("kueue_burst"))
    fw = data.get("framework")
    if fw and "ours" in fw:
        ours = fw["ours"]
        for other in ("kopf", "controller-runtime", "floor"):
            if other not in fw:
                continue
            theirs = fw[other]
            rows.append(
                (f"framework {ours['n']}: objects/s", ours["objects_per_s"], theirs["objects_per_s"], other)
            )
            if other != "floor":
                rows.append(
                    (
                        f"framework {ours['n']}: CPU per 1,000 reconciles (s)",
                        ours["cpu_s_per_1000"],
                        theirs["cpu_s_per_1000"],
                        other,
                    )
                )
                rows.append(
                    (
                        f"framework {ours['n']}: peak RSS (MB)",
                        ours["peak_rss_mb"],
                        theirs["peak_rss_mb"],
                        other,
                    )
                )
    elif not fw:
        rows.append(("framework", None, None, "not run"))
    if not data.get("scale"):
        rows.append(("scale", None, None, "not run (test/bench/scale.py)"))
    lines = ["| measure | ours | other | ours / other | other is |", "|---|---|---|---|---|"]
    for what, ours_v, other_v, against in rows:
        lines.append(f"| {what} | {_fmt(ours_v)} | {_fmt(other_v)} | {_ratio(ours_v, other_v)} | {against} |")
    return "\n".join(lines) + "\n"


def _kueue_rows(kueue: dict[str, Any] | None) -> list[tuple[str, Any, Any, str]]:
    """The Kueue burst (``kueue_burst.py``): time to the last completion, CPU, errors."""
    if not kueue:
        return [("burst with Kueue", None, None, "not run (make bench-kueue)")]
    ours, go = kueue.get("ours"), kueue.get("theirs")
    first = ours or go or {}
    rows = []
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
            )
        )
    return rows


def sections(directory: Path) -> str:
    parts = []
    for name in (
        "burst.md",
        "burst-running.md",
        "kueue-burst.md",
        *sorted(p.name for p in directory.glob("scale-*.md")),
    ):
        if (directory / name).is_file():
            parts.append(f"### {name}\n\n" + (directory / name).read_text())
    for name in ("framework.md", "floor.md", "floor-running.md"):
        if (directory / name).is_file():
            parts.append(f"### {name}\n\n" + (directory / name).read_text())
    return "\n".join(parts)


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
        ax.set_title(f"{n} {mode} TrainJobs created at once")
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--in", dest="directory", type=Path, default=Path("bench-results"))
    parser.add_argument("--png", type=Path, help="where the latency PNG goes (default: in --in)")
    args = parser.parse_args(argv)
    data = collect(args.directory)
    (args.directory / "bench.json").write_text(json.dumps(data, indent=2) + "\n")
    md = (
        f"# make bench, {data['date']}\n\n{data['machine']}\n\n## Summary\n\n"
        + summary(data)
        + "\n## Scenarios\n\n"
        + sections(args.directory)
    )
    (args.directory / "bench.md").write_text(md)
    png = args.png or args.directory / "bench-latency.png"
    if plot(data, png):
        print(f"report: {png}", file=sys.stderr)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
