"""What the manager runs: anything with ``start(started)`` that runs until cancelled.

A runnable sets ``started`` once it is ready (the cache after its initial sync, a server once it
listens). ``needs_leader_election`` (default True, as in controller-runtime) decides whether it
waits for this replica to become leader.
"""

from __future__ import annotations

import asyncio
from typing import Protocol, runtime_checkable


@runtime_checkable
class Runnable(Protocol):
    async def start(self, started: asyncio.Event) -> None:
        """Run until cancelled; set ``started`` when ready. Raising stops the manager."""
        ...


def needs_leader_election(runnable: object) -> bool:
    return bool(getattr(runnable, "needs_leader_election", True))
