"""JobSet v0.12.0's own steps of the JobSet and Pod webhooks."""

from __future__ import annotations

__all__ = ["STEPS"]


class _Steps:
    """AdmissionSteps of JobSet v0.12.0."""


STEPS = _Steps()
