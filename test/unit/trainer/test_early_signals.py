"""A SIGTERM or SIGINT while the entry point starts: recorded, then exit 0 without running.

Before, the default action applied until the manager installed its handlers: a replica stopped
right after a restart (a Deployment's rolling update, the chaos suite's final stop) died with
-15 instead of exiting cleanly.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from manager.manager import signals
from trainer import early_signals

ROOT = Path(__file__).resolve().parents[3]

# Starts like the entry point: signals deferred on the first line, then a slow "start-up" (it
# says when it is in it), then the manager run through run_until_signalled with what was kept.
PROGRAM = """
from trainer import early_signals
early_signals.defer()
import asyncio, sys
from manager.manager.signals import run_until_signalled

class Manager:
    ran = False
    def stop(self): pass
    async def run(self):
        Manager.ran = True

async def start():
    print("starting", flush=True)
    if sys.argv[2] == "report":  # says when the first signal is kept (signals do not queue)
        while not early_signals.received:
            await asyncio.sleep(0.01)
        print("kept", flush=True)
    await asyncio.sleep(float(sys.argv[1]))
    code = await run_until_signalled(Manager(), pending=early_signals.received)
    print("ran" if Manager.ran else "did not run", flush=True)
    return code

sys.exit(asyncio.run(start()))
"""


async def _start(seconds: float, mode: str = "quiet") -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PROGRAM,
        str(seconds),
        mode,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None
    assert (await asyncio.wait_for(proc.stdout.readline(), 60)).decode().strip() == "starting"
    return proc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_during_start_up_exits_0_without_running_the_manager(sig: signal.Signals) -> None:
    proc = await _start(2.0)
    proc.send_signal(sig)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    text = out.decode()
    assert proc.returncode == 0, text
    assert "received signal before the manager started, exiting" in text, text
    assert text.strip().endswith("did not run"), text
    assert "Traceback" not in text


async def test_a_second_signal_during_start_up_exits_1_at_once() -> None:
    proc = await _start(60.0, "report")
    assert proc.stdout is not None
    proc.send_signal(signal.SIGTERM)
    assert (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip() == "kept"
    proc.send_signal(signal.SIGTERM)
    await asyncio.wait_for(proc.wait(), 30)
    assert proc.returncode == 1


async def test_without_a_signal_the_manager_runs() -> None:
    proc = await _start(0.0)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0 and out.decode().strip().endswith("ran"), out.decode()


async def test_pending_signals_leave_the_loops_handlers_removed() -> None:
    class Manager:
        def stop(self) -> None:
            raise AssertionError("not started, not stopped")

        async def run(self) -> None:
            raise AssertionError("must not run")

    assert await signals.run_until_signalled(Manager(), pending=[signal.SIGTERM]) == 0
    assert early_signals.received == []  # this process never deferred its signals
