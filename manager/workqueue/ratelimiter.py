"""Rate limiters deciding how long a failing item waits before its next attempt.

The controller default is client-go's: the larger of a per-item exponential backoff
(5 ms * 2^failures, capped at 1000 s) and an overall token bucket (10 per second, burst 100)
shared by every item, so one bad key backs off on its own while a mass failure is spread out.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from manager.clock import REAL_CLOCK, Clock
from manager.tokenbucket import TokenBucket

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)


class RateLimiter(Protocol[T_contra]):
    def when(self, item: T_contra) -> float:
        """Seconds to wait before ``item`` is retried; counts one more failure."""
        ...

    def forget(self, item: T_contra) -> None:
        """``item`` succeeded: reset whatever this limiter remembers about it."""
        ...

    def num_requeues(self, item: T_contra) -> int: ...


class ItemExponentialFailureRateLimiter(Generic[T]):
    """``base * 2**n`` for the n-th consecutive failure of an item (n from 0), capped at ``max_delay``."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[T, int] = {}

    def when(self, item: T) -> float:
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        if exp >= 1024:  # 2.0**exp would overflow; the cap applies long before
            return self.max_delay
        backoff = self.base_delay * math.pow(2, exp)
        return min(backoff, self.max_delay)

    def forget(self, item: T) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        return self._failures.get(item, 0)


class ItemFastSlowRateLimiter(Generic[T]):
    """``fast`` for the first ``max_fast_attempts`` failures of an item, ``slow`` afterwards."""

    def __init__(self, fast_delay: float, slow_delay: float, max_fast_attempts: int) -> None:
        self.fast_delay = fast_delay
        self.slow_delay = slow_delay
        self.max_fast_attempts = max_fast_attempts
        self._failures: dict[T, int] = {}

    def when(self, item: T) -> float:
        count = self._failures.get(item, 0) + 1
        self._failures[item] = count
        return self.fast_delay if count <= self.max_fast_attempts else self.slow_delay

    def forget(self, item: T) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter(Generic[T]):
    """A token bucket over all items (golang.org/x/time/rate reservation semantics).

    The bucket starts full with ``burst`` tokens and refills at ``qps`` per second. Every
    ``when`` reserves one token even if it must wait for it, so the tokens can go negative and
    the n-th caller past the burst waits ``n / qps`` seconds. Per-item state: none.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, *, clock: Clock | None = None) -> None:
        if qps <= 0:
            raise ValueError("qps must be positive")
        self.qps = qps
        self.burst = burst
        self.clock: Clock = clock or REAL_CLOCK
        self._bucket = TokenBucket(qps, burst, self.clock.now)

    def when(self, item: T) -> float:
        return self._bucket.reserve()

    def forget(self, item: T) -> None:
        pass

    def num_requeues(self, item: T) -> int:
        return 0


class MaxOfRateLimiter(Generic[T]):
    """The longest delay any of the limiters asks for; every limiter sees every call."""

    def __init__(self, *limiters: RateLimiter[T]) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, item: T) -> float:
        return max(limiter.when(item) for limiter in self.limiters)

    def forget(self, item: T) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_controller_rate_limiter(clock: Clock | None = None) -> MaxOfRateLimiter[Hashable]:
    """client-go's ``DefaultTypedControllerRateLimiter``: max(5 ms*2^n -> 1000 s, 10 qps burst 100)."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(10.0, 100, clock=clock),
    )
