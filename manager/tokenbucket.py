"""A token bucket: ``rate`` tokens a second, at most ``burst`` saved up, full at the start.

The one refill rule behind every rate limit of the framework and the product, each using the
bucket its own way: the work queue's overall limiter reserves (golang.org/x/time/rate: a token
is taken even before it is there, and the caller waits for it), the client's QPS limit and the
status server's per-TrainJob limit take a free token or are told how long until one is.
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["TokenBucket"]


class TokenBucket:
    """``now`` is a monotonic clock in seconds; a clock that steps back refills nothing."""

    __slots__ = ("_last", "_now", "burst", "rate", "tokens")

    def __init__(self, rate: float, burst: int, now: Callable[[], float]) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = float(burst)
        self._now = now
        self._last: float | None = None

    def _refill(self) -> None:
        now = self._now()
        last = now if self._last is None or now < self._last else self._last
        self.tokens = min(float(self.burst), self.tokens + (now - last) * self.rate)
        self._last = now

    def take(self) -> float:
        """0.0 and one token taken if one is free; else nothing taken and the seconds until
        one is (infinite at rate 0)."""
        self._refill()
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate if self.rate > 0 else math.inf

    def reserve(self) -> float:
        """Take a token now even if it is not there yet (the count goes below zero); returns
        the seconds the caller must wait before using it."""
        self._refill()
        self.tokens -= 1.0
        return -self.tokens / self.rate if self.tokens < 0 else 0.0
