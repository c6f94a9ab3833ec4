"""The JobSet conditions the controller sets (docs/behaviour/jobset.md §2.13), as values.

Shared by the reconciler (``trainer/controllers/jobset/status.py`` applies them) and the
release steps (``trainer/jobset/levels``), which name the conditions only one release sets.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

__all__ = ["ConditionOpts", "EventType", "RestartEnd"]

EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True)
class ConditionOpts:
    """A condition the controller sets, with the type of the event that announces it."""

    type: str
    status: Literal["True", "False"]
    reason: str
    message: str
    event_type: EventType


class RestartEnd(enum.Enum):
    """Why a JobSet restart is over: the points where JobSet v0.12.0 sets ``RestartingJobSet``
    False (jobset-v0.12.md §1.1)."""

    JOBS_READY = "jobs ready"
    COMPLETED = "completed"
    FAILED = "failed"
    SUSPENDED = "suspended"
