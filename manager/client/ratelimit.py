"""Client-side token bucket (QPS/burst), client-go's ``flowcontrol`` limiter for asyncio.

Off by default (API Priority and Fairness protects the server); turned on when the config
sets ``qps``, which upstream ignores and this port honours.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class TokenBucket:
    """``qps`` tokens per second, at most ``burst`` saved up; ``acquire`` waits for one."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("qps must be > 0 and burst >= 1")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
        self._last = now

    def try_acquire(self) -> bool:
        self._refill()
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False

    async def acquire(self) -> None:
        # The lock keeps waiters first-come-first-served.
        async with self._lock:
            while not self.try_acquire():  # noqa: ASYNC110 - the wait is computed, not signalled
                await asyncio.sleep((1 - self._tokens) / self.qps)
