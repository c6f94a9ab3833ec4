"""SIGTERM/SIGINT: first stops gracefully, second exits 1; exit codes for entry points."""

from __future__ import annotations

import asyncio
import os
import signal

from manager.manager import LeaderElectionLost, signals
from manager.testing import eventually


async def _delivered() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_first_signal_stops_second_exits() -> None:
    stops: list[str] = []
    exits: list[int] = []
    uninstall = signals.install(lambda: stops.append("stop"), exit=exits.append)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        await eventually(lambda: stops, timeout=2, interval=0.001)
        assert stops == ["stop"] and exits == []
        os.kill(os.getpid(), signal.SIGINT)
        await eventually(lambda: exits, timeout=2, interval=0.001)
        assert exits == [1]
    finally:
        uninstall()


class FakeManager:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.stopped = asyncio.Event()

    def stop(self) -> None:
        self.stopped.set()

    async def run(self) -> None:
        await self.stopped.wait()
        if self.error:
            raise self.error


async def test_exit_code_zero_after_graceful_stop() -> None:
    mgr = FakeManager()
    task = asyncio.create_task(signals.run_until_signalled(mgr))
    await _delivered()
    os.kill(os.getpid(), signal.SIGTERM)
    assert await asyncio.wait_for(task, 2) == 0


async def test_exit_code_one_when_the_lease_is_lost() -> None:
    mgr = FakeManager(LeaderElectionLost())
    task = asyncio.create_task(signals.run_until_signalled(mgr))
    await _delivered()
    mgr.stop()
    assert await asyncio.wait_for(task, 2) == 1
