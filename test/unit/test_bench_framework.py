"""The framework benchmark's rounds: the rotated order, the medians and the per-round ratios."""

from __future__ import annotations

from typing import Any

from bench_scripts import load

fw = load("framework")


def result(side: str, *, rate: float, cpu: float | None, p99: float = 1.0) -> dict[str, Any]:
    return {
        "side": side,
        "n": 1000,
        "concurrency": 50,
        "complete": True,
        "create_failures": [],
        "create_failures_count": 0,
        "objects_per_s": rate,
        "total_s": 1000 / rate,
        "latency_s": {"p50": p99 / 2, "p99": p99, "max": p99 * 2},
        "cpu_s": cpu,
        "cpu_s_per_1000": cpu,
        "peak_rss_mb": None if cpu is None else 80.0,
    }


def test_each_round_starts_with_another_side() -> None:
    sides = ["ours", "kopf", "floor"]
    orders = [fw.rotated(sides, r) for r in range(3)]
    assert orders == [["ours", "kopf", "floor"], ["kopf", "floor", "ours"], ["floor", "ours", "kopf"]]
    assert {tuple(sorted(o)) for o in orders} == {("floor", "kopf", "ours")}


def test_one_round_is_reported_as_it_ran() -> None:
    only = {"ours": result("ours", rate=900, cpu=1.2), "kopf": result("kopf", rate=500, cpu=7.0)}
    assert fw.combine([only]) is only
    text = fw.table(only)
    assert "one round" in text
    assert "| controller CPU (s) | 1.2 | 7 | 0.17x |" in text


def test_rounds_give_medians_and_the_median_of_the_rounds_ratios() -> None:
    # kopf is slow in the first round and fast in the others, ours steadier: the ratio of each
    # round is what the table's ratio column is made of, not the ratio of the two medians
    rounds = [
        {"ours": result("ours", rate=900, cpu=1.2), "kopf": result("kopf", rate=500, cpu=9.0)},
        {"ours": result("ours", rate=1000, cpu=1.3), "kopf": result("kopf", rate=600, cpu=6.5)},
        {"ours": result("ours", rate=800, cpu=1.4), "kopf": result("kopf", rate=550, cpu=7.0)},
    ]
    combined = fw.combine(rounds)
    ours, kopf = combined["ours"], combined["kopf"]
    assert ours["cpu_s"] == 1.3 and kopf["cpu_s"] == 7.0
    assert ours["objects_per_s"] == 900 and kopf["objects_per_s"] == 550
    assert ours["latency_s"]["p99"] == 1.0
    assert [run["cpu_s"] for run in ours["rounds"]] == [1.2, 1.3, 1.4]
    assert ours["round_ratios"]["kopf"]["cpu_s"] == [0.133, 0.2, 0.2]
    text = fw.table(combined)
    assert "3 rounds" in text
    # median of 0.133 / 0.2 / 0.2, the range beside it; 1.3 / 7.0 would say 0.19x
    assert "| controller CPU (s) | 1.3 | 7 | 0.20x (0.13-0.20x) |" in text


def test_a_failed_round_fails_the_side_and_a_missing_figure_is_left_out() -> None:
    failed = result("ours", rate=700, cpu=1.5)
    failed["complete"] = False
    failed["create_failures_count"] = 2
    failed["create_failures"] = ["cm-1: 500", "cm-2: 500"]
    rounds = [
        {"ours": result("ours", rate=900, cpu=1.2), "floor": result("floor", rate=1000, cpu=None)},
        {"ours": failed, "floor": result("floor", rate=950, cpu=None)},
    ]
    combined = fw.combine(rounds)
    assert combined["ours"]["complete"] is False
    assert combined["ours"]["create_failures_count"] == 2
    assert combined["floor"]["cpu_s"] is None
    assert combined["ours"]["round_ratios"]["floor"]["objects_per_s"] == [0.9, 0.737]
    assert combined["ours"]["round_ratios"]["floor"]["cpu_s"] == [None, None]
    text = fw.table(combined)
    assert "| controller CPU (s) | 1.35 | n/a | n/a |" in text
