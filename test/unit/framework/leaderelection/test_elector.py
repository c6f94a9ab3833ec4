"""Leader election against an in-memory Lease store with optimistic concurrency, on a fake clock."""

from __future__ import annotations

import asyncio
import contextlib
import random
from datetime import UTC, datetime
from typing import Any

import pytest

from manager.client.errors import Conflict
from manager.leaderelection import LeaderElector, LeaseLock, new_identity
from manager.metrics import REGISTRY
from manager.testing.clock import FakeClock
from manager.testing.leases import FakeLeases

NS, NAME = "kubeflow-system", "trainer-leader"


def make_leases() -> Any:
    return FakeLeases(NS, NAME)


def elector(leases: Any, clock: FakeClock, identity: str, **kw: Any) -> LeaderElector:
    lock = LeaseLock(leases, NS, NAME, identity)
    return LeaderElector(lock, clock=clock, rng=random.Random(7), **kw)


def status() -> float | None:
    return REGISTRY.get_sample_value("leader_election_master_status", {"name": NAME})


@contextlib.asynccontextmanager
async def task_of(coro: Any) -> Any:
    task = asyncio.create_task(coro)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_acquires_a_missing_lease_and_renews_it() -> None:
    leases, clock = make_leases(), FakeClock()
    le = elector(leases, clock, "me")
    async with task_of(le.acquire()) as acquiring:
        await clock.advance(0)
        assert acquiring.done()
    spec = leases.spec()
    assert spec["holderIdentity"] == "me"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert status() == 1.0
    first_renew = spec["renewTime"]
    async with task_of(le.renew()) as renewing:
        for _ in range(10):
            await clock.advance(2)
        assert not renewing.done(), "still the leader"
        assert leases.spec()["holderIdentity"] == "me"
        assert leases.spec()["renewTime"] >= first_renew
        assert leases.spec()["acquireTime"] == spec["acquireTime"], "renewals keep the acquire time"
        assert leases.rv >= 10, "renewed every retry period"


async def test_a_valid_lease_of_another_holder_blocks_until_it_expires() -> None:
    leases, clock = make_leases(), FakeClock()
    # the other holder's renewTime is far in the past by *our* wall clock: skew must not matter
    leases.write_spec(
        holderIdentity="other",
        leaseDurationSeconds=15,
        leaseTransitions=3,
        renewTime="2001-01-01T00:00:00.000000Z",
    )
    le = elector(leases, clock, "me")
    async with task_of(le.acquire()) as acquiring:
        await clock.advance(14)
        assert not acquiring.done(), "valid for 15 s from when we first saw it"
        leases.write_spec(renewTime="2001-01-01T00:00:14.000000Z")  # the holder renews
        await clock.advance(14)
        assert not acquiring.done(), "a renewal restarts the expiry"
        await clock.advance(6)  # > 15 s after the last change we observed (+ jittered retry)
        assert acquiring.done()
    spec = leases.spec()
    assert spec["holderIdentity"] == "me"
    assert spec["leaseTransitions"] == 4, "a takeover counts a transition"
    assert le.is_leader()


async def test_conflict_on_takeover_means_another_candidate_won() -> None:
    leases, clock = make_leases(), FakeClock()
    leases.write_spec(holderIdentity="", leaseDurationSeconds=1)  # released lease
    leases.fail_updates.append(Conflict("the object has been modified"))
    le = elector(leases, clock, "me")
    assert await le.try_acquire_or_renew() is False
    assert not le.is_leader()
    assert leases.spec()["holderIdentity"] == ""
    assert await le.try_acquire_or_renew() is True, "the next round tries again"


async def test_release_on_cancel_writes_an_empty_holder() -> None:
    leases, clock = make_leases(), FakeClock()
    le = elector(leases, clock, "me", release_on_cancel=True)
    await le.acquire()
    renewing = asyncio.create_task(le.renew())
    await clock.advance(4)
    renewing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await renewing
    spec = leases.spec()
    assert spec["holderIdentity"] == ""
    assert spec["leaseDurationSeconds"] == 1
    assert spec["leaseTransitions"] == 0
    assert status() == 0.0


async def test_without_release_on_cancel_the_lease_is_left_to_expire() -> None:
    leases, clock = make_leases(), FakeClock()
    le = elector(leases, clock, "me")
    await le.acquire()
    async with task_of(le.renew()):
        await clock.advance(2)
    assert leases.spec()["holderIdentity"] == "me"


async def test_renew_fails_after_the_deadline_and_reports_loss() -> None:
    leases, clock = make_leases(), FakeClock()
    le = elector(leases, clock, "me")
    await le.acquire()
    async with task_of(le.renew()) as renewing:
        await clock.advance(2)
        leases.down = True
        await clock.advance(9)
        assert not renewing.done(), "keeps retrying within the 10 s renew deadline"
        await clock.advance(4)
        assert renewing.done(), "renew() returns: leadership lost"
    assert status() == 0.0


async def test_two_candidates_one_leader_and_failover() -> None:
    leases, clock = make_leases(), FakeClock()
    a, b = elector(leases, clock, "a"), elector(leases, clock, "b")
    await a.acquire()
    a_renew = asyncio.create_task(a.renew())
    async with task_of(b.acquire()) as b_acquiring:
        await clock.advance(30)
        assert not b_acquiring.done(), "b waits while a renews"
        a_renew.cancel()  # a dies without releasing
        with contextlib.suppress(asyncio.CancelledError):
            await a_renew
        await clock.advance(14)
        assert not b_acquiring.done()
        await clock.advance(6)
        assert b_acquiring.done(), "b takes over once a's lease expired"
    assert leases.spec()["holderIdentity"] == "b"
    assert leases.spec()["leaseTransitions"] == 1


def test_identity_and_validation() -> None:
    identity = new_identity()
    host, _, uid = identity.rpartition("_")
    assert host and len(uid) == 36
    lock = LeaseLock(make_leases(), NS, NAME, "me")
    with pytest.raises(ValueError, match="leaseDuration must be greater than renewDeadline"):
        LeaderElector(lock, lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match="renewDeadline must be greater than retryPeriod"):
        LeaderElector(lock, lease_duration=15, renew_deadline=2.4, retry_period=2)


async def test_record_times_are_micro_time() -> None:
    leases, clock = make_leases(), FakeClock()
    fixed = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    le = LeaderElector(LeaseLock(leases, NS, NAME, "me"), clock=clock, wall_clock=lambda: fixed)
    await le.acquire()
    assert leases.spec()["acquireTime"] == "2026-01-02T03:04:05.678901Z"
    assert leases.spec()["renewTime"] == "2026-01-02T03:04:05.678901Z"


async def test_lease_labels_are_set_on_create_and_kept_on_update() -> None:
    leases, clock = make_leases(), FakeClock()
    lock = LeaseLock(leases, NS, NAME, "me", labels={"app.kubernetes.io/name": "trainer"})
    le = LeaderElector(lock, clock=clock)
    await le.acquire()
    await clock.advance(0)
    assert await le.try_acquire_or_renew()
    assert leases.leases[(NS, NAME)]["metadata"]["labels"] == {"app.kubernetes.io/name": "trainer"}
    assert [w["apiVersion"] for w in leases.writes][:1] == ["coordination.k8s.io/v1"]
    assert leases.writes[0]["kind"] == "Lease"


async def test_renewal_gives_up_at_renew_deadline_even_mid_request() -> None:
    """An attempt still in flight at renewDeadline is cancelled (client-go's context timeout):
    with hanging lock updates the leader learns of its loss at the deadline, not one or two
    request timeouts later -- after another replica may already lead (found by the chaos run)."""
    leases = make_leases()
    le = LeaderElector(
        LeaseLock(leases, NS, NAME, "me"), lease_duration=4.0, renew_deadline=1.5, retry_period=1.0
    )
    assert await le.try_acquire_or_renew()

    async def hang(*_: Any, **__: Any) -> Any:
        await asyncio.sleep(30)

    leases.update = hang
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert await le._renew_within_deadline() is False
    # one attempt alone (optimistic update, then get + update, each up to 1 s) outlasts 1.5 s
    assert loop.time() - start < 1.8
