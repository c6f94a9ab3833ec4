"""The JobSet and Pod reconcilers' steps that differ between JobSet releases (``JobSetLevel``)."""

from __future__ import annotations

from typing import Protocol

__all__ = ["ControllerSteps"]


class ControllerSteps(Protocol):
    """The JobSet release's own steps of the JobSet and Pod reconcilers
    (docs/behaviour/jobset.md; v0.12.0: docs/behaviour/jobset-v0.12.md §1)."""
