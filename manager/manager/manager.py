"""The Manager: runs every runnable in controller-runtime's order and stops them in reverse.

Start order (v0.22): HTTP servers (metrics, probes) -> webhooks -> caches (wait for sync) ->
runnables that do not need leader election -> leader election -> leader-election runnables
(controllers). Probes answer while caches sync; webhooks come before caches because a
conversion webhook served by this process may be needed to list a CRD at all.

Stop order: others, leader-election runnables, caches, webhooks, HTTP servers, all within one
graceful-shutdown budget (30 s); only then is the lease released (if ``release_on_cancel``).
When the lease is *lost* there is no grace: everything is cancelled and ``run`` raises
``LeaderElectionLost`` so the process exits non-zero before another leader's work overlaps ours.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Unpack

import structlog

from manager import collector
from manager._http import HTTPServer, is_disabled
from manager._tls import TLSOption
from manager.client.interfaces import ClientProtocol
from manager.client.restmapper import RESTMapper
from manager.clock import REAL_CLOCK, Clock
from manager.cluster import ClusterCache, ClusterProtocol
from manager.config import service_account_dir
from manager.controller.builder import Builder
from manager.controller.controller import OptionOverrides
from manager.controller.controller import Options as ControllerOptions
from manager.controller.predicate import Predicate
from manager.controller.reconcile import ReconcileFunc
from manager.debug import debug_server
from manager.errors import Error
from manager.health.checks import Checker, flag_checker
from manager.health.server import CheckSet, HealthProbeServer
from manager.leaderelection.elector import (
    DEFAULT_LEASE_DURATION,
    DEFAULT_RENEW_DEADLINE,
    DEFAULT_RETRY_PERIOD,
    LeaderElector,
    new_identity,
)
from manager.leaderelection.lease import LeaseLock
from manager.log import ensure_configured
from manager.memory import HeapTrimmer
from manager.metrics.server import FilterProvider, metrics_server
from manager.runnable import GroupedRunnable, Runnable, WebhookServerRunnable, needs_leader_election
from manager.scheme import KindRef
from manager.tasks import TaskSet

log = structlog.get_logger("manager")


class LeaderElectionLost(Error):
    """This replica lost its lease; exit now (non-zero) so no two leaders act at once."""

    def __init__(self) -> None:
        super().__init__("leader election lost")


class ShutdownTimeoutError(Error):
    pass


class Group(enum.Enum):
    HTTP_SERVERS = "http-servers"
    WEBHOOKS = "webhooks"
    CACHES = "caches"
    OTHERS = "others"
    LEADER_ELECTION = "leader-election"


START_ORDER = (Group.HTTP_SERVERS, Group.WEBHOOKS, Group.CACHES, Group.OTHERS, Group.LEADER_ELECTION)
STOP_ORDER = (Group.OTHERS, Group.LEADER_ELECTION, Group.CACHES, Group.WEBHOOKS, Group.HTTP_SERVERS)


@dataclass
class Options:
    """Manager settings; defaults are controller-runtime's."""

    metrics_bind_address: str = ":8080"
    metrics_secure_serving: bool = False
    """HTTPS for /metrics (Trainer's shipped config turns it on, on :8443)."""
    metrics_cert_dir: str | None = None
    """``tls.crt``/``tls.key`` for secure metrics; without them a self-signed pair is generated at start."""
    metrics_tls_opts: tuple[TLSOption, ...] = ()
    """Applied to the secure metrics server's context after the defaults (``metrics.Options.TLSOpts``)."""
    metrics_filter_provider: FilterProvider | None = None
    """Called with the manager's uncached client; the filter wraps every metrics handler
    (``manager.metrics.filters.with_authentication_and_authorization``: TokenReview + SubjectAccessReview)."""
    health_probe_bind_address: str = ""  # disabled; the deployment enables ":8081"
    liveness_endpoint_name: str = "/healthz"
    debug_bind_address: str = ""
    """``/debug/tasks`` (asyncio task stacks), the counterpart of pprof; disabled by default."""
    readiness_endpoint_name: str = "/readyz"
    leader_election: bool = False
    leader_election_id: str = ""
    leader_election_namespace: str = ""
    leader_election_release_on_cancel: bool = False
    leader_election_labels: dict[str, str] = field(default_factory=dict)
    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    retry_period: float = DEFAULT_RETRY_PERIOD
    graceful_shutdown_timeout: float | None = 30.0
    """Seconds to wait for runnables to stop; 0 skips waiting, ``None`` (or < 0) waits forever."""
    identity: str = ""
    clock: Clock = field(default=REAL_CLOCK)
    controller: ControllerOptions = field(default_factory=ControllerOptions)
    """Defaults for every controller built on this manager (a builder's with_options overrides them)."""
    heap_trim_interval: float | None = 5.0
    """Seconds between returning freed heap memory to the OS (``manager.memory``; glibc only);
    ``None`` never does (not in controller-runtime: Go's runtime does it on its own)."""
    gc_young_generation: int | None = collector.DEFAULT_YOUNG
    """Container allocations between two runs of the cyclic collector's youngest generation while
    the manager runs (CPython's default is 700), and what exists at the start frozen
    (``manager.collector``); ``None`` leaves the collector as it is (not in controller-runtime:
    Go's collector is paced by GOGC)."""
    group_kind_concurrency: dict[str, int] = field(default_factory=dict)
    """Workers per controller keyed by ``Kind.group`` of its main kind, e.g. ``TrainJob.trainer.kubeflow.org``."""


class _RunnableGroup:
    """Members of one group: started together (waiting for readiness), stopped together.

    Their tasks belong to the group's ``TaskSet``: a member that fails is reported once (the
    manager then stops), and ``stop`` cancels and awaits all of them within the budget it is given.
    """

    def __init__(self, group: Group, on_error: Callable[[Runnable, BaseException], None]) -> None:
        self.group = group
        self.members: list[Runnable] = []
        self.started = False
        self._on_error = on_error
        self._runnables: dict[asyncio.Task[object], Runnable] = {}
        self._tasks = TaskSet(f"runnables:{group.value}", on_error=self._failed)

    @property
    def tasks(self) -> list[asyncio.Task[object]]:
        """The members' tasks that have not ended yet."""
        return self._tasks.tasks()

    def add(self, runnable: Runnable) -> asyncio.Event | None:
        self.members.append(runnable)
        if self.started:  # late additions start right away
            return self._launch(runnable)[0]
        return None

    def _launch(self, runnable: Runnable) -> tuple[asyncio.Event, asyncio.Task[None]]:
        ready = asyncio.Event()
        task = self._tasks.spawn(runnable.start(ready), name=f"{self.group.value}:{runnable!r}")
        self._runnables[task] = runnable
        return ready, task

    def _failed(self, task: asyncio.Task[object], err: BaseException) -> None:
        self._on_error(self._runnables[task], err)

    async def start(self, stop: asyncio.Event) -> None:
        """Start every member and wait until each is ready, one of them fails, or ``stop`` is set."""
        self.started = True
        pending = [self._launch(r) for r in list(self.members)]
        waiters = TaskSet(f"start:{self.group.value}")
        stop_waiter = waiters.spawn(stop.wait())
        try:
            for ready, task in pending:
                waiter = waiters.spawn(ready.wait())
                try:
                    await asyncio.wait({waiter, task, stop_waiter}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    waiter.cancel()
                if stop.is_set() or (task.done() and not ready.is_set()):
                    return  # stopping, or it failed before becoming ready (the error path stops us)
        finally:
            await waiters.cancel()

    def ready(self) -> bool:
        return self.started

    async def stop(self, timeout: float | None) -> bool:
        """Cancel every member; wait up to ``timeout`` (None: forever). True if all ended."""
        return await self._tasks.cancel(timeout)


class Manager:
    """Owns the cluster connection, the runnables, health/metrics endpoints and leader election.

    Use::

        mgr = Manager(cluster, Options(leader_election=True, leader_election_id="trainer"))
        Builder(mgr).for_(TrainJob).owns(JobSet).complete(TrainJobReconciler(mgr.client))
        await mgr.run()            # until stop() / SIGTERM; raises LeaderElectionLost on lease loss
    """

    def __init__(self, cluster: ClusterProtocol, options: Options | None = None) -> None:
        self.cluster = cluster
        self.options = options or Options()
        self.elected = asyncio.Event()
        """Set once this replica may run leader-election runnables (immediately without election)."""
        self.liveness = CheckSet()
        self.readiness = CheckSet()
        self._groups = {g: _RunnableGroup(g, self._runnable_failed) for g in Group}
        self._election = TaskSet("leader-election", on_error=self._lead_failed)
        self._controller_names: set[str] = set()
        self._caches_synced = False
        self._running = False
        self._stop_requested: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._lease_lost = False
        self.elector: LeaderElector | None = None
        self.metrics_server: HTTPServer | None = None
        self.health_server: HealthProbeServer | None = None
        self.debug_server: HTTPServer | None = None
        self.readiness.add(
            "cache-sync", flag_checker(lambda: self._caches_synced, "caches are not synced yet")
        )
        self.add(cluster.cache)

    # -- what controllers and users need --------------------------------------------------

    @property
    def client(self) -> ClientProtocol:
        """The default client: reads from the cache, writes to the API server."""
        return self.cluster.client

    @property
    def cache(self) -> ClusterCache:
        return self.cluster.cache

    @property
    def mapper(self) -> RESTMapper:
        """The cluster's REST mapper: ``await mgr.mapper.mapping(gvk)`` raises ``NoKindMatch``
        when the API server does not serve ``gvk``."""
        return self.cluster.mapper

    @property
    def informers(self) -> ClusterCache:
        return self.cluster.cache

    @property
    def api_reader(self) -> ClientProtocol:
        """A client that reads live from the API server."""
        return self.cluster.api_reader

    def claim_controller_name(self, name: str) -> None:
        """Controller names label metrics, so each may be used once per manager."""
        if name in self._controller_names:
            raise ValueError(
                f"controller with name {name!r} already exists. Controller names must be unique "
                "to avoid multiple controllers reporting the same metric"
            )
        self._controller_names.add(name)

    def controller_options(self, group_kind: str) -> ControllerOptions:
        defaults = self.options.controller
        if self.options.clock is not defaults.clock and defaults.clock is REAL_CLOCK:
            defaults = dataclasses.replace(defaults, clock=self.options.clock)
        concurrency = self.options.group_kind_concurrency.get(group_kind)
        if concurrency is not None:
            if concurrency < 1:
                raise ValueError(f"groupKindConcurrency[{group_kind}] must be greater than 0")
            defaults = dataclasses.replace(defaults, max_concurrent_reconciles=concurrency)
        return dataclasses.replace(defaults)

    def reconciler(
        self,
        *,
        for_: KindRef | None = None,
        owns: Sequence[KindRef] = (),
        predicates: Sequence[Predicate] = (),
        name: str | None = None,
        **options: Unpack[OptionOverrides],
    ) -> Callable[[ReconcileFunc], ReconcileFunc]:
        """Decorator sugar over the builder::

        @mgr.reconciler(for_=Widget, owns=[Deployment], max_concurrent_reconciles=5)
        async def reconcile(req: Request) -> Result | None: ...
        """

        def register(fn: ReconcileFunc) -> ReconcileFunc:
            builder = Builder(self)
            if for_ is not None:
                builder.for_(for_, predicates=predicates)
            for kind in owns:
                builder.owns(kind)
            if name is not None:
                builder.named(name)
            builder.with_options(**options).complete(fn)
            return fn

        return register

    def add(self, runnable: Runnable) -> None:
        """Run ``runnable`` with the manager, in the group its kind belongs to."""
        group = self._group_of(runnable)
        self._groups[group].add(runnable)

    def add_webhook_server(self, server: Runnable) -> None:
        self._groups[Group.WEBHOOKS].add(server)

    def add_healthz_check(self, name: str, checker: Checker) -> None:
        self.liveness.add(name, checker)

    def add_readyz_check(self, name: str, checker: Checker) -> None:
        self.readiness.add(name, checker)

    def members(self, group: Group) -> list[Runnable]:
        return list(self._groups[group].members)

    def _group_of(self, runnable: Runnable) -> Group:
        if isinstance(runnable, GroupedRunnable) and runnable.manager_group is not None:
            return Group(runnable.manager_group)
        if isinstance(runnable, HTTPServer):
            return Group.HTTP_SERVERS
        if isinstance(runnable, WebhookServerRunnable):
            return Group.WEBHOOKS  # the webhook.Server shape, as controller-runtime classifies it
        if runnable is self.cluster.cache:
            return Group.CACHES
        if not needs_leader_election(runnable):
            return Group.OTHERS
        return Group.LEADER_ELECTION

    # -- running ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask ``run`` to shut down gracefully (what SIGTERM does)."""
        if self._stop_requested is not None:
            self._stop_requested.set()

    def _runnable_failed(self, runnable: Runnable, err: BaseException) -> None:
        log.error("runnable failed", runnable=repr(runnable), error=str(err), exc_info=err)
        if self._error is None:
            self._error = err
        self.stop()

    async def run(self) -> None:
        """Start everything, block until stopped, then stop in order.

        Raises the first runnable error, ``LeaderElectionLost`` on lease loss, or
        ``ShutdownTimeoutError`` if runnables outlived the grace period.
        """
        if self._running:
            raise RuntimeError("manager already started")
        self._running = True
        ensure_configured()  # structlog's own defaults would print every debug line, unredacted
        self._stop_requested = asyncio.Event()
        self._setup_servers()
        lead_task: asyncio.Task[None] | None = None
        with collector.tuned(self.options.gc_young_generation):
            try:
                await self._start_in_order()
                if not self._stop_requested.is_set():
                    if self.options.leader_election:
                        lead_task = self._election.spawn(self._lead(), name="leader-election")
                    else:
                        await self._groups[Group.LEADER_ELECTION].start(self._stop_requested)
                        if not self._stop_requested.is_set():
                            self.elected.set()
                    await self._stop_requested.wait()
            finally:
                await self._shutdown(lead_task)
        if self._lease_lost:
            raise LeaderElectionLost()
        if self._error is not None:
            raise self._error

    async def __aenter__(self) -> Manager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()

    def _setup_servers(self) -> None:
        opts = self.options
        if opts.heap_trim_interval:
            self.add(HeapTrimmer(opts.heap_trim_interval))
        if not is_disabled(opts.metrics_bind_address):
            metrics_filter = (
                opts.metrics_filter_provider(self.cluster.api_reader)
                if opts.metrics_filter_provider
                else None
            )
            self.metrics_server = metrics_server(
                opts.metrics_bind_address,
                secure=opts.metrics_secure_serving,
                cert_dir=opts.metrics_cert_dir,
                filter=metrics_filter,
                tls_opts=opts.metrics_tls_opts,
            )
            self.add(self.metrics_server)
        if not is_disabled(opts.health_probe_bind_address):
            self.health_server = HealthProbeServer(
                opts.health_probe_bind_address,
                self.liveness,
                self.readiness,
                liveness_endpoint=opts.liveness_endpoint_name,
                readiness_endpoint=opts.readiness_endpoint_name,
            )
            self.add(self.health_server)
        if not is_disabled(opts.debug_bind_address):
            self.debug_server = debug_server(opts.debug_bind_address)
            self.add(self.debug_server)
        if opts.leader_election:
            self.elector = self._new_elector()

    def _new_elector(self) -> LeaderElector:
        opts = self.options
        if not opts.leader_election_id:
            raise ValueError("LeaderElectionID must be configured")
        namespace = opts.leader_election_namespace or _in_cluster_namespace()
        # the lease is read live: a cached client would serve (or refuse) a stale Lease
        lease_client = self.cluster.api_reader if self.cluster.api_reader is not None else self.cluster.client
        lock = LeaseLock(
            lease_client,
            namespace,
            opts.leader_election_id,
            opts.identity or new_identity(),
            labels=opts.leader_election_labels,
        )
        return LeaderElector(
            lock,
            lease_duration=opts.lease_duration,
            renew_deadline=opts.renew_deadline,
            retry_period=opts.retry_period,
            release_on_cancel=opts.leader_election_release_on_cancel,
            clock=opts.clock,
        )

    async def _start_in_order(self) -> None:
        assert self._stop_requested is not None
        for group in START_ORDER[:-1]:
            if self._stop_requested.is_set():
                return
            if group is Group.CACHES:
                await self._warm_informers()
            await self._groups[group].start(self._stop_requested)
            if self._stop_requested.is_set():
                return
            if group is Group.CACHES:
                self._caches_synced = True
                log.info("caches synced")

    async def _warm_informers(self) -> None:
        """Create the informer of every kind a leader-election runnable watches, so the caches
        group lists and watches it: a standby replica is Ready with warm caches before it takes
        the lease, and a failover reconciles at once instead of relisting (docs/scale.md)."""
        cache = self.cluster.cache
        for runnable in self._groups[Group.LEADER_ELECTION].members:
            kinds = getattr(runnable, "watched_kinds", None)
            for gvk in kinds() if callable(kinds) else ():
                try:
                    await cache.get_informer(gvk)
                except Exception as err:  # e.g. a CRD not installed yet: the source keeps retrying
                    log.info("informer not started with the caches", kind=str(gvk), error=str(err))

    async def _lead(self) -> None:
        assert self.elector is not None and self._stop_requested is not None
        await self.elector.acquire()
        # as controller-runtime's OnStartedLeading, which client-go runs beside its renew loop:
        # the group's start waits for every controller's sources to sync, which can last longer
        # than a lease (an informer that was not warmed, a CRD that is not served yet)
        self._election.spawn(self._start_leading(), name="leader-election:start")
        # keep renewing even while stopping: shutdown cancels us (and releases) after the groups stopped
        await self.elector.renew()
        # renew() returned: the lease is gone and someone else may already be leading
        log.error("leader election lost")
        self._lease_lost = True
        self._stop_requested.set()

    async def _start_leading(self) -> None:
        assert self._stop_requested is not None
        await self._groups[Group.LEADER_ELECTION].start(self._stop_requested)
        if not self._stop_requested.is_set():
            self.elected.set()

    def _lead_failed(self, _task: asyncio.Task[object], err: BaseException) -> None:
        self._runnable_failed(self.elector, err)  # type: ignore[arg-type]

    async def _shutdown(self, lead_task: asyncio.Task[None] | None) -> None:
        timeout = self.options.graceful_shutdown_timeout
        if self._lease_lost:
            timeout = 0.0
        if timeout is not None and timeout < 0:
            timeout = None
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        all_stopped = True
        for group in STOP_ORDER:
            remaining = None if deadline is None else max(0.0, deadline - loop.time())
            stopped = await self._groups[group].stop(remaining)
            all_stopped = all_stopped and stopped
        if lead_task is not None:  # only now: releasing the lease earlier could let two leaders overlap
            await self._election.cancel()
        if not all_stopped and not self._lease_lost and self._error is None:
            self._error = ShutdownTimeoutError(
                f"failed waiting for all runnables to end within grace period of {timeout:g}s"
            )


def _in_cluster_namespace() -> str:
    try:
        return (service_account_dir() / "namespace").read_text().strip()
    except OSError:
        pass
    namespace = os.environ.get("POD_NAMESPACE", "")
    if namespace:
        return namespace
    raise ValueError(
        "unable to find leader election namespace: not running in-cluster, please specify LeaderElectionNamespace"
    )
