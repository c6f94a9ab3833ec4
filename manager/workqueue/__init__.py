"""Work queues with client-go's semantics, and the rate limiters controllers use for retries."""

from manager.workqueue.delaying import DelayingQueue
from manager.workqueue.metrics import NoopQueueMetrics, QueueMetrics
from manager.workqueue.queue import Queue, ShutDownError
from manager.workqueue.ratelimiter import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)
from manager.workqueue.ratelimiting import RateLimitingQueue

__all__ = [
    "BucketRateLimiter",
    "DelayingQueue",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "NoopQueueMetrics",
    "Queue",
    "QueueMetrics",
    "RateLimiter",
    "RateLimitingQueue",
    "ShutDownError",
    "default_controller_rate_limiter",
]
