"""The manager: start/stop order, readiness gated on cache sync, probes, metrics, leader election."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import aiohttp
import pytest
import structlog

from manager.controller import Builder, Request
from manager.manager import Group, LeaderElectionLost, Manager, Options, ShutdownTimeoutError
from manager.scheme import GroupVersionKind
from manager.testing import eventually
from manager.testing.clock import FakeClock
from manager.testing.informers import FakeInformers
from manager.testing.leases import FakeLeases

LOOPBACK = "127.0.0.1:0"


class Rec:
    """A runnable that records when it starts and stops."""

    def __init__(self, name: str, log: list[str], *, group: str | None = None, leader: bool = True) -> None:
        self.name = name
        self.log = log
        self.manager_group = group
        self.needs_leader_election = leader

    async def start(self, started: asyncio.Event) -> None:
        self.log.append(f"start {self.name}")
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.log.append(f"stop {self.name}")

    def __repr__(self) -> str:
        return self.name


class StubCache(FakeInformers):
    """Informers plus a runnable whose readiness (sync) a test controls with ``gate``."""

    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log
        self.gate = asyncio.Event()

    async def start(self, started: asyncio.Event) -> None:
        self.log.append("start caches")
        await self.gate.wait()
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.log.append("stop caches")

    async def get(self, gvk: GroupVersionKind, name: str, namespace: str = "") -> dict[str, Any]:
        raise NotImplementedError

    async def list(self, gvk: GroupVersionKind, **kw: Any) -> list[dict[str, Any]]:
        return []


class StubCluster:
    def __init__(self, log: list[str]) -> None:
        self.cache = StubCache(log)
        self.client = FakeLeases("kubeflow-system", "trainer")
        self.api_reader = None


def options(**kw: Any) -> Options:
    base: dict[str, Any] = {"metrics_bind_address": LOOPBACK, "health_probe_bind_address": LOOPBACK}
    base.update(kw)
    return Options(**base)


@contextlib.asynccontextmanager
async def running(mgr: Manager) -> Any:
    task = asyncio.create_task(mgr.run())
    try:
        yield task
    finally:
        if not task.done():
            mgr.stop()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 5)


async def get(port: int | None, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as resp:
        return resp.status, await resp.text()


async def test_start_order_waits_for_caches_and_stop_order_is_reversed() -> None:
    log: list[str] = []
    cluster = StubCluster(log)
    mgr = Manager(cluster, options())  # type: ignore[arg-type]
    for rec in (
        Rec("controller", log),
        Rec("other", log, leader=False),
        Rec("webhook", log, group="webhooks"),
        Rec("server", log, group="http-servers"),
    ):
        mgr.add(rec)
    assert [repr(r) for r in mgr.members(Group.LEADER_ELECTION)] == ["controller"]
    async with running(mgr) as task:
        await eventually(lambda: "start caches" in log, timeout=5, interval=0.01)
        assert log == ["start server", "start webhook", "start caches"]
        assert not mgr.elected.is_set()
        status, body = await get(mgr.health_server.port if mgr.health_server else None, "/readyz")
        assert status == 500 and "[-]cache-sync failed: reason withheld" in body
        status, body = await get(mgr.health_server.port if mgr.health_server else None, "/readyz/cache-sync")
        assert (status, body) == (500, "internal server error: caches are not synced yet\n")

        cluster.cache.gate.set()  # initial list done
        await asyncio.wait_for(mgr.elected.wait(), 5)
        assert log[3:] == ["start other", "start controller"]
        status, body = await get(mgr.health_server.port if mgr.health_server else None, "/readyz")
        assert (status, body) == (200, "ok")
        mgr.stop()
        await asyncio.wait_for(task, 5)
    assert log[5:] == ["stop other", "stop controller", "stop caches", "stop webhook", "stop server"]


async def test_health_endpoints_follow_the_upstream_format() -> None:
    log: list[str] = []
    cluster = StubCluster(log)
    cluster.cache.gate.set()
    mgr = Manager(cluster, options())  # type: ignore[arg-type]

    def broken(_request: object) -> None:
        raise RuntimeError("disk full")

    mgr.add_healthz_check("ping", lambda _r: None)
    mgr.add_healthz_check("disk", broken)
    async with running(mgr):
        await asyncio.wait_for(mgr.elected.wait(), 5)
        port = mgr.health_server.port if mgr.health_server else None
        assert await get(port, "/healthz") == (
            500,
            "[-]disk failed: reason withheld\n[+]ping ok\nhealthz check failed\n",
        )
        assert await get(port, "/healthz?exclude=disk") == (200, "ok")
        assert await get(port, "/healthz?exclude=disk&exclude=nope&verbose") == (
            200,
            '[+]disk excluded: ok\n[+]ping ok\nwarn: some health checks cannot be excluded: no matches for "nope"\n'
            "healthz check passed\n",
        )
        assert await get(port, "/healthz/ping") == (200, "ok")
        assert await get(port, "/healthz/disk") == (500, "internal server error: disk full\n")
        assert (await get(port, "/healthz/missing"))[0] == 404
        assert await get(port, "/readyz?verbose") == (200, "[+]cache-sync ok\nhealthz check passed\n")
        with pytest.raises(RuntimeError, match="already started"):
            mgr.add_readyz_check("late", lambda _r: None)


async def test_metrics_endpoint_exposes_the_catalogue() -> None:
    log: list[str] = []
    cluster = StubCluster(log)
    cluster.cache.gate.set()
    mgr = Manager(cluster, options())  # type: ignore[arg-type]

    async def reconcile(req: Request) -> None:
        return None

    Builder(mgr).for_(GroupVersionKind("example.com", "v1", "Gizmo")).complete(reconcile)
    async with running(mgr):
        await asyncio.wait_for(mgr.elected.wait(), 5)
        cluster.cache.informer(GroupVersionKind("example.com", "v1", "Gizmo")).create(
            {"metadata": {"name": "g", "namespace": "ns"}}
        )
        port = mgr.metrics_server.port if mgr.metrics_server else None

        async def scraped() -> str:
            status, body = await get(port, "/metrics")
            assert status == 200
            assert 'controller_runtime_reconcile_total{controller="gizmo",result="success"} 1.0' in body
            return body

        body = await eventually(scraped, timeout=5, interval=0.02)
    for name in (
        "controller_runtime_reconcile_total",
        "controller_runtime_reconcile_errors_total",
        "controller_runtime_terminal_reconcile_errors_total",
        "controller_runtime_reconcile_panics_total",
        "controller_runtime_reconcile_time_seconds",
        "controller_runtime_max_concurrent_reconciles",
        "controller_runtime_active_workers",
        "workqueue_depth",
        "workqueue_adds_total",
        "workqueue_queue_duration_seconds",
        "workqueue_work_duration_seconds",
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
        "workqueue_retries_total",
        "rest_client_requests_total",
        "leader_election_master_status",
        "controller_runtime_webhook_latency_seconds",
        "controller_runtime_webhook_requests_total",
        "controller_runtime_webhook_requests_in_flight",
        "controller_runtime_webhook_panics_total",
    ):
        assert f"# TYPE {name} " in body, name
    assert 'controller_runtime_reconcile_time_seconds_bucket{controller="gizmo",le="0.005"}' in body
    assert 'controller_runtime_reconcile_time_seconds_bucket{controller="gizmo",le="60.0"}' in body
    assert 'workqueue_depth{controller="gizmo",name="gizmo",priority=""} 0.0' in body
    assert 'workqueue_queue_duration_seconds_bucket{controller="gizmo",le="1e-08",name="gizmo"}' in body
    assert "_created" not in body


async def test_a_failing_runnable_stops_the_manager_with_its_error() -> None:
    log: list[str] = []
    cluster = StubCluster(log)
    cluster.cache.gate.set()
    mgr = Manager(cluster, options(metrics_bind_address="0"))  # type: ignore[arg-type]

    class Boom:
        needs_leader_election = False

        async def start(self, started: asyncio.Event) -> None:
            started.set()
            raise OSError("port in use")

    mgr.add(Boom())
    mgr.add(Rec("controller", log))
    with pytest.raises(OSError, match="port in use"):
        await asyncio.wait_for(mgr.run(), 5)
    assert "stop caches" in log


async def test_graceful_shutdown_timeout_is_reported() -> None:
    log: list[str] = []
    cluster = StubCluster(log)
    cluster.cache.gate.set()
    mgr = Manager(cluster, options(metrics_bind_address="0", graceful_shutdown_timeout=0.05))  # type: ignore[arg-type]

    release = asyncio.Event()

    class Stubborn:
        needs_leader_election = False

        async def start(self, started: asyncio.Event) -> None:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                log.append("ignored cancel")
            await release.wait()  # outlives the grace period

    mgr.add(Stubborn())
    task = asyncio.create_task(mgr.run())
    await asyncio.wait_for(mgr.elected.wait(), 5)
    mgr.stop()
    with pytest.raises(ShutdownTimeoutError, match=r"grace period of 0\.05s"):
        await asyncio.wait_for(task, 5)
    assert "ignored cancel" in log
    release.set()
    await asyncio.gather(*mgr._groups[Group.OTHERS].tasks, return_exceptions=True)


def test_a_webhook_server_is_recognised_by_its_shape() -> None:
    class WebhookServer:
        needs_leader_election = False

        def register(self, path: str, handler: object) -> None: ...

        def started_checker(self) -> object: ...

        async def start(self, started: asyncio.Event) -> None: ...

    mgr = Manager(StubCluster([]), options())  # type: ignore[arg-type]
    server = WebhookServer()
    mgr.add(server)
    assert mgr.members(Group.WEBHOOKS) == [server], "webhooks start before caches, not with the others"
    assert mgr.members(Group.OTHERS) == []


def test_duplicate_controller_names_are_rejected() -> None:
    mgr = Manager(StubCluster([]), options())  # type: ignore[arg-type]
    mgr.claim_controller_name("trainjob")
    with pytest.raises(ValueError, match="already exists"):
        mgr.claim_controller_name("trainjob")


# -- leader election -------------------------------------------------------------------------


def le_options(clock: FakeClock, **kw: Any) -> Options:
    return options(
        metrics_bind_address="0",
        leader_election=True,
        leader_election_id="trainer",
        leader_election_namespace="kubeflow-system",
        identity="me",
        clock=clock,
        **kw,
    )


async def test_controllers_wait_for_leadership() -> None:
    log: list[str] = []
    cluster = StubCluster(log)
    cluster.cache.gate.set()
    cluster.client.write_spec(holderIdentity="other", leaseDurationSeconds=15)
    clock = FakeClock()
    mgr = Manager(cluster, le_options(clock))  # type: ignore[arg-type]
    mgr.add(Rec("controller", log))
    mgr.add(Rec("other", log, leader=False))
    async with running(mgr):
        await eventually(lambda: "start other" in log, timeout=5, interval=0.01)
        await clock.advance(10)
        assert "start controller" not in log, "not the leader yet"
        assert not mgr.elected.is_set()
        await clock.advance(10)  # the other holder never renewed: its lease expired
        await asyncio.wait_for(mgr.elected.wait(), 5)
        assert "start controller" in log
        assert cluster.client.spec()["holderIdentity"] == "me"


async def test_the_leader_renews_its_lease_while_its_controllers_start() -> None:
    """The lease is renewed from the moment it is taken, beside the leader-election group's start
    (controller-runtime's OnStartedLeading runs beside client-go's renew loop): a controller
    whose sources take longer than a lease to sync must not cost the lease."""
    log: list[str] = []
    cluster = StubCluster(log)
    cluster.cache.gate.set()
    clock = FakeClock()
    mgr = Manager(cluster, le_options(clock))  # type: ignore[arg-type]
    synced = asyncio.Event()

    class SlowSources(Rec):
        async def start(self, started: asyncio.Event) -> None:
            self.log.append(f"start {self.name}")
            await synced.wait()  # its sources sync only now
            started.set()
            await asyncio.Event().wait()

    mgr.add(SlowSources("controller", log))
    async with running(mgr):

        def held() -> None:
            assert cluster.client.spec()["holderIdentity"] == "me"

        await eventually(held, timeout=5, interval=0.01, retry_on=(KeyError,))
        acquired = cluster.client.spec()["renewTime"]
        for _ in range(10):  # 20 s: longer than the 15 s lease
            await clock.advance(2)

        def renewed() -> None:
            assert cluster.client.spec()["renewTime"] != acquired

        await eventually(renewed, timeout=5, interval=0.01)
        held()
        assert "start controller" in log and not mgr.elected.is_set()
        synced.set()
        await asyncio.wait_for(mgr.elected.wait(), 5)


async def test_lease_loss_stops_everything_and_raises() -> None:
    log: list[str] = []
    cluster = StubCluster(log)
    cluster.cache.gate.set()
    clock = FakeClock()
    mgr = Manager(cluster, le_options(clock))  # type: ignore[arg-type]
    mgr.add(Rec("controller", log))
    task = asyncio.create_task(mgr.run())
    await asyncio.wait_for(mgr.elected.wait(), 5)
    cluster.client.down = True  # renewals fail from now on
    await clock.advance(15)
    with pytest.raises(LeaderElectionLost, match="leader election lost"):
        await asyncio.wait_for(task, 5)
    await asyncio.sleep(0)
    assert "stop controller" in log


async def test_release_on_cancel_happens_after_controllers_stopped() -> None:
    log: list[str] = []
    cluster = StubCluster(log)
    cluster.cache.gate.set()
    clock = FakeClock()
    mgr = Manager(cluster, le_options(clock, leader_election_release_on_cancel=True))  # type: ignore[arg-type]
    mgr.add(Rec("controller", log))
    original_update = cluster.client.update

    async def update(obj: dict[str, Any]) -> dict[str, Any]:
        if not obj["spec"]["holderIdentity"]:
            log.append("release lease")
        return await original_update(obj)

    cluster.client.update = update  # type: ignore[method-assign]
    task = asyncio.create_task(mgr.run())
    await asyncio.wait_for(mgr.elected.wait(), 5)
    mgr.stop()
    await asyncio.wait_for(task, 5)
    assert log.index("stop controller") < log.index("release lease")
    assert cluster.client.spec()["holderIdentity"] == ""
    assert cluster.client.spec()["leaseDurationSeconds"] == 1


def test_group_kind_concurrency_applies_with_and_without_for() -> None:
    trainjob = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainJob")
    mgr = Manager(
        StubCluster([]),  # type: ignore[arg-type]
        options(group_kind_concurrency={"TrainJob.trainer.kubeflow.org": 5}),
    )

    async def reconcile(req: Request) -> None:
        return None

    from manager.controller import enqueue_for_object

    with_for = Builder(mgr).for_(trainjob).build(reconcile)
    assert with_for.options.max_concurrent_reconciles == 5
    # Trainer's trainjob_controller has no for_(): upstream ignores the setting there (a quirk we fix)
    without_for = (
        Builder(mgr).named("trainjob_controller").watches(trainjob, enqueue_for_object()).build(reconcile)
    )
    assert without_for.options.max_concurrent_reconciles == 5
    explicit = (
        Builder(mgr)
        .for_(trainjob)
        .named("explicit")
        .with_options(max_concurrent_reconciles=2)
        .build(reconcile)
    )
    assert explicit.options.max_concurrent_reconciles == 2
    other = Builder(mgr).for_(GroupVersionKind("", "v1", "ConfigMap")).build(reconcile)
    assert other.options.max_concurrent_reconciles == 1
    bad = Manager(StubCluster([]), options(group_kind_concurrency={"TrainJob.trainer.kubeflow.org": 0}))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must be greater than 0"):
        Builder(bad).for_(trainjob).build(reconcile)


async def test_stop_while_caches_sync_does_not_hang() -> None:
    log: list[str] = []
    cluster = StubCluster(log)  # gate never opens: the initial list never completes
    mgr = Manager(cluster, options(metrics_bind_address="0"))  # type: ignore[arg-type]
    mgr.add(Rec("controller", log))
    task = asyncio.create_task(mgr.run())
    await eventually(lambda: "start caches" in log, timeout=5, interval=0.01)
    mgr.stop()
    await asyncio.wait_for(task, 5)
    assert "start controller" not in log
    assert not mgr.elected.is_set()


async def test_endpoint_names_are_configurable() -> None:
    # spec: upstream Trainer ignores health.readinessEndpointName/livenessEndpointName; we honour them
    cluster = StubCluster([])
    cluster.cache.gate.set()
    mgr = Manager(
        cluster,  # type: ignore[arg-type]
        options(metrics_bind_address="0", readiness_endpoint_name="ready", liveness_endpoint_name="/alive"),
    )
    async with running(mgr):
        await asyncio.wait_for(mgr.elected.wait(), 5)
        port = mgr.health_server.port if mgr.health_server else None
        assert await get(port, "/ready") == (200, "ok")
        assert await get(port, "/alive/ping") == (200, "ok")
        assert (await get(port, "/readyz"))[0] == 404


async def test_secure_metrics_serve_https_with_a_self_signed_certificate() -> None:
    import ssl

    cluster = StubCluster([])
    cluster.cache.gate.set()
    mgr = Manager(cluster, options(health_probe_bind_address="0", metrics_secure_serving=True))  # type: ignore[arg-type]
    async with running(mgr):
        await asyncio.wait_for(mgr.elected.wait(), 5)
        port = mgr.metrics_server.port if mgr.metrics_server else None
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"https://127.0.0.1:{port}/metrics", ssl=context) as resp,
        ):
            assert resp.status == 200
            assert "# TYPE controller_runtime_reconcile_total counter" in await resp.text()
        context.set_alpn_protocols(["h2", "http/1.1"])
        _reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
        ssl_object = writer.get_extra_info("ssl_object")
        assert ssl_object.version() in ("TLSv1.2", "TLSv1.3")
        assert ssl_object.selected_alpn_protocol() == "http/1.1", "HTTP/2 is not offered"
        writer.close()
        with pytest.raises(aiohttp.ClientError):
            await get(port, "/metrics")  # plain HTTP is refused


async def test_decorator_sugar_builds_the_same_controller() -> None:
    log: list[str] = []
    cluster = StubCluster(log)
    cluster.cache.gate.set()
    mgr = Manager(cluster, options(metrics_bind_address="0", health_probe_bind_address="0"))  # type: ignore[arg-type]
    widget = GroupVersionKind("example.com", "v1", "Widget")
    deployment = GroupVersionKind("apps", "v1", "Deployment")
    seen: list[Request] = []

    @mgr.reconciler(for_=widget, owns=[deployment], max_concurrent_reconciles=3)
    async def reconcile(req: Request) -> None:
        seen.append(req)

    (controller,) = mgr.members(Group.LEADER_ELECTION)
    assert controller.name == "widget" and controller.options.max_concurrent_reconciles == 3  # type: ignore[attr-defined]
    async with running(mgr):
        await asyncio.wait_for(mgr.elected.wait(), 5)
        owner = {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "name": "w",
            "uid": "u",
            "controller": True,
        }
        cluster.cache.informer(deployment).create(
            {"metadata": {"name": "d", "namespace": "ns", "ownerReferences": [owner]}}
        )
        await eventually(lambda: seen == [Request("ns", "w")], timeout=5, interval=0.01)


async def test_checkers_may_take_no_request_and_return_a_bool() -> None:
    # the webhook server's started_checker() is a zero-argument callable returning a bool
    cluster = StubCluster([])
    cluster.cache.gate.set()
    mgr = Manager(cluster, options(metrics_bind_address="0"))  # type: ignore[arg-type]
    started = {"value": False}
    mgr.add_readyz_check("webhook", lambda: started["value"])

    async def async_ok() -> bool:
        return True

    mgr.add_readyz_check("async", async_ok)
    async with running(mgr):
        await asyncio.wait_for(mgr.elected.wait(), 5)
        port = mgr.health_server.port if mgr.health_server else None
        assert await get(port, "/readyz") == (
            500,
            "[+]async ok\n[+]cache-sync ok\n[-]webhook failed: reason withheld\nhealthz check failed\n",
        )
        assert await get(port, "/readyz/webhook") == (500, "internal server error: check returned false\n")
        started["value"] = True
        assert await get(port, "/readyz") == (200, "ok")


async def test_debug_endpoint_lists_tasks_with_stacks() -> None:
    log: list[str] = []
    cluster = StubCluster(log)
    cluster.cache.gate.set()
    mgr = Manager(
        cluster,  # type: ignore[arg-type]
        options(metrics_bind_address="0", health_probe_bind_address="0", debug_bind_address=LOOPBACK),
    )
    mgr.add(Rec("controller", log))
    async with running(mgr):
        await asyncio.wait_for(mgr.elected.wait(), 5)
        port = mgr.debug_server.port if mgr.debug_server else None
        status, body = await get(port, "/debug/tasks")
        assert status == 200
        assert "leader-election:controller" in body, "runnable tasks are named after their group"
        assert "Rec.start" in body or "in start" in body, "each task shows where it waits"


async def test_a_manager_whose_program_configured_no_logging_logs_as_the_entry_point_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # structlog's defaults would print every reconcile's debug line (a third of a trivial
    # controller's CPU in the framework bench) and skip the redaction
    structlog.reset_defaults()
    try:
        log: list[str] = []
        cluster = StubCluster(log)
        cluster.cache.gate.set()
        mgr = Manager(cluster, options(metrics_bind_address="0", health_probe_bind_address="0"))  # type: ignore[arg-type]
        async with running(mgr):
            await asyncio.wait_for(mgr.elected.wait(), 5)
            structlog.get_logger("mine").debug("Reconcile successful")
        assert structlog.is_configured()
        said = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
        assert said and said[0]["logger"] == "manager.log" and said[0]["level"] == "info"
        assert all(line["level"] != "debug" for line in said)
    finally:
        structlog.reset_defaults()
