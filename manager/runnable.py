"""What the manager runs: anything with ``start(started)`` that runs until cancelled.

A runnable sets ``started`` once it is ready (the cache after its initial sync, a server once it
listens). Which group of the manager it joins is said by the Protocols it satisfies, not guessed:

- ``GroupedRunnable``: names its group (``manager_group = "webhooks"``, ...);
- ``WebhookServerRunnable``: the webhook-server shape (``register`` + ``started_checker``);
- ``LeaderElectionRunnable``: says whether it waits for leadership (``needs_leader_election``,
  True when absent, as in controller-runtime).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from manager.webhook.admission import Handler


@runtime_checkable
class Runnable(Protocol):
    async def start(self, started: asyncio.Event) -> None:
        """Run until cancelled; set ``started`` when ready. Raising stops the manager."""
        ...


@runtime_checkable
class GroupedRunnable(Runnable, Protocol):
    """A runnable that names its manager group (a ``manager.manager.Group`` value)."""

    manager_group: str


@runtime_checkable
class WebhookServerRunnable(Runnable, Protocol):
    """A webhook server: handlers are registered by path; readiness is its ``started_checker``."""

    def register(self, path: str, handler: Handler) -> None: ...

    def started_checker(self) -> Callable[..., object]: ...


@runtime_checkable
class LeaderElectionRunnable(Runnable, Protocol):
    """A runnable that says whether it may only run on the elected leader."""

    @property
    def needs_leader_election(self) -> bool: ...


def needs_leader_election(runnable: object) -> bool:
    """``runnable.needs_leader_election`` when it declares it, else True (controllers lead)."""
    if isinstance(runnable, LeaderElectionRunnable):
        return bool(runnable.needs_leader_election)
    return True
