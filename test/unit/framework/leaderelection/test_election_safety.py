"""Safety of leader election, as a hypothesis state machine: however attempts, releases,
API failures and the passage of time interleave among three candidates, at most one of them is
*leading* at any moment (all candidates share one clock rate, as real replicas do).

A candidate leads from a successful acquire/renew until its renew loop would give up: one retry
period plus the renew deadline after that success (then ``renew()`` returns and the manager
exits), or until it released the lease. Others only take over a lease duration (15 s) after they
saw its last change, which is what keeps the two windows apart."""

from __future__ import annotations

import asyncio
import os
import random

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from manager.client.errors import Conflict
from manager.leaderelection import LeaderElector, LeaseLock
from manager.testing.clock import FakeClock
from manager.testing.leases import FakeLeases

CANDIDATES = ("a", "b", "c")
EXAMPLES = int(os.environ.get("ELECTION_EXAMPLES", "300"))  # 3000 passes too; slower


class Election(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.leases = FakeLeases("ns", "lease")
        self.electors = {
            c: LeaderElector(
                LeaseLock(self.leases, "ns", "lease", c),
                clock=self.clock,
                rng=random.Random(0),
                release_on_cancel=True,
            )
            for c in CANDIDATES
        }
        self.last_success: dict[str, float] = {}

    def teardown(self) -> None:
        self.loop.close()

    @rule(candidate=st.sampled_from(CANDIDATES))
    def attempt(self, candidate: str) -> None:
        won = self.loop.run_until_complete(self.electors[candidate].try_acquire_or_renew())
        if won:
            self.last_success[candidate] = self.clock.now()
            assert self.leases.spec()["holderIdentity"] == candidate

    @rule(candidate=st.sampled_from(CANDIDATES))
    def release(self, candidate: str) -> None:
        if self.loop.run_until_complete(self.electors[candidate].release()):
            self.last_success.pop(candidate, None)

    @rule(seconds=st.sampled_from([0.5, 1.0, 2.0, 5.0, 10.0, 16.0]))
    def advance(self, seconds: float) -> None:
        self.clock.advance_nowait(seconds)

    @rule(failure=st.sampled_from(["conflict", "down"]))
    def api_trouble(self, failure: str) -> None:
        if failure == "conflict":
            self.leases.fail_updates.append(Conflict("the object has been modified"))
        else:
            self.leases.down = not self.leases.down

    def leading(self) -> list[str]:
        now = self.clock.now()
        return [
            c
            for c, e in self.electors.items()
            if c in self.last_success and now < self.last_success[c] + e.retry_period + e.renew_deadline
        ]

    @invariant()
    def at_most_one_leader(self) -> None:
        leaders = self.leading()
        assert len(leaders) <= 1, f"two leaders at once: {leaders}"

    @invariant()
    def transitions_never_decrease(self) -> None:
        transitions = [w["spec"].get("leaseTransitions", 0) for w in self.leases.writes]
        assert transitions == sorted(transitions)


TestElection = Election.TestCase
TestElection.settings = settings(max_examples=EXAMPLES, stateful_step_count=40, deadline=None)
