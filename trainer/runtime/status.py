"""Whether a TrainJob's run is over (docs/behaviour/trainer.md §2.10.4).

The condition rule itself (``meta.SetStatusCondition``) is ``manager.meta.conditions``: the
status plugin copies JobSet terminal conditions onto the TrainJob with it, and the reconciler
uses the same rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer.api import trainer_constants as tc

__all__ = ["is_finished"]


def is_finished(status: Mapping[str, Any] | None) -> bool:
    """A TrainJob status with ``Complete=True`` or ``Failed=True``: its run is over for good.

    Finished TrainJobs are never re-applied (a JobSet deleted by hand or by its TTL is not
    recreated); upstream v2.1.0 recreates it (docs/divergences.md, "Finished stays finished").
    """
    for condition in (status or {}).get("conditions") or ():
        if (
            condition.get("type") in (tc.TrainJobComplete, tc.TrainJobFailed)
            and condition.get("status") == "True"
        ):
            return True
    return False
