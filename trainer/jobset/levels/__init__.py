"""What the JobSet controllers and webhooks take from an API level (docs/levels.md).

Level v2.1 runs JobSet v0.10.1, level v2.3 JobSet v0.12.0. The code both share stays where it
is (``trainer/controllers/jobset``, ``webhooks/jobset.py``, ``webhooks/pod.py``); what differs
between the two releases is a step of one of two Protocols, each with one module per release:

* ``controller.ControllerSteps``: the JobSet and Pod reconcilers' steps
  (``v0_10_controller.py``, ``v0_12_controller.py``);
* ``admission.AdmissionSteps``: the JobSet and Pod webhooks' steps
  (``v0_10_admission.py``, ``v0_12_admission.py``).

``trainer.levels`` names the value of each API level (``ApiLevel.jobset``) and the entry point
hands it to the components through the ``SetupContext``; nothing compares release names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainer.jobset.levels.admission import AdmissionSteps
from trainer.jobset.levels.controller import ControllerSteps

__all__ = ["AdmissionSteps", "ControllerSteps", "JobSetLevel"]


@dataclass(frozen=True)
class JobSetLevel:
    """One JobSet release, as the manager runs it."""

    version: str
    """The JobSet release whose behaviour this is, e.g. ``v0.12.0``."""
    controller: ControllerSteps
    """The reconcilers' steps that differ between releases."""
    admission: AdmissionSteps
    """The webhooks' steps that differ between releases."""
    feature_gates: frozenset[str] = field(default_factory=frozenset)
    """The feature gates this release defines (``trainer.features``, component ``jobset``): the
    only JobSet gates a manager at this level takes; its steps read them."""
