"""JobSet v0.12.0 (level v2.3)."""

from __future__ import annotations

from trainer import features
from trainer.jobset.levels import JobSetLevel
from trainer.jobset.levels import v0_12_admission as admission
from trainer.jobset.levels import v0_12_controller as controller

__all__ = ["V0_12"]

V0_12 = JobSetLevel(
    version="v0.12.0",
    controller=controller.STEPS,
    admission=admission.STEPS,
    feature_gates=frozenset({features.InPlaceRestart, features.RestartJob, features.ElasticJobSet}),
)
