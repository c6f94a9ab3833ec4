"""A delaying queue that asks a rate limiter how long a failed item should wait."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

from manager.clock import Clock
from manager.workqueue.delaying import DelayingQueue
from manager.workqueue.metrics import QueueMetrics
from manager.workqueue.ratelimiter import RateLimiter, default_controller_rate_limiter

T = TypeVar("T", bound=Hashable)


class RateLimitingQueue(DelayingQueue[T]):
    def __init__(
        self,
        name: str = "",
        *,
        rate_limiter: RateLimiter[T] | None = None,
        metrics: QueueMetrics | None = None,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(name, metrics=metrics, clock=clock)
        self.rate_limiter: RateLimiter[T] = rate_limiter or default_controller_rate_limiter(self.clock)

    def add_rate_limited(self, item: T) -> None:
        """Retry ``item`` after the delay its failure count (and the shared bucket) allows."""
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """``item`` succeeded: its next failure starts the backoff from the beginning."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self.rate_limiter.num_requeues(item)
