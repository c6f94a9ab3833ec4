"""The shipped Grafana dashboard: well formed, its query parser sound, the lifecycle panels there.

That every metric a query names is exported by a real manager is checked against the manager's
own ``/metrics`` in ``test/integration/entrypoint/test_dashboard_metrics_live.py``.
"""

from __future__ import annotations

import json

import pytest
from dashboard_queries import DASHBOARDS, metric_names, panels, queries
from prometheus_client import CollectorRegistry, generate_latest

from trainer.controllers.lifecycle_metrics import TrainJobLifecycleMetrics


def test_a_dashboard_ships_and_every_panel_queries_the_datasource_variable() -> None:
    assert [p.name for p in DASHBOARDS] == ["kubeflow-trainer.json"]
    dashboard = json.loads(DASHBOARDS[0].read_text())
    assert dashboard["uid"] and dashboard["title"]
    names = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"datasource", "namespace", "job"} <= names
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids))
    for panel in panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel["targets"], panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}"
        for target in panel["targets"]:
            assert metric_names(target["expr"]), (panel["title"], target["expr"])


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        (
            'histogram_quantile(0.99, sum by (controller, le) (rate(controller_runtime_reconcile_time_seconds_bucket{namespace=~"$namespace"}[$__rate_interval])))',
            {"controller_runtime_reconcile_time_seconds_bucket"},
        ),
        (
            'sum(increase(a_total{x="y"}[$__range])) / clamp_min(sum(increase(a_total[5m])) + sum(b_total), 1)',
            {"a_total", "b_total"},
        ),
        ('max by (pod, name) (leader_election_master_status{code="429"})', {"leader_election_master_status"}),
    ],
)
def test_metric_names_are_read_out_of_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_every_lifecycle_metric_has_a_panel() -> None:
    registry = CollectorRegistry()
    TrainJobLifecycleMetrics(registry)
    text = generate_latest(registry).decode()
    lifecycle = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    assert len(lifecycle) == 6
    used = {name for _, _, expr in queries() for name in metric_names(expr)}
    for family in lifecycle:
        assert any(name.startswith(family) for name in used), family
