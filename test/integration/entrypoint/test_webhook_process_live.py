"""The webhooks served from a process of their own (``--webhook-process``, the default).

What an operator sees: one child process beside the manager that answers admission, its
webhook metrics on the manager's ``/metrics``, the child gone whenever the manager ends (a
SIGTERM or a SIGKILL), and the manager failing (exit 1, restarted by its Deployment) when the
child dies under it. ``--no-webhook-process`` serves from a thread of the manager's process.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from trainer_process import RunningManager, review, running_manager

from manager.envtest import Environment
from manager.envtest.process import free_port
from manager.testing import eventually

TRAINJOB_VALIDATOR = "/validate-trainer-kubeflow-org-v1alpha1-trainjob"


def children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


def webhook_child(manager: RunningManager) -> int:
    (child,) = children(manager.proc.pid)
    assert "--webhook-child-fds" in Path(f"/proc/{child}/cmdline").read_text()
    return child


async def validate_trainjob(manager: RunningManager) -> dict[str, Any]:
    """The TrainJob validator's answer to a TrainJob naming a runtime that does not exist (denied)."""
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "t", "namespace": "default"},
        "spec": {"runtimeRef": {"name": "no-such-runtime"}},
    }
    return await review(manager, TRAINJOB_VALIDATOR, trainjob)


async def test_a_child_answers_admission_and_the_manager_serves_its_metrics(
    control_plane: Environment, tmp_path: Path
) -> None:
    metrics = f"127.0.0.1:{free_port()}"
    config = {"metrics": {"bindAddress": metrics, "secureServing": False}}
    async with running_manager(control_plane, tmp_path, config) as manager:
        child = webhook_child(manager)
        response = await validate_trainjob(manager)
        assert response["allowed"] is False
        assert response["status"]["message"].startswith("unsupported runtime")  # upstream's words
        async with manager.http.get(f"http://{metrics}/metrics") as r:
            text = await r.text()
        answered = (
            f'controller_runtime_webhook_requests_total{{code="200",webhook="{TRAINJOB_VALIDATOR}"}} 1.0'
        )
        assert answered in text
        assert text.count("# TYPE controller_runtime_webhook_requests_total counter") == 1
        assert (
            f'controller_runtime_webhook_latency_seconds_count{{webhook="{TRAINJOB_VALIDATOR}"}} 1.0' in text
        )
    # SIGTERM: the manager stopped the child before it exited 0 (running_manager asserted the 0)
    assert not alive(child)


async def test_the_child_ends_with_a_killed_manager(control_plane: Environment, tmp_path: Path) -> None:
    async with running_manager(control_plane, tmp_path, exit_code=-signal.SIGKILL) as manager:
        child = webhook_child(manager)
        manager.proc.send_signal(signal.SIGKILL)
        await manager.proc.wait()

        async def child_gone() -> None:
            assert not alive(child), "the webhook process outlived its manager"

        await eventually(child_gone, timeout=30, message="the webhook process outlived a killed manager")


async def test_a_dead_child_stops_the_manager_with_exit_1(control_plane: Environment, tmp_path: Path) -> None:
    async with running_manager(control_plane, tmp_path, exit_code=1) as manager:
        os.kill(webhook_child(manager), signal.SIGKILL)
        await manager.proc.wait()
    assert "the webhook process exited with code -9" in manager.log_path.read_text()


async def test_no_webhook_process_serves_from_the_managers_own_process(
    control_plane: Environment, tmp_path: Path
) -> None:
    async with running_manager(control_plane, tmp_path, args=["--no-webhook-process"]) as manager:
        assert children(manager.proc.pid) == []
        response = await validate_trainjob(manager)
        assert response["allowed"] is False


def pressure_words(pid: int) -> set[int]:
    """The inodes of the admission pressure words (framework.md D.14) process ``pid`` holds."""
    words = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if "admission-pressure" in os.readlink(fd):
                words.add(fd.stat().st_ino)
        except OSError:  # closed while listed
            continue
    return words


async def test_the_manager_shares_its_admission_pressure_word_with_the_child(
    control_plane: Environment, tmp_path: Path
) -> None:
    async with running_manager(control_plane, tmp_path) as manager:
        child = webhook_child(manager)
        ours = pressure_words(manager.proc.pid)
        assert len(ours) == 1, "the manager holds one admission pressure word"
        assert pressure_words(child) == ours, "the webhook process notes admission in the manager's word"


async def test_yield_to_admission_zero_shares_no_word(control_plane: Environment, tmp_path: Path) -> None:
    async with running_manager(control_plane, tmp_path, args=["--yield-to-admission=0"]) as manager:
        assert pressure_words(manager.proc.pid) == set()
        assert pressure_words(webhook_child(manager)) == set()
        response = await validate_trainjob(manager)
        assert response["allowed"] is False
