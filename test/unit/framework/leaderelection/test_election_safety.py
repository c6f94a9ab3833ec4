"""Safety of leader election, as a hypothesis state machine: however attempts, releases and the
passage of time interleave among three candidates, at most one of them believes it holds a
valid lease at any moment (all candidates share one clock rate, as real replicas do)."""

from __future__ import annotations

import asyncio
import random

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from manager.leaderelection import LeaderElector, LeaseLock
from manager.testing.clock import FakeClock
from manager.testing.leases import FakeLeases

CANDIDATES = ("a", "b", "c")


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
        self.ever_led: set[str] = set()

    def teardown(self) -> None:
        self.loop.close()

    @rule(candidate=st.sampled_from(CANDIDATES))
    def attempt(self, candidate: str) -> None:
        won = self.loop.run_until_complete(self.electors[candidate].try_acquire_or_renew())
        if won:
            self.ever_led.add(candidate)
            assert self.leases.spec()["holderIdentity"] == candidate

    @rule(candidate=st.sampled_from(CANDIDATES))
    def release(self, candidate: str) -> None:
        self.loop.run_until_complete(self.electors[candidate].release())

    @rule(seconds=st.sampled_from([0.5, 1.0, 2.0, 5.0, 10.0, 16.0]))
    def advance(self, seconds: float) -> None:
        self.clock.advance_nowait(seconds)

    @rule(failure=st.sampled_from(["conflict", "down"]))
    def api_trouble(self, failure: str) -> None:
        from manager.client.errors import Conflict

        if failure == "conflict":
            self.leases.fail_updates.append(Conflict("the object has been modified"))
        else:
            self.leases.down = not self.leases.down

    @invariant()
    def at_most_one_valid_leader(self) -> None:
        now = self.clock.now()
        leaders = [c for c, e in self.electors.items() if e.is_leader() and e._lease_valid(now)]
        assert len(leaders) <= 1, f"two leaders at once: {leaders}"

    @invariant()
    def transitions_never_decrease(self) -> None:
        transitions = [w["spec"].get("leaseTransitions", 0) for w in self.leases.writes]
        assert transitions == sorted(transitions)


TestElection = Election.TestCase
TestElection.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
