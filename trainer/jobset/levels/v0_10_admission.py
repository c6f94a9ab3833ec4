"""JobSet v0.10.1's own steps of the JobSet and Pod webhooks."""

from __future__ import annotations

__all__ = ["STEPS"]


class _Steps:
    """AdmissionSteps of JobSet v0.10.1."""


STEPS = _Steps()
