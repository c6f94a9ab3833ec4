"""JobSet status: replicatedJobsStatus (docs/behaviour/jobset.md §2.4) and the condition rules (§2.13).

Pure functions over dicts. ``ReconcileOpts`` is the per-reconcile accumulator upstream calls
``statusUpdateOpts``: whether the status must be written, and the events to emit once it is.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass, field

from manager.meta.object import Json as Object
from manager.meta.object import labels_of, name_of
from manager.meta.times import format_time
from trainer.api import jobset_constants as c
from trainer.controllers.jobset.jobs import ChildJobs, replicated_jobs
from trainer.jobset.conditions import ConditionOpts, EventType, RestartEnd
from trainer.jobset.levels.controller import ControllerSteps
from trainer.jobset.levels.v0_10_controller import STEPS as V0_10_STEPS

__all__ = ["ConditionOpts", "Event", "EventType", "ReconcileOpts", "RestartEnd"]
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Event:
    """An event queued during a reconcile, emitted only after the status write succeeds."""

    type: EventType
    reason: str
    message: str


@dataclass
class ReconcileOpts:
    should_update: bool = False
    events: list[Event] = field(default_factory=list)
    #: the JobSet release's steps, for the conditions and policies this pass applies
    steps: ControllerSteps = V0_10_STEPS


# -- replicatedJobsStatus (2.4) ---------------------------------------------------------------------


def _pods_count(job: Object) -> int:
    spec = job.get("spec") or {}
    parallelism = spec.get("parallelism")
    count = 1 if parallelism is None else int(parallelism)  # PORT NOTE: Go dereferences it blindly
    completions = spec.get("completions")
    if completions is not None and int(completions) < count:
        count = int(completions)
    return count


def replicated_jobs_statuses(
    js: Object, owned: ChildJobs, steps: ControllerSteps = V0_10_STEPS
) -> list[Object]:
    """One entry per rjob of the spec, counting current-attempt Jobs only, in spec order; each
    keeps the fields the release carries over (``replicated_job_status_fields``)."""
    statuses: dict[str, Object] = {}
    for rjob in replicated_jobs(js):
        name = str(rjob.get("name") or "")
        statuses[name] = {
            "name": name,
            "ready": 0,
            "succeeded": 0,
            "failed": 0,
            "active": 0,
            "suspended": 0,
            **steps.replicated_job_status_fields(js, name),
        }

    def entry(job: Object) -> Object | None:
        rjob_name = labels_of(job).get(c.ReplicatedJobNameKey)
        if not rjob_name:
            log.error("job %s is missing the %s label", name_of(job), c.ReplicatedJobNameKey)
            return None
        # PORT NOTE: Go panics on a Job naming an rjob the spec does not have; we skip it.
        return statuses.get(rjob_name)

    for job in owned.active:
        counts = entry(job)
        if counts is None:
            continue
        status = job.get("status") or {}
        if int(status.get("succeeded") or 0) + int(status.get("ready") or 0) >= _pods_count(job):
            counts["ready"] += 1
        if int(status.get("active") or 0) > 0:
            counts["active"] += 1
        if (job.get("spec") or {}).get("suspend") is True:
            counts["suspended"] += 1
    for jobs, key in ((owned.successful, "succeeded"), (owned.failed, "failed")):
        for job in jobs:
            counts = entry(job)
            if counts is not None:
                counts[key] += 1
    return list(statuses.values())


def sorted_statuses(statuses: list[Object] | None) -> list[Object]:
    """Upstream stores and compares the list sorted by name, descending."""
    return sorted(statuses or [], key=lambda s: str(s.get("name") or ""), reverse=True)


def statuses_equal(old: list[Object] | None, new: list[Object] | None) -> bool:
    return sorted_statuses(old) == sorted_statuses(new)


# -- conditions (2.13) -------------------------------------------------------------------------------

_STARTUP_PAIR = {c.JobSetStartupPolicyInProgress, c.JobSetStartupPolicyCompleted}


def update_condition(
    js: Object, cond: ConditionOpts | None, now: datetime.datetime, steps: ControllerSteps = V0_10_STEPS
) -> bool:
    """Apply upstream's updateCondition to ``js.status.conditions``; True if anything changed."""
    if cond is None:
        return False
    status = js.setdefault("status", {})
    conditions: list[Object] = list(status.get("conditions") or [])
    new = {
        "type": cond.type,
        "status": cond.status,
        "reason": cond.reason,
        "message": cond.message,
        "lastTransitionTime": format_time(now),
    }
    found = changed = False
    for i, current in enumerate(conditions):
        if current.get("type") == cond.type:
            found = True
            if current.get("status") != cond.status:
                conditions[i] = dict(new)
                changed = True
            elif (replaced := steps.same_status_condition(current, new)) is not None:
                conditions[i] = replaced
                changed = True
        elif (
            {current.get("type"), cond.type} == _STARTUP_PAIR
            and current.get("status") == "True"
            and cond.status == "True"
        ):
            conditions[i] = {**current, "status": "False"}
            changed = True
    if not found and cond.status == "True":
        conditions.append(new)
        changed = True
    if changed:
        status["conditions"] = conditions
    return changed


def set_condition(
    js: Object, cond: ConditionOpts | None, opts: ReconcileOpts, now: datetime.datetime
) -> None:
    """Update the condition; on a change, mark the status for writing and queue its event."""
    if cond is not None and update_condition(js, cond, now, opts.steps):
        opts.should_update = True
        opts.events.append(Event(cond.event_type, cond.reason, cond.message))


def find_first_finished_condition(js: Object) -> Object | None:
    """The first Completed or Failed condition with status True, in list order."""
    for cond in (js.get("status") or {}).get("conditions") or []:
        if cond.get("type") in (c.JobSetCompleted, c.JobSetFailed) and cond.get("status") == "True":
            result: Object = cond
            return result
    return None


def jobset_finished(js: Object) -> bool:
    return find_first_finished_condition(js) is not None


def msg_with_job(base: str, job_name: str) -> str:
    return f"{base} (first failed job: {job_name})"


def set_restart_ended(js: Object, end: RestartEnd, opts: ReconcileOpts, now: datetime.datetime) -> None:
    """Say on the JobSet that a restart is over, where the release has a condition for it."""
    set_condition(js, opts.steps.restart_end_condition(end), opts, now)


# The conditions of the table in 2.13, as constructors.


def completed_condition() -> ConditionOpts:
    return ConditionOpts(
        c.JobSetCompleted, "True", c.AllJobsCompletedReason, c.AllJobsCompletedMessage, "Normal"
    )


def failed_condition(reason: str, message: str) -> ConditionOpts:
    return ConditionOpts(c.JobSetFailed, "True", reason, message, "Warning")


def suspended_condition() -> ConditionOpts:
    return ConditionOpts(
        c.JobSetSuspended, "True", c.JobSetSuspendedReason, c.JobSetSuspendedMessage, "Normal"
    )


def resumed_condition() -> ConditionOpts:
    return ConditionOpts(c.JobSetSuspended, "False", c.JobSetResumedReason, c.JobSetResumedMessage, "Normal")


def in_order_in_progress_condition() -> ConditionOpts:
    return ConditionOpts(
        c.JobSetStartupPolicyInProgress,
        "True",
        c.InOrderStartupPolicyInProgressReason,
        c.InOrderStartupPolicyInProgressMessage,
        "Normal",
    )


def in_order_completed_condition() -> ConditionOpts:
    return ConditionOpts(
        c.JobSetStartupPolicyCompleted,
        "True",
        c.InOrderStartupPolicyCompletedReason,
        c.InOrderStartupPolicyCompletedMessage,
        "Normal",
    )
