"""One TrainJob state from its conditions and its JobSet's counters (beyond v2.1; kubeflow/trainer#2713,
#3666).

Why: upstream's ``State`` printer column is the type of the *last* condition, so a resumed
TrainJob (``Suspended=False/Resumed``) still reads ``Suspended`` and a running one reads nothing.
The state here looks at what the conditions *say*:

* ``Failed``    -- ``Failed=True``
* ``Complete``  -- ``Complete=True``
* ``Suspended`` -- ``spec.suspend`` is true (or ``Suspended=True`` is still on the status)
* ``Running``   -- not suspended and one of the JobSet's replicated jobs (``status.jobsStatus``,
  mirrored from the JobSet) has ready or succeeded Jobs: its pods run, or a step already ran
* ``Pending``   -- anything else: no JobSet yet, or its pods wait for resources

No new condition is added (a v2.1 client sees the conditions it knows); the lifecycle metrics use
this function, and with the ``TrainJobState`` gate the controller writes it to ``status.state``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer.api import trainer_constants as tc

PENDING = "Pending"
SUSPENDED = "Suspended"
RUNNING = "Running"
COMPLETE = "Complete"
FAILED = "Failed"
STATES = (PENDING, SUSPENDED, RUNNING, COMPLETE, FAILED)

__all__ = ["COMPLETE", "FAILED", "PENDING", "RUNNING", "STATES", "SUSPENDED", "derive_state"]


def _true(conditions: list[Mapping[str, Any]], condition_type: str) -> bool:
    return any(c.get("type") == condition_type and c.get("status") == "True" for c in conditions)


def derive_state(trainjob: Mapping[str, Any]) -> str:
    """The state ``kubectl get trainjob`` should show for ``trainjob`` (a dict)."""
    status = trainjob.get("status") or {}
    conditions = list(status.get("conditions") or ())
    if _true(conditions, tc.TrainJobFailed):
        return FAILED
    if _true(conditions, tc.TrainJobComplete):
        return COMPLETE
    if (trainjob.get("spec") or {}).get("suspend") is True or _true(conditions, tc.TrainJobSuspended):
        return SUSPENDED
    for job in status.get("jobsStatus") or ():
        if (job.get("ready") or 0) > 0 or (job.get("succeeded") or 0) > 0:
            return RUNNING
    return PENDING
