"""The controller: a rate-limited queue of requests, its sources, and N workers calling the reconciler.

What happens to a request after ``reconcile`` (controller-runtime's table, docs/behaviour/framework.md A.7):

==============================  ============================  ===============================
outcome                         queue                          reconcile_total{result}
==============================  ============================  ===============================
``TerminalError`` raised        nothing (no retry)             error (+ errors, terminal errors)
any other exception             ``add_rate_limited``           error (+ errors[, panics])
``Result(requeue_after=d>0)``   ``forget`` + ``add_after(d)``  requeue_after
``None`` / ``Result()``         ``forget``                     success
==============================  ============================  ===============================

An exception never ends a worker (unless ``recover_panic=False``, meant for tests), and
``asyncio.CancelledError`` always propagates: it is how the manager stops us. The queue makes
sure one request is never reconciled by two workers at once, whatever their number.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Protocol, TypedDict, cast

import structlog

from manager.clock import REAL_CLOCK, Clock
from manager.controller.reconcile import (
    ReconcileFunc,
    Reconciler,
    Request,
    Result,
    TerminalError,
    _routine_type,
    as_reconcile_func,
    is_routine,
)
from manager.controller.source import Source
from manager.errors import Error
from manager.log import bound as log_bound
from manager.metrics import controller as m
from manager.metrics.workqueue import PrometheusQueueMetrics
from manager.scheme import GroupVersionKind
from manager.tasks import TaskSet
from manager.workqueue import RateLimiter, RateLimitingQueue, ShutDownError, default_controller_rate_limiter

log = structlog.get_logger("manager.controller")


class YieldTo(Protocol):
    """What a worker waits for before each reconcile (``manager.webhook.pressure``: admission
    under load); returns the seconds waited."""

    async def wait(self) -> float: ...


@dataclass
class Options:
    """Per-controller settings; defaults are controller-runtime's."""

    max_concurrent_reconciles: int = 1
    cache_sync_timeout: float = 120.0
    recover_panic: bool = True
    need_leader_election: bool = True
    reconciliation_timeout: float | None = None
    rate_limiter: RateLimiter[Request] | None = None
    clock: Clock = field(default=REAL_CLOCK)
    yield_to: YieldTo | None = None
    """Awaited before each reconcile (not in controller-runtime; docs/behaviour/framework.md D.14)."""


class OptionOverrides(TypedDict, total=False):
    """``Options`` fields as keywords (``Builder.with_options(max_concurrent_reconciles=10)``)."""

    max_concurrent_reconciles: int
    cache_sync_timeout: float
    recover_panic: bool
    need_leader_election: bool
    reconciliation_timeout: float | None
    rate_limiter: RateLimiter[Request] | None
    clock: Clock
    yield_to: YieldTo | None


def new_reconcile_id() -> str:
    """A random (version 4) UUID, as controller-runtime gives each reconcile: from ``random``
    rather than ``uuid.uuid4`` (12 us, a getrandom call and a UUID object per reconcile), as it
    only tells one reconcile's log lines from another's."""
    bits = (random.getrandbits(128) & ~(0xF << 76 | 0x3 << 62)) | (0x4 << 76 | 0x2 << 62)
    h = f"{bits:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class _ControllerMetrics:
    """One controller's metric series, looked up once instead of per reconcile."""

    def __init__(self, name: str) -> None:
        self.active = m.ACTIVE_WORKERS.labels(name)
        self.time = m.RECONCILE_TIME.labels(name)
        self.errors = m.RECONCILE_ERRORS.labels(name)
        self.terminal_errors = m.TERMINAL_RECONCILE_ERRORS.labels(name)
        self.panics = m.RECONCILE_PANICS.labels(name)
        self.total_success = m.RECONCILE_TOTAL.labels(name, "success")
        self.total_error = m.RECONCILE_TOTAL.labels(name, "error")
        self.total_requeue_after = m.RECONCILE_TOTAL.labels(name, "requeue_after")


class CacheSyncTimeoutError(Error):
    """A source did not deliver its initial state within ``cache_sync_timeout``."""


class Controller:
    """A runnable; add it to the manager (the builder does) and it runs while this replica leads."""

    def __init__(
        self,
        name: str,
        reconciler: Reconciler | ReconcileFunc,
        options: Options | None = None,
        *,
        kind: str = "",
        group: str = "",
    ) -> None:
        if not name:
            raise ValueError("a controller needs a name (it labels its metrics and logs)")
        self.name = name
        self.options = options or Options()
        if self.options.max_concurrent_reconciles < 1:
            raise ValueError("max_concurrent_reconciles must be at least 1")
        self.kind = kind
        self.group = group
        self._reconcile = as_reconcile_func(reconciler)
        # what every line a reconcile logs carries besides its request and reconcileID
        self._log_context = {
            "controller": name,
            "controllerGroup": group,
            "controllerKind": kind,
            "kind": kind,
        }
        self._sources: list[Source] = []
        self._started = False
        self.queue: RateLimitingQueue[Request] | None = None
        self._metrics: _ControllerMetrics  # series are created when the controller starts

    @property
    def needs_leader_election(self) -> bool:
        return self.options.need_leader_election

    def watched_kinds(self) -> list[GroupVersionKind]:
        """The kinds of this controller's informer sources (the manager starts their informers
        with the caches, before leader election)."""
        return [gvk for s in self._sources if isinstance(gvk := getattr(s, "gvk", None), GroupVersionKind)]

    def watch(self, source: Source) -> None:
        if self._started:
            raise RuntimeError("sources must be added before the controller starts")
        self._sources.append(source)

    async def start(self, started: asyncio.Event) -> None:
        if self._started:
            raise RuntimeError(f"controller {self.name} was already started")
        self._started = True
        opts = self.options
        m.initialize(self.name, opts.max_concurrent_reconciles)
        self._metrics = _ControllerMetrics(self.name)
        limiter = opts.rate_limiter or cast(RateLimiter[Request], default_controller_rate_limiter(opts.clock))
        queue: RateLimitingQueue[Request] = RateLimitingQueue(
            self.name,
            rate_limiter=limiter,
            metrics=PrometheusQueueMetrics(self.name, now=opts.clock.now),
            clock=opts.clock,
        )
        self.queue = queue
        tasks = TaskSet(self.name)  # sources and workers: none outlives this call
        try:
            await self._start_sources(queue, tasks)
            for i in range(opts.max_concurrent_reconciles):
                tasks.spawn(self._worker(queue), name=f"{self.name}-worker-{i}")
            log.info("Starting workers", controller=self.name, worker_count=opts.max_concurrent_reconciles)
            started.set()
            await self._supervise(tasks.tasks())
        finally:
            queue.shutdown()
            await tasks.cancel()
            log.info("All workers finished", controller=self.name)

    async def _start_sources(self, queue: RateLimitingQueue[Request], tasks: TaskSet) -> None:
        """Start every source at once (their informers list in parallel), then wait for each to
        sync within ``cache_sync_timeout`` of the common start."""
        started: list[tuple[Source, asyncio.Event, asyncio.Task[None]]] = []
        for source in self._sources:
            synced = asyncio.Event()
            task = tasks.spawn(source.run(queue, synced), name=f"{self.name}-{source!r}")
            started.append((source, synced, task))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.cache_sync_timeout
        waiters = TaskSet(f"{self.name}-sync")
        for source, synced, task in started:
            waiter = waiters.spawn(synced.wait())
            try:
                done, _ = await asyncio.wait(
                    {task, waiter},
                    timeout=max(0.0, deadline - loop.time()),
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                await waiters.cancel()
            if task in done:
                task.result()  # a source that failed to start fails the controller
                raise RuntimeError(f"source {source!r} ended before it synced")
            if waiter not in done:
                raise CacheSyncTimeoutError(f"timed out waiting for cache to be synced for {source!r}")

    async def _supervise(self, tasks: list[asyncio.Task[object]]) -> None:
        """Run until cancelled; a failing source or (with recover_panic off) worker stops us."""
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
        await asyncio.Event().wait()

    async def _worker(self, queue: RateLimitingQueue[Request]) -> None:
        yield_to = self.options.yield_to
        while True:
            try:
                req = await queue.get()
            except ShutDownError:
                return
            try:
                if yield_to is not None:
                    await yield_to.wait()
                await self._reconcile_handler(queue, req)
            finally:
                queue.done(req)

    async def _reconcile_handler(self, queue: RateLimitingQueue[Request], req: Request) -> None:
        metrics = self._metrics
        metrics.active.inc()
        started = self.options.clock.now()
        try:
            with log_bound(
                {
                    **self._log_context,
                    "namespace": req.namespace,
                    "name": req.name,
                    "reconcileID": new_reconcile_id(),
                }
            ):
                await self._reconcile_once(queue, req)
        finally:
            metrics.active.dec()
            metrics.time.observe(self.options.clock.now() - started)

    async def _reconcile_once(self, queue: RateLimitingQueue[Request], req: Request) -> None:
        metrics = self._metrics
        try:
            if self.options.reconciliation_timeout:
                async with asyncio.timeout(self.options.reconciliation_timeout):
                    result = await self._reconcile(req)
            else:
                result = await self._reconcile(req)
            if result is not None and not isinstance(result, Result):
                raise TypeError(f"reconcile must return Result or None, not {type(result).__name__}")
        except asyncio.CancelledError:
            raise
        except TerminalError as err:
            metrics.terminal_errors.inc()
            metrics.errors.inc()
            metrics.total_error.inc()
            log.error("Reconciler error", error=str(err), terminal=True, exc_info=err)
            return
        except Exception as err:
            expected = is_routine(err)
            if not expected:
                metrics.panics.inc()
                if not self.options.recover_panic:
                    raise
            queue.add_rate_limited(req)
            metrics.errors.inc()
            metrics.total_error.inc()
            # A conflict or an API error is routine and retried: its message says it all. A
            # traceback is kept for what is probably a bug.
            if expected:
                log.error("Reconciler error", error=str(err), error_type=_routine_type(err))
            else:
                log.error("Reconciler error", error=str(err), exc_info=err)
            return
        if result is not None and result.requeue_after and result.requeue_after > 0:
            queue.forget(req)
            queue.add_after(req, result.requeue_after)
            metrics.total_requeue_after.inc()
            log.debug("Reconcile done, requeueing after", requeue_after=result.requeue_after)
            return
        queue.forget(req)
        metrics.total_success.inc()
        log.debug("Reconcile successful")

    def __repr__(self) -> str:
        return f"Controller({self.name!r})"
