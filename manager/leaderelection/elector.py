"""Leader election with client-go's algorithm, on a Lease.

* **Acquire**: every ``retry_period`` (jittered by up to 1.2x) try: get the Lease, create it if
  missing, take it over if its holder let it expire, else wait.
* **Expiry is judged locally**: a lease is valid until ``lease_duration_seconds`` after *this*
  replica last saw the record change (monotonic clock). The holder's ``renewTime`` is never
  compared with our clock, so clock skew between replicas does not matter.
* **Renew**: the leader rewrites the record every ``retry_period``; if it cannot within
  ``renew_deadline`` it has lost the lease and must stop working at once.
* **Release** (``release_on_cancel``): on shutdown write an empty holder with a 1 s duration so
  another replica takes over without waiting the full lease duration.
* A ``Conflict`` on a write means another candidate wrote first: we lost that race.
"""

from __future__ import annotations

import asyncio
import random
import socket
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

import structlog

from manager.client.errors import NotFound
from manager.clock import REAL_CLOCK, Clock
from manager.leaderelection.lease import LeaderElectionRecord, LeaseLock
from manager.metrics.leader import LEADER_STATUS

log = structlog.get_logger("manager.leaderelection")

T = TypeVar("T")

JITTER_FACTOR = 1.2
DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0


def new_identity() -> str:
    """``<hostname>_<uuid>``: unique per process even when pods share a hostname."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class LeaderElector:
    def __init__(
        self,
        lock: LeaseLock,
        *,
        lease_duration: float = DEFAULT_LEASE_DURATION,
        renew_deadline: float = DEFAULT_RENEW_DEADLINE,
        retry_period: float = DEFAULT_RETRY_PERIOD,
        release_on_cancel: bool = False,
        clock: Clock | None = None,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        rng: random.Random | None = None,
    ) -> None:
        if lease_duration <= renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError("renewDeadline must be greater than retryPeriod*JitterFactor")
        if retry_period < 1 or lease_duration < 1:
            raise ValueError("leaseDuration and retryPeriod must be at least 1s")
        self.lock = lock
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_cancel = release_on_cancel
        self.clock: Clock = clock or REAL_CLOCK
        self._wall = wall_clock
        self._rng = rng or random.Random()
        self._request_timeout = max(1.0, renew_deadline / 2)
        self._observed = LeaderElectionRecord()
        self._observed_raw: bytes | None = None
        self._observed_time = float("-inf")
        self._reported_leader = ""
        self.name = lock.name

    # -- state -----------------------------------------------------------------------------

    @property
    def identity(self) -> str:
        return self.lock.identity

    def is_leader(self) -> bool:
        return self._observed.holder_identity == self.identity

    def leader(self) -> str:
        """The holder this replica last observed (empty if none)."""
        return self._observed.holder_identity

    def _lease_valid(self, now: float) -> bool:
        return self._observed_time + self._observed.lease_duration_seconds > now

    def _set_observed(self, record: LeaderElectionRecord) -> None:
        self._observed = record
        self._observed_time = self.clock.now()

    # -- one attempt -----------------------------------------------------------------------

    async def try_acquire_or_renew(self) -> bool:
        """One attempt to take or keep the lease; ``True`` if we hold it afterwards."""
        wall = self._wall()
        desired = LeaderElectionRecord(
            holder_identity=self.identity,
            lease_duration_seconds=int(self.lease_duration),
            acquire_time=wall,
            renew_time=wall,
        )
        now = self.clock.now()
        # fast path: we are the leader and our view is fresh -- update without reading first
        if self.is_leader() and self._lease_valid(now):
            fast = LeaderElectionRecord(
                holder_identity=desired.holder_identity,
                lease_duration_seconds=desired.lease_duration_seconds,
                acquire_time=self._observed.acquire_time,
                renew_time=wall,
                leader_transitions=self._observed.leader_transitions,
            )
            try:
                await self._call(self.lock.update(fast))
            except Exception as err:
                log.info("failed to update lock optimistically, falling back to slow path", error=str(err))
            else:
                self._set_observed(fast)
                return True

        try:
            current, raw = await self._call(self.lock.get())
        except NotFound:
            try:
                await self._call(self.lock.create(desired))
            except Exception as err:
                log.error("error initially creating leader election record", error=str(err))
                return False
            self._set_observed(desired)
            return True
        except Exception as err:
            log.error("error retrieving resource lock", lock=self.lock.describe(), error=str(err))
            return False

        if raw != self._observed_raw:
            self._set_observed(current)
            self._observed_raw = raw
        if current.holder_identity and self._lease_valid(self.clock.now()) and not self.is_leader():
            log.debug(
                "lock is held by another holder and has not yet expired", holder=current.holder_identity
            )
            return False

        if self.is_leader():
            record = LeaderElectionRecord(
                holder_identity=self.identity,
                lease_duration_seconds=desired.lease_duration_seconds,
                acquire_time=current.acquire_time,
                renew_time=wall,
                leader_transitions=current.leader_transitions,
            )
        else:
            record = LeaderElectionRecord(
                holder_identity=self.identity,
                lease_duration_seconds=desired.lease_duration_seconds,
                acquire_time=wall,
                renew_time=wall,
                leader_transitions=current.leader_transitions + 1,
            )
        try:
            await self._call(self.lock.update(record))
        except Exception as err:  # Conflict: another candidate won the race
            log.info("failed to update lock", error=str(err))
            return False
        self._set_observed(record)
        return True

    async def _call(self, awaitable: Awaitable[T]) -> T:
        """Bound one lock request by renew_deadline/2 so a hung call cannot outlive the deadline."""
        async with asyncio.timeout(self._request_timeout):
            return await awaitable

    def _report_transition(self) -> None:
        holder = self._observed.holder_identity
        if holder != self._reported_leader:
            self._reported_leader = holder
            log.info("new leader elected", lock=self.lock.describe(), leader=holder)

    # -- loops -----------------------------------------------------------------------------

    async def acquire(self) -> None:
        """Return once this replica holds the lease (retrying every jittered retry period)."""
        log.info("attempting to acquire leader lease", lock=self.lock.describe(), identity=self.identity)
        while True:
            acquired = await self.try_acquire_or_renew()
            self._report_transition()
            if acquired:
                LEADER_STATUS.labels(self.name).set(1)
                log.info("successfully acquired lease", lock=self.lock.describe())
                return
            jittered = self.retry_period * (1 + self._rng.random() * JITTER_FACTOR)
            await self.clock.sleep(jittered)

    async def renew(self) -> None:
        """Keep the lease; return when it is lost. On cancellation release it if configured."""
        try:
            while True:
                if not await self._renew_within_deadline():
                    LEADER_STATUS.labels(self.name).set(0)
                    log.info("failed to renew lease", lock=self.lock.describe())
                    return
                self._report_transition()
                await self.clock.sleep(self.retry_period)
        except asyncio.CancelledError:
            if self.release_on_cancel:
                await asyncio.shield(self.release())
            raise

    async def _renew_within_deadline(self) -> bool:
        """Renew, retrying every retry period, all within ``renew_deadline``: an attempt still
        in flight at the deadline is cancelled (client-go runs the renew loop under a context
        with that timeout), so a leader whose lock requests hang learns it lost the lease
        before another replica may take it (the chaos run saw a leader notice 15 s late)."""
        deadline = self.clock.now() + self.renew_deadline
        while True:
            remaining = deadline - self.clock.now()
            if remaining <= 0:
                return False
            try:
                async with asyncio.timeout(remaining):
                    renewed = await self.try_acquire_or_renew()
            except TimeoutError:
                return False
            if renewed:
                return True
            if self.clock.now() + self.retry_period > deadline:
                return False
            await self.clock.sleep(self.retry_period)

    async def release(self) -> bool:
        """Give the lease up by writing an empty holder that expires in 1 s."""
        if not self.is_leader():
            return True
        wall = self._wall()
        record = LeaderElectionRecord(
            holder_identity="",
            lease_duration_seconds=1,
            acquire_time=wall,
            renew_time=wall,
            leader_transitions=self._observed.leader_transitions,
        )
        try:
            await self._call(self.lock.update(record))
        except Exception as err:
            log.error("failed to release lock", error=str(err))
            return False
        self._set_observed(record)
        LEADER_STATUS.labels(self.name).set(0)
        log.info("released leader lease", lock=self.lock.describe())
        return True

    def healthz_check(self, tolerance: float = 20.0) -> Callable[[object], None]:
        """A liveness checker failing when we think we lead but have not renewed for too long."""

        def check(_request: object) -> None:
            if self.is_leader() and self.clock.now() > self._observed_time + self.lease_duration + tolerance:
                raise RuntimeError("failed election to renew leadership on lease " + self.lock.describe())

        return check
