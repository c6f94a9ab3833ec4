"""The controller's outcome table (framework.md A.7), observed through reconciles and metrics."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import structlog

from manager import log
from manager.client.errors import AlreadyExists, Conflict, Forbidden
from manager.controller import Builder, ReconcileError, Request, Result, TerminalError
from manager.scheme import GroupVersionKind
from manager.testing.clock import FakeClock

FakeManager = Any

WIDGET = GroupVersionKind("example.com", "v1", "Widget")


def widget(name: str, namespace: str = "ns", **meta: object) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": namespace, **meta}}


class Recorder:
    """A reconciler whose behaviour per call is scripted; it records every request it sees."""

    def __init__(self, *outcomes: object) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[Request] = []
        self.contexts: list[dict[str, object]] = []

    async def reconcile(self, req: Request) -> Result | None:
        self.calls.append(req)
        self.contexts.append(dict(log.current_context()))
        outcome = self.outcomes.pop(0) if self.outcomes else None
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome  # type: ignore[return-value]


def build(mgr: FakeManager, name: str, clock: FakeClock, reconciler: Recorder, **options: object):  # type: ignore[no-untyped-def]
    return Builder(mgr).for_(WIDGET).named(name).with_options(clock=clock, **options).complete(reconciler)


async def test_success_forgets_and_counts(
    mgr: FakeManager, name: str, clock: FakeClock, running: Any, sample: Any
) -> None:
    rec = Recorder(None)
    ctrl = build(mgr, name, clock, rec)
    async with running(ctrl):
        mgr.informers.informer(WIDGET).create(widget("a"))
        await clock.advance(0)
        assert rec.calls == [Request("ns", "a")]
        await clock.advance(2000)
        assert len(rec.calls) == 1, "a successful reconcile is not retried"
        assert sample("controller_runtime_reconcile_total", controller=name, result="success") == 1
        assert sample("controller_runtime_reconcile_total", controller=name, result="error") == 0
        assert sample("controller_runtime_reconcile_time_seconds_count", controller=name) == 1
        assert sample("workqueue_adds_total", name=name, controller=name) == 1
        assert sample("workqueue_depth", name=name, controller=name, priority="") == 0
        assert sample("controller_runtime_max_concurrent_reconciles", controller=name) == 1
        assert sample("controller_runtime_active_workers", controller=name) == 0


async def test_requeue_after_comes_back_after_the_delay(
    mgr: FakeManager, name: str, clock: FakeClock, running: Any, sample: Any
) -> None:
    rec = Recorder(Result(requeue_after=30), None)
    ctrl = build(mgr, name, clock, rec)
    async with running(ctrl):
        mgr.informers.informer(WIDGET).create(widget("a"))
        await clock.advance(0)
        assert len(rec.calls) == 1
        await clock.advance(29.9)
        assert len(rec.calls) == 1
        await clock.advance(0.1)
        assert len(rec.calls) == 2
        assert sample("controller_runtime_reconcile_total", controller=name, result="requeue_after") == 1
        assert sample("controller_runtime_reconcile_total", controller=name, result="success") == 1
        assert sample("workqueue_retries_total", name=name, controller=name) == 1


async def test_error_is_retried_with_exponential_backoff(
    mgr: FakeManager, name: str, clock: FakeClock, running: Any, sample: Any
) -> None:
    rec = Recorder(ReconcileError("not ready"), Conflict("stale"), ReconcileError("still"), None)
    ctrl = build(mgr, name, clock, rec)
    async with running(ctrl):
        mgr.informers.informer(WIDGET).create(widget("a"))
        await clock.advance(0)
        assert len(rec.calls) == 1
        await clock.advance(0.0049)
        assert len(rec.calls) == 1, "first retry waits 5 ms"
        await clock.advance(0.0001)
        assert len(rec.calls) == 2
        await clock.advance(0.0099)
        assert len(rec.calls) == 2, "second retry waits 10 ms"
        await clock.advance(0.0001)
        assert len(rec.calls) == 3
        await clock.advance(0.02)
        assert len(rec.calls) == 4
        assert ctrl.queue is not None and ctrl.queue.num_requeues(Request("ns", "a")) == 0, "success forgets"
        assert sample("controller_runtime_reconcile_total", controller=name, result="error") == 3
        assert sample("controller_runtime_reconcile_errors_total", controller=name) == 3
        assert sample("controller_runtime_reconcile_panics_total", controller=name) == 0
        assert sample("controller_runtime_reconcile_total", controller=name, result="success") == 1


async def test_terminal_error_is_not_retried(
    mgr: FakeManager, name: str, clock: FakeClock, running: Any, sample: Any
) -> None:
    rec = Recorder(TerminalError("unsupported runtime"))
    ctrl = build(mgr, name, clock, rec)
    async with running(ctrl):
        mgr.informers.informer(WIDGET).create(widget("a"))
        await clock.advance(0)
        await clock.advance(3600)
        assert len(rec.calls) == 1
        assert sample("controller_runtime_terminal_reconcile_errors_total", controller=name) == 1
        assert sample("controller_runtime_reconcile_errors_total", controller=name) == 1
        assert sample("controller_runtime_reconcile_total", controller=name, result="error") == 1
        # a new event for the object reconciles it again
        mgr.informers.informer(WIDGET).update(widget("a", labels={"x": "y"}))
        await clock.advance(0)
        assert len(rec.calls) == 2


async def test_a_bug_never_kills_the_worker(
    mgr: FakeManager, name: str, clock: FakeClock, running: Any, sample: Any
) -> None:
    rec = Recorder(KeyError("spec"), None, None)
    ctrl = build(mgr, name, clock, rec)  # one worker
    async with running(ctrl):
        informer = mgr.informers.informer(WIDGET)
        informer.create(widget("a"))
        await clock.advance(0)
        informer.create(widget("b"))
        await clock.advance(0)
        assert rec.calls == [Request("ns", "a"), Request("ns", "b")], "the same worker goes on"
        await clock.advance(0.005)
        assert rec.calls[-1] == Request("ns", "a"), "the failed key is retried"
        assert sample("controller_runtime_reconcile_panics_total", controller=name) == 1
        assert sample("controller_runtime_reconcile_errors_total", controller=name) == 1


async def test_recover_panic_off_stops_the_controller(
    mgr: FakeManager, name: str, clock: FakeClock, running: Any, sample: Any
) -> None:
    rec = Recorder(KeyError("spec"))
    ctrl = build(mgr, name, clock, rec, recover_panic=False)
    async with running(ctrl) as task:
        mgr.informers.informer(WIDGET).create(widget("a"))
        await clock.advance(0)
        assert task.done()
        with pytest.raises(KeyError):
            task.result()


async def test_one_key_is_never_reconciled_twice_at_once(
    mgr: FakeManager, name: str, clock: FakeClock, running: Any, sample: Any
) -> None:
    running_now: dict[Request, int] = {}
    max_same_key = 0
    max_total = 0
    calls: list[Request] = []
    release = asyncio.Event()

    async def reconcile(req: Request) -> None:
        nonlocal max_same_key, max_total
        calls.append(req)
        running_now[req] = running_now.get(req, 0) + 1
        max_same_key = max(max_same_key, running_now[req])
        max_total = max(max_total, sum(running_now.values()))
        await release.wait()
        running_now[req] -= 1

    ctrl = (
        Builder(mgr)
        .for_(WIDGET)
        .named(name)
        .with_options(clock=clock, max_concurrent_reconciles=4)
        .complete(reconcile)
    )
    async with running(ctrl):
        informer = mgr.informers.informer(WIDGET)
        for n in ("a", "b", "c"):
            informer.create(widget(n))
        await clock.advance(0)
        informer.update(widget("a", labels={"v": "2"}))  # while "a" is being reconciled
        informer.update(widget("a", labels={"v": "3"}))
        await clock.advance(0)
        assert max_total == 3, "different keys run in parallel"
        assert calls.count(Request("ns", "a")) == 1
        release.set()
        await clock.advance(0)
        assert max_same_key == 1
        assert calls.count(Request("ns", "a")) == 2, "changes during a reconcile cause exactly one more pass"
        assert sample("controller_runtime_max_concurrent_reconciles", controller=name) == 4


async def test_reconcile_log_context(
    mgr: FakeManager, name: str, clock: FakeClock, running: Any, sample: Any
) -> None:
    rec = Recorder(None, None)
    ctrl = build(mgr, name, clock, rec)
    async with running(ctrl):
        informer = mgr.informers.informer(WIDGET)
        informer.create(widget("a"))
        informer.create(widget("b", namespace="other"))
        await clock.advance(0)
    first, second = rec.contexts
    assert {k: first[k] for k in ("controller", "kind", "namespace", "name")} == {
        "controller": name,
        "kind": "Widget",
        "namespace": "ns",
        "name": "a",
    }
    assert second["namespace"] == "other" and second["name"] == "b"
    assert first["reconcileID"] != second["reconcileID"]
    assert log.current_context().get("reconcileID") is None, "bindings do not leak"


async def test_cancellation_propagates_and_is_not_an_error(
    mgr: FakeManager, name: str, clock: FakeClock, running: Any, sample: Any
) -> None:
    entered = asyncio.Event()
    cancelled = asyncio.Event()

    async def reconcile(req: Request) -> None:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    ctrl = Builder(mgr).for_(WIDGET).named(name).with_options(clock=clock).complete(reconcile)
    async with running(ctrl):
        mgr.informers.informer(WIDGET).create(widget("a"))
        await asyncio.wait_for(entered.wait(), 1)
    assert cancelled.is_set()
    assert sample("controller_runtime_reconcile_total", controller=name, result="error") == 0
    assert sample("controller_runtime_active_workers", controller=name) == 0


async def test_reconciliation_timeout_is_an_error(
    mgr: FakeManager, name: str, running: Any, sample: Any
) -> None:
    async def reconcile(req: Request) -> None:
        await asyncio.Event().wait()

    ctrl = Builder(mgr).for_(WIDGET).named(name).with_options(reconciliation_timeout=0.01).complete(reconcile)
    async with running(ctrl):
        mgr.informers.informer(WIDGET).create(widget("a"))

        async def errored() -> None:
            assert sample("controller_runtime_reconcile_errors_total", controller=name) >= 1

        from manager.testing import eventually

        await eventually(errored, timeout=2, interval=0.01)


async def test_a_source_that_never_syncs_fails_start(
    mgr: FakeManager, name: str, running: Any, sample: Any
) -> None:
    from manager.controller import CacheSyncTimeoutError

    mgr.informers.informer(WIDGET).synced = False
    ctrl = Builder(mgr).for_(WIDGET).named(name).with_options(cache_sync_timeout=0.05).build(Recorder())
    with pytest.raises(CacheSyncTimeoutError, match="timed out waiting for cache to be synced"):
        await asyncio.wait_for(ctrl.start(asyncio.Event()), 5)
    assert mgr.informers.informer(WIDGET).handlers == [], "the handler is removed again"


async def test_a_wrong_return_type_is_an_error_not_a_dead_worker(
    mgr: FakeManager, name: str, clock: FakeClock, running: Any, sample: Any
) -> None:
    rec = Recorder("not a Result", None)
    ctrl = build(mgr, name, clock, rec)
    async with running(ctrl):
        mgr.informers.informer(WIDGET).create(widget("a"))
        await clock.advance(0)
        await clock.advance(0.005)
        assert len(rec.calls) == 2, "retried after the usual backoff"
        assert sample("controller_runtime_reconcile_panics_total", controller=name) == 1


async def test_a_blocking_reconciler_runs_in_a_thread(
    mgr: FakeManager, name: str, running: Any, sample: Any
) -> None:
    import threading

    from manager.testing import eventually

    threads: list[str] = []
    contexts: list[object] = []

    def reconcile(req: Request) -> Result:
        threads.append(threading.current_thread().name)
        contexts.append(log.current_context().get("name"))
        return Result()

    ctrl = Builder(mgr).for_(WIDGET).named(name).complete(reconcile)
    async with running(ctrl):
        mgr.informers.informer(WIDGET).create(widget("a"))
        await eventually(
            lambda: sample("controller_runtime_reconcile_total", controller=name, result="success") == 1,
            timeout=5,
            interval=0.01,
        )
    assert threads and threads[0] != threading.current_thread().name
    assert contexts == ["a"], "log context follows the reconcile into the thread"


async def test_sources_start_together(mgr: FakeManager, name: str, running: Any, sample: Any) -> None:
    # controller-runtime starts every source at once, so informers list in parallel
    owned = GroupVersionKind("apps", "v1", "Deployment")
    mgr.informers.informer(WIDGET).synced = False
    ctrl = Builder(mgr).for_(WIDGET).owns(owned).named(name).build(Recorder())
    started = asyncio.Event()
    task = asyncio.create_task(ctrl.start(started))
    try:
        for _ in range(20):
            await asyncio.sleep(0)
        assert mgr.informers.informer(owned).handlers, "the second source registered while the first syncs"
        assert not started.is_set()
        mgr.informers.informer(WIDGET).synced = True
        await asyncio.wait_for(started.wait(), 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_routine_api_errors_log_without_a_traceback_bugs_with_one(
    mgr: FakeManager, name: str, clock: FakeClock, running: Any
) -> None:
    rec = Recorder(Conflict("the object has been modified"), KeyError("spec"), None)
    ctrl = build(mgr, name, clock, rec)
    with structlog.testing.capture_logs() as logs:
        async with running(ctrl):
            mgr.informers.informer(WIDGET).create(widget("a"))
            await clock.advance(0)
            await clock.advance(0.005)
            await clock.advance(0.01)
    errors = [e for e in logs if e["event"] == "Reconciler error"]
    assert [e.get("error_type") for e in errors] == ["Conflict", None]
    assert "exc_info" not in errors[0], "a conflict is routine: no traceback"
    assert isinstance(errors[1]["exc_info"], KeyError), "a probable bug keeps its traceback"


class _WrappedCreateError(Exception):
    """What a reconciler raises around refused writes (JobSet's JobCreationError)."""


def _refused_create() -> Exception:
    try:
        raise Forbidden('jobs "a-0" is forbidden: unable to create new content in namespace ns')
    except Forbidden as err:
        try:
            raise _WrappedCreateError(f'job "a-0" creation failed with error: {err}') from err
        except _WrappedCreateError as wrapped:
            return wrapped


def _refused_creates() -> Exception:
    group = ExceptionGroup("creates", [Conflict("x"), AlreadyExists("y")])
    try:
        raise _WrappedCreateError("2 creates failed") from group
    except _WrappedCreateError as wrapped:
        return wrapped


async def test_api_errors_wrapped_by_the_reconciler_are_routine_not_panics(
    mgr: FakeManager, name: str, clock: FakeClock, running: Any, sample: Any
) -> None:
    """A refused Job create (namespace terminating) logs one line: no traceback, no panic counted."""
    rec = Recorder(_refused_create(), _refused_creates(), None)
    ctrl = build(mgr, name, clock, rec)
    with structlog.testing.capture_logs() as logs:
        async with running(ctrl):
            mgr.informers.informer(WIDGET).create(widget("a"))
            await clock.advance(0)
            await clock.advance(0.005)
            await clock.advance(0.01)
    errors = [e for e in logs if e["event"] == "Reconciler error"]
    assert [e["error_type"] for e in errors] == [
        "_WrappedCreateError(Forbidden)",
        "_WrappedCreateError(Conflict)",
    ]
    assert all("exc_info" not in e for e in errors)
    assert "unable to create new content" in errors[0]["error"]
    assert sample("controller_runtime_reconcile_panics_total", controller=name) == 0
    assert sample("controller_runtime_reconcile_errors_total", controller=name) == 2


async def test_a_kind_the_server_does_not_serve_is_an_error_not_a_panic(
    mgr: FakeManager, name: str, clock: FakeClock, running: Any, sample: Any
) -> None:
    from manager.client.restmapper import NoKindMatch

    missing = GroupVersionKind("scheduling.x-k8s.io", "v1alpha1", "PodGroup")
    rec = Recorder(NoKindMatch(missing), None)
    ctrl = build(mgr, name, clock, rec)
    async with running(ctrl):
        mgr.informers.informer(WIDGET).create(widget("a"))
        await clock.advance(0)
        await clock.advance(0.005)
        assert rec.calls == [Request("ns", "a"), Request("ns", "a")], "retried with backoff"
    assert sample("controller_runtime_reconcile_errors_total", controller=name) == 1
    assert sample("controller_runtime_reconcile_panics_total", controller=name) == 0


def test_option_keywords_name_every_controller_option() -> None:
    # with_options(**overrides) is typed by OptionOverrides: a field added to Options must be
    # added there too, or mypy rejects the keyword
    import dataclasses
    import typing

    from manager.controller import OptionOverrides, Options

    assert set(OptionOverrides.__annotations__) == {f.name for f in dataclasses.fields(Options)}
    hints = typing.get_type_hints(OptionOverrides)
    assert hints == {f.name: typing.get_type_hints(Options)[f.name] for f in dataclasses.fields(Options)}
