"""`python -m trainer` as an operator runs it: probes, metrics, graceful stop, bad config."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import aiohttp
import yaml

from manager.envtest import Environment
from manager.envtest.process import free_port
from manager.testing import eventually

ROOT = Path(__file__).resolve().parents[3]


def write_config(path: Path, **overrides: object) -> Path:
    config = {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{free_port()}"},
        "metrics": {"bindAddress": f"127.0.0.1:{free_port()}", "secureServing": False},
        "webhook": {"port": free_port(), "host": "127.0.0.1"},
        **overrides,
    }
    path.write_text(yaml.safe_dump(config))
    return path


async def start_manager(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "trainer",
        *args,
        "--log-format=json",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )


async def test_manager_serves_probes_and_metrics_and_stops_gracefully(
    control_plane: Environment, tmp_path: Path
) -> None:
    config_path = write_config(tmp_path / "config.yaml")
    config = yaml.safe_load(config_path.read_text())
    health = config["health"]["healthProbeBindAddress"]
    metrics = config["metrics"]["bindAddress"]
    proc = await start_manager(f"--config={config_path}", f"--kubeconfig={control_plane.kubeconfig}")
    try:
        async with aiohttp.ClientSession() as http:

            async def ready() -> None:
                try:
                    async with http.get(f"http://{health}/readyz") as r:
                        assert r.status == 200, await r.text()
                except aiohttp.ClientConnectionError as err:
                    raise AssertionError(f"probe port not open: {err}") from err

            await eventually(ready, timeout=60, message="/readyz never answered 200")
            async with http.get(f"http://{health}/healthz") as r:
                assert r.status == 200
            async with http.get(f"http://{metrics}/metrics") as r:
                text = await r.text()
            assert r.status == 200
            assert "rest_client_requests_total" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 60)
    assert proc.stdout is not None
    output = (await proc.stdout.read()).decode()
    assert code == 0, output
    assert "running the empty manager" in output or "controllers registered" in output


async def test_invalid_configuration_exits_1_naming_the_field(tmp_path: Path) -> None:
    bad = write_config(tmp_path / "bad.yaml", webhook={"port": 70000})
    proc = await start_manager(f"--config={bad}")
    code = await asyncio.wait_for(proc.wait(), 60)
    assert proc.stdout is not None
    output = (await proc.stdout.read()).decode()
    assert code == 1
    assert "webhook.port: Invalid value: 70000: must be between 1 and 65535" in output


async def test_unreadable_configuration_uses_upstream_text(tmp_path: Path) -> None:
    proc = await start_manager(f"--config={tmp_path / 'missing.yaml'}")
    code = await asyncio.wait_for(proc.wait(), 60)
    assert proc.stdout is not None
    output = (await proc.stdout.read()).decode()
    assert code == 1
    assert "failed to read config file" in output


async def test_unknown_controller_name_is_rejected(control_plane: Environment) -> None:
    proc = await start_manager("--controllers=-nosuch", f"--kubeconfig={control_plane.kubeconfig}")
    code = await asyncio.wait_for(proc.wait(), 60)
    assert proc.stdout is not None
    output = (await proc.stdout.read()).decode()
    assert code == 1
    assert "unknown controller 'nosuch'" in output
