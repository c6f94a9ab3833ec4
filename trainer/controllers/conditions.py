"""TrainJob condition steps shared by the reconciler (docs/behaviour/trainer.md §3.2 steps 3 and 5).

Why a module of pure functions: the Suspended/Resumed rule and the removal of ``Failed`` decide
what users see in ``kubectl get trainjob`` (the ``State`` column is the last condition), so they
are tested on literal status dicts, apart from any client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainer.api import trainer_constants as tc
from trainer.runtime.status import now_rfc3339, set_status_condition

Json = dict[str, Any]

__all__ = ["find_condition", "remove_failed_condition", "set_failed_unsupported", "set_suspended_condition"]


def find_condition(status: Json, condition_type: str) -> Json | None:
    for condition in status.get("conditions") or ():
        if condition.get("type") == condition_type:
            return dict(condition)
    return None


def remove_failed_condition(status: Json) -> None:
    """An external change may take the TrainJob out of Failed; the status step re-adds it if not."""
    conditions = status.get("conditions")
    if not conditions:
        return
    kept = [c for c in conditions if c.get("type") != tc.TrainJobFailed]
    if kept:
        status["conditions"] = kept
    else:
        status.pop("conditions")


def set_suspended_condition(trainjob: Json, status: Json, now: Callable[[], str] = now_rfc3339) -> None:
    """``Suspended=True`` while suspended; ``Suspended=False/Resumed`` once after a suspension.

    A TrainJob that was never suspended never gets the condition.
    """
    if (trainjob.get("spec") or {}).get("suspend") is True:
        set_status_condition(
            status,
            tc.TrainJobSuspended,
            {"status": "True", "reason": tc.TrainJobSuspendedReason, "message": tc.TrainJobSuspendedMessage},
            now,
        )
        return
    current = find_condition(status, tc.TrainJobSuspended)
    if current is not None and current.get("status") == "True":
        set_status_condition(
            status,
            tc.TrainJobSuspended,
            {"status": "False", "reason": tc.TrainJobResumedReason, "message": tc.TrainJobResumedMessage},
            now,
        )


def set_failed_unsupported(
    status: Json, message: str, previous: Json | None = None, now: Callable[[], str] = now_rfc3339
) -> None:
    """``Failed=True/TrainingRuntimeNotSupported`` for a runtimeRef no runtime serves.

    ``previous`` is the Failed condition before step 3 removed it: when it was already True its
    transition time is kept, so retries of a TrainJob that stays unsupported write nothing.
    """
    since = (previous or {}).get("lastTransitionTime") if (previous or {}).get("status") == "True" else None
    set_status_condition(
        status,
        tc.TrainJobFailed,
        {
            "status": "True",
            "reason": tc.TrainJobRuntimeNotSupportedReason,
            "message": message,
            "lastTransitionTime": since or "",
        },
        now,
    )
