"""JobSet v0.10.1 (level v2.1)."""

from __future__ import annotations

from trainer.jobset.levels import JobSetLevel
from trainer.jobset.levels import v0_10_admission as admission
from trainer.jobset.levels import v0_10_controller as controller

__all__ = ["V0_10"]

V0_10 = JobSetLevel(version="v0.10.1", controller=controller.STEPS, admission=admission.STEPS)
