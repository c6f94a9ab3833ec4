"""The JobSet and Pod webhooks' steps that differ between JobSet releases (``JobSetLevel``)."""

from __future__ import annotations

from typing import Protocol

__all__ = ["AdmissionSteps"]


class AdmissionSteps(Protocol):
    """The JobSet release's own steps of the JobSet and Pod webhooks
    (docs/behaviour/jobset.md; v0.12.0: docs/behaviour/jobset-v0.12.md §2)."""
