"""Shared helpers for framework unit tests: a fake clock, in-memory informers, a minimal manager."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable

import pytest

from manager.controller import Controller, Options
from manager.metrics import REGISTRY
from manager.runnable import Runnable
from manager.testing.clock import FakeClock
from manager.testing.informers import FakeInformers


class FakeManager:
    """Just what the builder needs: informers, add, and controller-name bookkeeping."""

    def __init__(self) -> None:
        self.informers = FakeInformers()
        self.runnables: list[Runnable] = []
        self.names: set[str] = set()
        self.concurrency: dict[str, int] = {}

    def add(self, runnable: Runnable) -> None:
        self.runnables.append(runnable)

    def controller_options(self, group_kind: str) -> Options:
        return Options(max_concurrent_reconciles=self.concurrency.get(group_kind, 1))

    def claim_controller_name(self, name: str) -> None:
        if name in self.names:
            raise ValueError(f"controller with name {name!r} already exists")
        self.names.add(name)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def mgr() -> FakeManager:
    return FakeManager()


@pytest.fixture
def name() -> str:
    """A controller name unique to the test, so metric series do not leak between tests."""
    return f"c{uuid.uuid4().hex[:8]}"


def _sample(metric: str, **labels: str) -> float:
    value = REGISTRY.get_sample_value(metric, labels)
    return 0.0 if value is None else value


@pytest.fixture
def sample() -> Callable[..., float]:
    """``sample(metric, **labels)``: the current value of one series in the manager registry (0 if absent)."""
    return _sample


@pytest.fixture
def running() -> Callable[[Controller], contextlib.AbstractAsyncContextManager[asyncio.Task[None]]]:
    """``async with running(controller) as task``: the controller started, cancelled on exit."""
    return _running


@contextlib.asynccontextmanager
async def _running(controller: Controller) -> AsyncIterator[asyncio.Task[None]]:
    started = asyncio.Event()
    task = asyncio.create_task(controller.start(started))
    waiter = asyncio.create_task(started.wait())
    done, _ = await asyncio.wait({task, waiter}, timeout=5, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        waiter.cancel()
        task.result()
    assert waiter in done, "controller did not start"
    try:
        yield task
    finally:
        if not task.done():  # a test that expects the controller to fail checks task itself
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
