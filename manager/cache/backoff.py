"""Jittered exponential backoff for list/watch failures (client-go's reflector defaults).

800 ms doubling to 30 s, each wait stretched by up to 100 % jitter, reset after 2 minutes
without failure, so a flapping API server is not hammered and many informers spread out.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable


class ReflectorBackoff:
    def __init__(
        self,
        initial: float = 0.8,
        maximum: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        reset_after: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self.jitter = jitter
        self.reset_after = reset_after
        self._clock = clock
        self._rand = rand
        self._current = 0.0
        self._last_failure: float | None = None

    def next(self) -> float:
        """The next wait; grows on consecutive failures, restarts after a quiet period."""
        now = self._clock()
        if self._last_failure is None or now - self._last_failure > self.reset_after:
            self._current = self.initial
        else:
            self._current = min(self.maximum, self._current * self.factor)
        self._last_failure = now
        return self._current * (1 + self.jitter * self._rand())
