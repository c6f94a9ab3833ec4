"""``meta.SetStatusCondition`` on a status dict (docs/behaviour/trainer.md §2.10.4).

Why here: the status plugin copies JobSet terminal conditions onto the TrainJob with the exact
Kubernetes rule (append when new; on a status flip also move lastTransitionTime; always
overwrite reason, message and observedGeneration), and the reconciler uses the same rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from trainer.api import trainer_constants as tc

Json = dict[str, Any]

__all__ = ["is_finished", "now_rfc3339", "set_status_condition"]


def now_rfc3339() -> str:
    """metav1.Time's wire form: second precision, UTC, ``Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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


def set_status_condition(
    status: Json, condition_type: str, source: Mapping[str, Any], now: Callable[[], str] = now_rfc3339
) -> None:
    """Set condition ``condition_type`` in ``status["conditions"]`` from ``source``'s fields."""
    conditions: list[Json] = status.setdefault("conditions", [])
    new: Json = {
        "type": condition_type,
        "status": source.get("status", ""),
        "reason": source.get("reason", ""),
        "message": source.get("message", ""),
        "lastTransitionTime": source.get("lastTransitionTime") or "",
    }
    if source.get("observedGeneration"):
        new["observedGeneration"] = source["observedGeneration"]
    for existing in conditions:
        if existing.get("type") != condition_type:
            continue
        if existing.get("status") != new["status"]:
            existing["status"] = new["status"]
            existing["lastTransitionTime"] = new["lastTransitionTime"] or now()
        existing["reason"] = new["reason"]
        existing["message"] = new["message"]
        if "observedGeneration" in new:
            existing["observedGeneration"] = new["observedGeneration"]
        else:
            existing.pop("observedGeneration", None)
        return
    if not new["lastTransitionTime"]:
        new["lastTransitionTime"] = now()
    conditions.append(new)
