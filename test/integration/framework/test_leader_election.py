"""Two managers electing a leader through a real Lease on the API server.

Only the leader runs its controllers; when it dies the other takes over after the lease
expires, and at once when the leader released the lease on a graceful stop. The Lease client
here is a thin adapter over kubernetes-asyncio, so the optimistic-concurrency conflicts are the
API server's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from manager.client.errors import ApiError
from manager.manager import Manager, Options
from manager.scheme import GroupVersionKind
from manager.testing import eventually
from manager.testing.informers import FakeInformers


class KubeLeases:
    """``LeaseClient`` over CoordinationV1Api, returning dicts and raising our ApiError tree."""

    def __init__(self, api: client.ApiClient) -> None:
        self.coordination = client.CoordinationV1Api(api)

    async def _call(self, request: Awaitable[Any]) -> dict[str, Any]:
        try:
            response = await request
        except ApiException as err:
            raise ApiError.from_status(err.status, json.loads(err.body) if err.body else None) from None
        body: dict[str, Any] = json.loads(await response.read())
        if not 200 <= response.status < 300:  # unpreloaded responses are not checked by the client
            raise ApiError.from_status(response.status, body)
        return body

    async def get(self, kind: GroupVersionKind, name: str, namespace: str = "") -> dict[str, Any]:
        return await self._call(
            self.coordination.read_namespaced_lease(name, namespace, _preload_content=False)
        )

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        ns = obj["metadata"]["namespace"]
        return await self._call(self.coordination.create_namespaced_lease(ns, obj, _preload_content=False))

    async def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        return await self._call(
            self.coordination.replace_namespaced_lease(
                meta["name"], meta["namespace"], obj, _preload_content=False
            )
        )


class SyncedCache(FakeInformers):
    async def start(self, started: asyncio.Event) -> None:
        started.set()
        await asyncio.Event().wait()

    async def get(self, gvk: GroupVersionKind, name: str, namespace: str = "") -> dict[str, Any]:
        raise NotImplementedError

    async def list(self, gvk: GroupVersionKind, **kw: Any) -> list[dict[str, Any]]:
        return []


class Cluster:
    def __init__(self, api: client.ApiClient) -> None:
        self.client = KubeLeases(api)
        self.cache = SyncedCache()
        self.api_reader = self.client


class Worker:
    """Stands in for a controller: records that it ran on this replica."""

    def __init__(self, name: str, running: set[str]) -> None:
        self.name = name
        self.running = running

    async def start(self, started: asyncio.Event) -> None:
        self.running.add(self.name)
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.running.discard(self.name)


async def contending(candidate: Manager, holder_identity: str) -> None:
    """Until ``candidate`` has tried for the lease and found ``holder_identity`` holding it."""

    def saw_holder() -> None:
        assert candidate.elector is not None, "no elector yet"
        assert candidate.elector.leader() == holder_identity, candidate.elector.leader()

    await eventually(saw_holder, timeout=30, message=f"the candidate observed {holder_identity}'s lease")


def manager(api: client.ApiClient, namespace: str, identity: str, running: set[str], **kw: Any) -> Manager:
    options = Options(
        metrics_bind_address="0",
        leader_election=True,
        leader_election_id="trainer-itest",
        leader_election_namespace=namespace,
        identity=identity,
        **kw,
    )
    mgr = Manager(Cluster(api), options)  # type: ignore[arg-type]
    mgr.add(Worker(identity, running))
    return mgr


async def holder(api: client.ApiClient, namespace: str) -> dict[str, Any]:
    return await KubeLeases(api).get(
        GroupVersionKind("coordination.k8s.io", "v1", "Lease"), "trainer-itest", namespace
    )


async def consistently(check: Any, duration: float, interval: float = 0.2) -> None:
    """A bounded negative check: ``check`` holds at every look for ``duration`` seconds. Used
    only where the property is about time itself (a lease kept across more than its duration)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + duration
    while loop.time() < end:
        assert check()
        await asyncio.sleep(interval)


async def test_only_the_leader_runs_and_the_other_takes_over_after_a_crash(
    kube: client.ApiClient, namespace: str
) -> None:
    running: set[str] = set()
    timing = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 1.0}
    a = manager(kube, namespace, "replica-a", running, **timing)
    b = manager(kube, namespace, "replica-b", running, **timing)
    task_a = asyncio.create_task(a.run())
    await asyncio.wait_for(a.elected.wait(), 15)
    task_b = asyncio.create_task(b.run())
    try:
        await contending(b, "replica-a")
        # b keeps trying; only a's renewals keep it out once a's first 3 s term has passed
        await consistently(lambda: running == {"replica-a"} and not b.elected.is_set(), 5)
        lease = await holder(kube, namespace)
        assert lease["spec"]["holderIdentity"] == "replica-a"
        assert lease["spec"]["leaseDurationSeconds"] == 3

        task_a.cancel()  # the leader dies without releasing its lease
        with contextlib.suppress(asyncio.CancelledError):
            await task_a
        await asyncio.wait_for(b.elected.wait(), 20)
        assert running == {"replica-b"}
        lease = await holder(kube, namespace)
        assert lease["spec"]["holderIdentity"] == "replica-b"
        assert lease["spec"]["leaseTransitions"] == 1
    finally:
        for mgr, task in ((a, task_a), (b, task_b)):
            mgr.stop()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 10)


async def test_a_released_lease_is_taken_over_without_waiting_for_expiry(
    kube: client.ApiClient, namespace: str
) -> None:
    running: set[str] = set()
    timing = {"lease_duration": 30.0, "renew_deadline": 10.0, "retry_period": 1.0}
    a = manager(kube, namespace, "replica-a", running, leader_election_release_on_cancel=True, **timing)
    b = manager(kube, namespace, "replica-b", running, **timing)
    task_a = asyncio.create_task(a.run())
    await asyncio.wait_for(a.elected.wait(), 15)
    task_b = asyncio.create_task(b.run())
    try:
        await contending(b, "replica-a")
        assert not b.elected.is_set()
        loop = asyncio.get_running_loop()
        stopped_at = loop.time()
        a.stop()
        await asyncio.wait_for(task_a, 10)
        assert (await holder(kube, namespace))["spec"]["holderIdentity"] == ""
        await asyncio.wait_for(b.elected.wait(), 15)
        assert loop.time() - stopped_at < 10, "took over long before the 30 s lease would expire"
        await eventually(lambda: running == {"replica-b"}, timeout=5)
    finally:
        b.stop()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task_b, 10)


class WatchingWorker(Worker):
    """A controller stand-in that watches a kind, as ``Controller.watched_kinds`` reports."""

    KIND = GroupVersionKind("", "v1", "Pod")

    def watched_kinds(self) -> list[GroupVersionKind]:
        return [self.KIND]


async def test_a_standby_is_ready_with_warm_informers_before_it_holds_the_lease(
    kube: client.ApiClient, namespace: str
) -> None:
    """docs/scale.md: a restart that must relist 100k Pods does it before taking the lease, so
    the standby is Ready (rolling updates proceed) and a failover needs no relist."""
    from manager.health.checks import run_check

    running: set[str] = set()
    timing = {"lease_duration": 30.0, "renew_deadline": 10.0, "retry_period": 1.0}
    a = manager(kube, namespace, "replica-a", running, **timing)
    b = manager(kube, namespace, "replica-b", set(), **timing)
    b.add(WatchingWorker("b-controller", running))
    task_a = asyncio.create_task(a.run())
    await asyncio.wait_for(a.elected.wait(), 15)
    task_b = asyncio.create_task(b.run())
    try:

        async def ready() -> bool:
            try:
                for checker in b.readiness.checks.values():
                    await run_check(checker, None)
            except Exception:
                return False
            return True

        await eventually(ready, timeout=15)
        assert not b.elected.is_set() and "b-controller" not in running
        cache = b.cluster.cache
        assert WatchingWorker.KIND in cache.informers  # type: ignore[attr-defined]
    finally:
        for mgr, task in ((a, task_a), (b, task_b)):
            mgr.stop()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 10)
