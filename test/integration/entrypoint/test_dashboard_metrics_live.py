"""Every metric the shipped Grafana dashboard queries is exported by the manager (issue 15).

No list of names is written down here: the manager runs as an operator runs it (`python -m
trainer`, every component, leader election on) against a real API server with every CRD, and
its own ``/metrics`` is what the dashboard's queries are checked against. A family with no
samples yet still has its ``# TYPE`` line, so a query over a metric that simply has not moved
is not mistaken for a missing one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from pathlib import Path

import aiohttp
import yaml
from dashboard_queries import exported_series_names, metric_names, queries
from test_main import start_manager, write_config

from manager.envtest import Environment
from manager.envtest.certs import TinyCA
from manager.testing import eventually


async def test_every_dashboard_query_names_an_exported_metric(
    control_plane: Environment, tmp_path: Path
) -> None:
    config_path = write_config(
        tmp_path / "config.yaml",
        leaderElection={
            "leaderElect": True,
            "resourceName": "dashboard-test",
            "resourceNamespace": "default",
        },
    )
    config = yaml.safe_load(config_path.read_text())
    metrics = config["metrics"]["bindAddress"]
    TinyCA("dashboard-test-ca").issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        tmp_path / "tls.crt", tmp_path / "tls.key"
    )
    log_path = tmp_path / "manager.log"
    log_file = log_path.open("wb")
    proc = await start_manager(
        f"--config={config_path}",
        f"--kubeconfig={control_plane.kubeconfig}",
        f"--webhook-cert-dir={tmp_path}",
        stdout=log_file,
    )
    try:
        async with aiohttp.ClientSession() as http:

            async def leading() -> str:
                try:
                    async with http.get(f"http://{metrics}/metrics") as r:
                        text = await r.text()
                except aiohttp.ClientConnectionError as err:
                    raise AssertionError(f"metrics port not open: {err}") from err
                assert 'leader_election_master_status{name="dashboard-test"} 1.0' in text
                return text

            text = await eventually(leading, timeout=60, message="the manager never led")
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 60)
        log_file.close()
    output = log_path.read_text()
    assert code == 0, output[-4000:]
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
