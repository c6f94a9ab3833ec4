"""A controller's workers wait for ``Options.yield_to`` before each reconcile (framework.md D.14)."""

from __future__ import annotations

import asyncio
from typing import Any

from manager.controller import Builder, Request, Result
from manager.scheme import GroupVersionKind
from manager.testing import eventually
from manager.testing.clock import FakeClock

FakeManager = Any

WIDGET = GroupVersionKind("example.com", "v1", "Widget")


class Gate:
    """A ``YieldTo`` held shut until the test opens it; it counts who waited."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.waits = 0

    async def wait(self) -> float:
        self.waits += 1
        await self.open.wait()
        return 0.0


class Calls:
    def __init__(self) -> None:
        self.seen: list[Request] = []

    async def reconcile(self, req: Request) -> Result | None:
        self.seen.append(req)
        return None


async def test_no_reconcile_starts_while_the_worker_yields(
    mgr: FakeManager, name: str, clock: FakeClock, running: Any
) -> None:
    gate, calls = Gate(), Calls()
    ctrl = Builder(mgr).for_(WIDGET).named(name).with_options(clock=clock, yield_to=gate).complete(calls)
    async with running(ctrl):
        mgr.informers.informer(WIDGET).create({"metadata": {"name": "a", "namespace": "ns"}})
        await eventually(lambda: gate.waits == 1, timeout=5, message="the worker never asked to yield")
        for _ in range(20):
            await asyncio.sleep(0)
        assert calls.seen == [], "a reconcile ran while its worker was yielding"
        gate.open.set()
        await eventually(lambda: calls.seen == [Request("ns", "a")], timeout=5, message="never reconciled")


async def test_without_yield_to_workers_reconcile_at_once(
    mgr: FakeManager, name: str, clock: FakeClock, running: Any
) -> None:
    calls = Calls()
    ctrl = Builder(mgr).for_(WIDGET).named(name).with_options(clock=clock).complete(calls)
    async with running(ctrl):
        mgr.informers.informer(WIDGET).create({"metadata": {"name": "a", "namespace": "ns"}})
        await eventually(lambda: calls.seen == [Request("ns", "a")], timeout=5, message="never reconciled")
