"""The Kueue burst benchmark's bookkeeping: admissions at once, completions, the ratio table."""

from __future__ import annotations

import sys
from typing import Any

from bench_scripts import BENCH, load

sys.path.insert(0, str(BENCH))  # kueue_burst imports burst
kb = load("kueue_burst", "kueue_burst")


def _wl(owner: str, *conditions: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"trainjob-{owner}-abcde",
            "ownerReferences": [{"kind": "TrainJob", "name": owner}],
        },
        "status": {"conditions": [{"type": c, "status": "True"} for c in conditions]},
    }


def test_the_timeline_counts_admissions_and_the_most_admitted_at_once() -> None:
    timeline = kb.Timeline(kube=None)
    timeline._workload(_wl("a", "QuotaReserved", "Admitted"), 1.0)
    timeline._workload(_wl("b", "QuotaReserved", "Admitted"), 2.0)
    timeline._workload(_wl("a", "QuotaReserved", "Admitted"), 2.5)  # a repeat: counted once
    timeline._workload(_wl("a", "Finished"), 3.0)
    timeline._workload(_wl("c", "QuotaReserved", "Admitted"), 4.0)
    timeline._workload(_wl("b"), 5.0)  # evicted: no longer admitted
    timeline._workload(_wl("b", "QuotaReserved", "Admitted"), 6.0)  # admitted again
    timeline._trainjob(
        {"metadata": {"name": "a"}, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}, 3.1
    )
    assert timeline.most_running == 2
    assert timeline.admissions == 4
    assert timeline.admitted == {"a": 1.0, "b": 2.0, "c": 4.0}
    assert timeline.finished == {"a": 3.0}
    assert timeline.completed == {"a": 3.1}
    assert timeline.running == {"b", "c"}


def _side(name: str, total: float, cpu: float) -> dict[str, Any]:
    pct = {"p50": 1.0, "p99": 2.0, "max": 3.0}
    return {
        "side": name,
        "n": 10,
        "quota": 5,
        "level": "v2.3",
        "kueue": "v0.17.0",
        "pod_run_seconds": 2.0,
        "admitted": 10,
        "completed": 10,
        "most_admitted_at_once": 5,
        "to_admitted_s": pct,
        "to_complete_s": pct,
        "total_s": total,
        "throughput_per_min": 60.0,
        "cpu_s": {"m": cpu},
        "cpu_s_total": cpu,
        "peak_rss_mb": {"m": 100.0},
        "peak_rss_mb_total": 100.0,
        "kueue_cpu_s": 4.0,
        "kueue_peak_rss_mb": 80.0,
        "requests_by_verb": {"PUT": 1},
        "requests_total": 1,
        "reconcile_errors": {},
        "reconcile_errors_total": 0,
    }


def test_the_table_has_a_ratio_column_when_both_sides_ran() -> None:
    text = kb.table({"ours": _side("ours", 50.0, 10.0), "theirs": _side("theirs", 100.0, 40.0)})
    assert "| total, first create to last Complete (s) | 50 | 100 | 0.50x |" in text
    assert "| manager CPU (s) | 10 | 40 | 0.25x |" in text
    assert "one ClusterQueue of 5 CPUs; Kueue v0.17.0 at level v2.3" in text
    only = kb.table({"ours": _side("ours", 50.0, 10.0)})
    assert "ours / Go" not in only
