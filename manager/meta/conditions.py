"""``metav1.Condition`` lists inside a status dict: apimachinery's ``meta`` condition helpers.

``set_status_condition`` is ``meta.SetStatusCondition``: append when new; on a status flip also
move ``lastTransitionTime`` (to the given one, else now); always overwrite reason, message and
observedGeneration.
"""

from __future__ import annotations

from collections.abc import Callable

from manager.meta import times
from manager.meta.object import Json

__all__ = ["find_condition", "is_status_true", "remove_condition", "set_status_condition"]


def find_condition(status: Json | None, condition_type: str) -> Json | None:
    """A copy of the condition of ``condition_type`` in ``status["conditions"]`` (None if absent)."""
    for condition in (status or {}).get("conditions") or ():
        if condition.get("type") == condition_type:
            return dict(condition)
    return None


def is_status_true(status: Json | None, condition_type: str) -> bool:
    condition = find_condition(status, condition_type)
    return condition is not None and condition.get("status") == "True"


def remove_condition(status: Json, condition_type: str) -> None:
    """Drop the condition; an emptied list is removed with its key (as Go omits it)."""
    conditions = status.get("conditions")
    if not conditions:
        return
    kept = [c for c in conditions if c.get("type") != condition_type]
    if kept:
        status["conditions"] = kept
    else:
        status.pop("conditions")


def set_status_condition(
    status: Json, condition_type: str, source: Json, now: Callable[[], str] = times.now
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
