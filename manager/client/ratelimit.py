"""Client-side QPS limit (client-go's ``flowcontrol`` token-bucket limiter) for asyncio.

Off by default (API Priority and Fairness protects the server); turned on when the config
sets ``qps``, which upstream ignores and this port honours.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from manager.tokenbucket import TokenBucket

__all__ = ["QPSLimiter"]


class QPSLimiter:
    """``qps`` requests per second, at most ``burst`` at once; ``acquire`` waits for a turn."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("qps must be > 0 and burst >= 1")
        self.qps = qps
        self.burst = burst
        self._bucket = TokenBucket(qps, burst, clock)
        self._lock = asyncio.Lock()

    def try_acquire(self) -> bool:
        return self._bucket.take() == 0.0

    async def acquire(self) -> None:
        # The lock keeps waiters first-come-first-served.
        async with self._lock:
            while (wait := self._bucket.take()) > 0:  # noqa: ASYNC110 - the wait is computed, not signalled
                await asyncio.sleep(wait)
