"""The burst benchmark's arithmetic: metrics parsing, deltas, percentiles and the ratio table."""

from __future__ import annotations

from bench_scripts import load

burst = load("burst")

METRICS = """# HELP rest_client_requests_total Number of HTTP requests
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 3
rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST"} 10
rest_client_requests_total{code="409",host="127.0.0.1:6443",method="PUT"} 2
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="PUT"} 5
controller_runtime_reconcile_errors_total{controller="trainjob_controller"} 4
controller_runtime_reconcile_errors_total{controller="jobset"} 0
controller_runtime_reconcile_total{controller="jobset",result="success"} 6
controller_runtime_reconcile_total{controller="jobset",result="error"} 1
"""


def test_requests_by_verb_and_errors_by_controller_are_summed_and_differenced() -> None:
    after = burst.summarise(burst.parse_metrics(METRICS))
    assert after == {
        "requests": {"GET": 3.0, "POST": 10.0, "PUT": 7.0},
        "codes": {"200": 8.0, "201": 10.0, "409": 2.0},
        "errors": {"trainjob_controller": 4.0, "jobset": 0.0},
        "reconciles": {"jobset": 7.0},
        "served_s": {},
        "served": {},
    }
    before = {
        "requests": {"GET": 1.0},
        "codes": {"200": 1.0},
        "errors": {"trainjob_controller": 4.0},
        "reconciles": {"jobset": 2.0},
    }
    assert burst.delta(after, before) == {
        "requests": {"GET": 2.0, "POST": 10.0, "PUT": 7.0},
        "codes": {"200": 7.0, "201": 10.0, "409": 2.0},
        "errors": {"trainjob_controller": 0.0, "jobset": 0.0},
        "reconciles": {"jobset": 5.0},
        "served_s": {},
        "served": {},
    }


def test_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]
    assert burst.percentiles(values) == {"p50": 51.0, "p99": 100.0, "max": 100.0}
    assert burst.percentiles([]) == {"p50": None, "p99": None, "max": None}


def _side(name: str, scale: float) -> dict[str, object]:
    lat = {"p50": 1.0 * scale, "p99": 2.0 * scale, "max": 3.0 * scale}
    return {
        "side": name,
        "n": 10,
        "running": False,
        "to_jobset_s": lat,
        "to_job_s": lat,
        "total_s": 4.0 * scale,
        "cpu_s": {},
        "cpu_s_total": 5.0 * scale,
        "peak_rss_mb": {},
        "peak_rss_mb_total": 100.0,
        "requests_by_verb": {"POST": 20},
        "requests_total": 20,
        "reconcile_errors": {},
        "reconcile_errors_total": 0,
        "conflicts": 3,
    }


def test_table_shows_ours_over_go() -> None:
    text = burst.table({"ours": _side("ours", 1.0), "theirs": _side("theirs", 2.0)})
    assert "| TrainJob to Job p99 (s) | 2 | 4 | 0.50x |" in text
    assert "| manager CPU (s) | 5 | 10 | 0.50x |" in text
    assert "| reconcile errors | 0 | 0 | n/a |" in text
    assert "| 409 Conflict responses | 3 | 3 | 1.00x |" in text
    assert text.startswith("10 suspended TrainJobs on `torch-distributed`")
