"""Rate limiters against client-go's numbers."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from manager.testing.clock import FakeClock
from manager.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimitingQueue,
    default_controller_rate_limiter,
)


@given(failures=st.integers(min_value=1, max_value=60))
def test_exponential_doubles_from_5ms_and_caps_at_1000s(failures: int) -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    delays = [limiter.when("x") for _ in range(failures)]
    assert delays == [min(0.005 * 2**n, 1000.0) for n in range(failures)]
    assert limiter.num_requeues("x") == failures


def test_exponential_sequence_matches_client_go() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    delays = [limiter.when("x") for _ in range(20)]
    assert delays[:9] == [0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28]
    assert round(delays[17], 3) == 655.36  # 18th failure
    assert delays[18] == 1000.0 and delays[19] == 1000.0  # capped from the 19th failure on


@given(st.lists(st.sampled_from("abc"), min_size=1, max_size=40))
def test_exponential_is_per_item_and_forget_resets(items: list[str]) -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    counts: dict[str, int] = {}
    for item in items:
        assert limiter.when(item) == min(0.005 * 2 ** counts.get(item, 0), 1000.0)
        counts[item] = counts.get(item, 0) + 1
    for item in counts:
        limiter.forget(item)
        assert limiter.num_requeues(item) == 0
        assert limiter.when(item) == 0.005


def test_bucket_allows_burst_then_10_per_second() -> None:
    clock = FakeClock()
    bucket: BucketRateLimiter[str] = BucketRateLimiter(10, 100, clock=clock)
    assert [bucket.when(str(i)) for i in range(100)] == [0.0] * 100
    waits = [bucket.when(str(i)) for i in range(5)]
    assert [round(w, 9) for w in waits] == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert bucket.num_requeues("0") == 0


@given(elapsed=st.floats(min_value=0, max_value=20), extra=st.integers(min_value=1, max_value=50))
def test_bucket_refills_at_qps_up_to_burst(elapsed: float, extra: int) -> None:
    clock = FakeClock()
    bucket: BucketRateLimiter[str] = BucketRateLimiter(10, 100, clock=clock)
    for _ in range(100):
        bucket.when("x")
    clock.advance_nowait(elapsed)
    refilled = min(100.0, elapsed * 10)
    waits = [bucket.when("x") for _ in range(extra)]
    for n, wait in enumerate(waits, start=1):
        expected = max(0.0, (n - refilled) / 10)
        assert abs(wait - expected) < 1e-6


def test_fast_slow() -> None:
    limiter: ItemFastSlowRateLimiter[str] = ItemFastSlowRateLimiter(0.1, 5.0, 3)
    assert [limiter.when("x") for _ in range(5)] == [0.1, 0.1, 0.1, 5.0, 5.0]
    assert limiter.num_requeues("x") == 5
    limiter.forget("x")
    assert limiter.when("x") == 0.1


@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0, 100)), min_size=1, max_size=10))
def test_max_of_takes_the_longest_delay(pairs: list[tuple[float, float]]) -> None:
    class Fixed:
        def __init__(self, delays: list[float]) -> None:
            self.delays = iter(delays)
            self.forgotten: list[str] = []

        def when(self, item: str) -> float:
            return next(self.delays)

        def forget(self, item: str) -> None:
            self.forgotten.append(item)

        def num_requeues(self, item: str) -> int:
            return 0

    first, second = Fixed([p[0] for p in pairs]), Fixed([p[1] for p in pairs])
    limiter = MaxOfRateLimiter(first, second)
    assert [limiter.when("x") for _ in pairs] == [max(p) for p in pairs]
    limiter.forget("x")
    assert first.forgotten == ["x"] and second.forgotten == ["x"]


def test_default_limiter_is_max_of_exponential_and_bucket() -> None:
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock)
    # one key failing: pure exponential while the bucket has tokens
    assert [limiter.when("hot") for _ in range(4)] == [0.005, 0.01, 0.02, 0.04]
    # a flood of distinct keys: the bucket spreads the 97+ that exceed the burst at 10/s
    flood = [limiter.when(f"k{i}") for i in range(100)]
    assert flood[:96] == [0.005] * 96
    assert [round(d, 6) for d in flood[96:]] == [0.1, 0.2, 0.3, 0.4]


async def test_rate_limited_queue_delays_by_the_limiter() -> None:
    clock = FakeClock()
    queue: RateLimitingQueue[str] = RateLimitingQueue("q", clock=clock)
    queue.add_rate_limited("x")
    queue.add_rate_limited("x")  # 5 ms then 10 ms: the earlier ready time wins
    assert queue.num_requeues("x") == 2
    assert len(queue) == 0
    await clock.advance(0.004)
    assert len(queue) == 0
    await clock.advance(0.001)
    assert len(queue) == 1
    queue.forget("x")
    assert queue.num_requeues("x") == 0
