"""What a work queue reports, as a Protocol, so the queue does not depend on Prometheus.

``manager.metrics.workqueue`` implements it with client-go's metric names; the default is a
no-op so a bare queue (tests, tools) costs nothing.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol


class QueueMetrics(Protocol):
    def add(self, item: Hashable) -> None:
        """An item became dirty (it will be handed out, now or after its current pass)."""
        ...

    def get(self, item: Hashable) -> None:
        """An item was handed to a worker."""
        ...

    def done(self, item: Hashable) -> None:
        """A worker finished an item."""
        ...

    def retry(self) -> None:
        """``add_after`` was called (client-go counts every delayed add as a retry)."""
        ...


class NoopQueueMetrics:
    def add(self, item: Hashable) -> None:
        pass

    def get(self, item: Hashable) -> None:
        pass

    def done(self, item: Hashable) -> None:
        pass

    def retry(self) -> None:
        pass
