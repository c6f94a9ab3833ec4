"""JobSet v0.12.0's own steps of the JobSet and Pod reconcilers."""

from __future__ import annotations

__all__ = ["STEPS"]


class _Steps:
    """ControllerSteps of JobSet v0.12.0."""


STEPS = _Steps()
