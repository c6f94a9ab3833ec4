"""Every metric the shipped Grafana dashboard queries is exported by the manager.

No list of names is written down here: the manager runs as an operator runs it (`python -m
trainer`, every component, leader election on) against a real API server with every CRD, and
its own ``/metrics`` is what the dashboard's queries are checked against. A family with no
samples yet still has its ``# TYPE`` line, so a query over a metric that simply has not moved
is not mistaken for a missing one.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import aiohttp
from dashboard_queries import exported_series_names, metric_names, queries
from trainer_process import running_manager

from manager.envtest import Environment
from manager.envtest.process import free_port
from manager.testing import eventually


async def test_every_dashboard_query_names_an_exported_metric(
    control_plane: Environment, tmp_path: Path
) -> None:
    metrics = f"127.0.0.1:{free_port()}"
    config = {
        "metrics": {"bindAddress": metrics, "secureServing": False},
        "leaderElection": {
            "leaderElect": True,
            "resourceName": "dashboard-test",
            "resourceNamespace": "default",
        },
    }
    async with running_manager(control_plane, tmp_path, config) as manager:

        async def leading() -> str:
            try:
                async with manager.http.get(f"http://{metrics}/metrics") as r:
                    text = await r.text()
            except aiohttp.ClientConnectionError as err:
                raise AssertionError(f"metrics port not open: {err}") from err
            assert 'leader_election_master_status{name="dashboard-test"} 1.0' in text
            return text

        text = await eventually(leading, timeout=60, message="the manager never led")
    output = manager.log_path.read_text()
    assert manager.proc.returncode == 0, output[-4000:]
    registered = set()
    for line in output.splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if entry.get("msg") == "controllers registered":
                registered.add(entry.get("component"))
    assert registered == {"jobset", "scheduling", "trainer"}, output[-4000:]
    exported = exported_series_names(text)
    missing = sorted(
        f"{dashboard} / {panel}: {name}"
        for dashboard, panel, expr in queries()
        for name in metric_names(expr)
        if name not in exported
    )
    assert missing == [], "\n".join(missing)
