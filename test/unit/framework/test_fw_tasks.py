"""Owned task lifetimes: TaskSet reports failures once, drains, cancels within a budget; the event
recorder's background emits are flushed before the cluster's HTTP session closes."""

from __future__ import annotations

import asyncio
from typing import Any

from manager.cluster import Cluster
from manager.config import RestConfig
from manager.events import EventRecorder
from manager.scheme import GroupVersionKind
from manager.tasks import TaskSet
from manager.testing.fake import FakeClient

EVENT = GroupVersionKind("", "v1", "Event")
CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns", "uid": "u"}}


async def test_taskset_reports_each_failure_once_and_forgets_finished_tasks() -> None:
    failures: list[str] = []
    tasks = TaskSet("t", on_error=lambda task, err: failures.append(f"{task.get_name()}: {err}"))

    async def fail() -> None:
        raise ValueError("boom")

    async def ok() -> int:
        return 1

    tasks.spawn(fail(), name="failing")
    done = tasks.spawn(ok())
    await tasks.drain()
    assert failures == ["failing: boom"]
    assert done.result() == 1
    assert len(tasks) == 0


async def test_taskset_cancel_waits_within_the_budget() -> None:
    tasks = TaskSet("t")
    stubborn_release = asyncio.Event()

    async def stubborn() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await stubborn_release.wait()  # takes its time to clean up
            raise

    tasks.spawn(asyncio.Event().wait())
    assert await tasks.cancel(timeout=1.0) is True
    tasks.spawn(stubborn())
    await asyncio.sleep(0)
    assert await tasks.cancel(timeout=0.05) is False  # still cleaning up when the budget ran out
    stubborn_release.set()
    assert await tasks.cancel(timeout=1.0) is True
    assert len(tasks) == 0


class SlowClient(FakeClient):
    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    async def create(self, obj: Any, **kw: Any) -> Any:
        await asyncio.sleep(self.delay)
        return await super().create(obj, **kw)


async def test_recorder_flush_waits_for_emits_and_drops_the_rest_after_its_timeout() -> None:
    client = SlowClient(0.01)
    recorder = EventRecorder(client, component="c")
    recorder.emit(CM, "Normal", "Synced", "one")
    assert await recorder.flush(timeout=5.0) is True
    assert len(await client.list(EVENT)) == 1
    client.delay = 60.0
    recorder.emit(CM, "Normal", "Synced", "two")
    assert await recorder.flush(timeout=0.05) is False
    assert len(await client.list(EVENT)) == 1


async def test_cluster_close_flushes_pending_emits_before_closing_the_session() -> None:
    cluster = Cluster(RestConfig(host="http://127.0.0.1:1"))
    client = SlowClient(0.05)
    cluster._recorders["c"] = recorder = EventRecorder(client, component="c")
    assert cluster.event_recorder("c") is recorder
    recorder.emit(CM, "Warning", "Failed", "written on the way out")
    await cluster.aclose()
    [event] = await client.list(EVENT)
    assert (event["reason"], event["message"]) == ("Failed", "written on the way out")
