"""`python -m trainer` as an operator runs it: probes, metrics, graceful stop, bad config."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import yaml
from trainer_process import running_manager

from manager.envtest import Environment
from manager.envtest.process import free_port

ROOT = Path(__file__).resolve().parents[3]


def write_config(path: Path, **overrides: object) -> Path:
    config = {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{free_port()}"},
        "metrics": {"bindAddress": f"127.0.0.1:{free_port()}", "secureServing": False},
        "webhook": {"port": free_port(), "host": "127.0.0.1"},
        # the trainer component serves webhooks: certificates come from --webhook-cert-dir
        "certManagement": {"enable": False},
        **overrides,
    }
    path.write_text(yaml.safe_dump(config))
    return path


async def start_manager(*args: str, stdout: Any = asyncio.subprocess.PIPE) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "trainer",
        *args,
        "--log-format=json",
        cwd=ROOT,
        stdout=stdout,
        stderr=asyncio.subprocess.STDOUT,
    )


async def test_manager_serves_probes_and_metrics_and_stops_gracefully(
    control_plane: Environment, tmp_path: Path
) -> None:
    metrics = f"127.0.0.1:{free_port()}"
    config = {"metrics": {"bindAddress": metrics, "secureServing": False}}
    async with running_manager(control_plane, tmp_path, config) as manager:  # waits for /readyz 200
        async with manager.http.get(f"http://{manager.health}/healthz") as r:
            assert r.status == 200
        async with manager.http.get(f"http://{metrics}/metrics") as r:
            text = await r.text()
        assert r.status == 200
        assert "rest_client_requests_total" in text
    # running_manager stopped it with SIGTERM and asserted the exit code
    output = manager.log_path.read_text()
    assert manager.proc.returncode == 0, output[-4000:]
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


async def test_a_manager_of_another_api_level_than_the_installed_crds_refuses_in_one_line(
    control_plane: Environment,
) -> None:
    # the session's control plane has config/crd installed: the v2.1 level's TrainJob CRD
    proc = await start_manager("--api-level=v2.3", f"--kubeconfig={control_plane.kubeconfig}")
    code = await asyncio.wait_for(proc.wait(), 60)
    assert proc.stdout is not None
    output = (await proc.stdout.read()).decode()
    assert code == 1, output
    refusals = [line for line in output.splitlines() if "refusing to start" in line]
    assert len(refusals) == 1, output
    assert "is of API level v2.1 (trainer v2.1.0, jobset v0.10.1)" in refusals[0]
    assert "this manager runs API level v2.3 (trainer v2.3.0, jobset v0.12.0)" in refusals[0]
    assert "Traceback" not in output


async def test_a_manager_naming_no_api_level_runs_the_default_v2_3_and_says_how_to_pick_v2_1(
    control_plane: Environment,
) -> None:
    # no Configuration, no flag: level v2.3, which the session's v2.1 CRDs do not serve
    proc = await start_manager(f"--kubeconfig={control_plane.kubeconfig}")
    code = await asyncio.wait_for(proc.wait(), 60)
    assert proc.stdout is not None
    output = (await proc.stdout.read()).decode()
    assert code == 1, output
    (refusal,) = [line for line in output.splitlines() if "refusing to start" in line]
    assert "this manager runs API level v2.3 (trainer v2.3.0, jobset v0.12.0)" in refusal
    assert "set apiLevel: v2.1 in the Configuration" in refusal


async def test_an_unknown_api_level_flag_is_rejected_naming_the_choices(control_plane: Environment) -> None:
    proc = await start_manager("--api-level=v3", f"--kubeconfig={control_plane.kubeconfig}")
    code = await asyncio.wait_for(proc.wait(), 60)
    assert proc.stdout is not None
    output = (await proc.stdout.read()).decode()
    assert code == 1
    assert '--api-level: Unsupported value: \\"v3\\": supported values: \\"v2.1\\", \\"v2.3\\"' in output
