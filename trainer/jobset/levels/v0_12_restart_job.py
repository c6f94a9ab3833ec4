"""JobSet v0.12.0's ``RestartJob`` feature gate: the failure-policy actions that recreate only the
failed Job (docs/behaviour/jobset-v0.12.md §1.9; upstream ``pkg/controllers/failure_policy.go``
and ``getChildJobs``/``labelAndAnnotateObject`` of ``jobset_controller.go``).

Each Job's own restart count lives in the JobSet's status, per replicated job and job index:
``replicatedJobsStatus[].jobRestarts`` (every RestartJob or RestartJobAndIgnoreMaxRestarts of
that Job) and ``jobRestartsCountTowardsMax`` (RestartJob's only). A Job carries the count it was
created at in the label and annotation ``jobset.sigs.k8s.io/job-restart-attempt``; a Job whose
label is below its count is of an earlier attempt of its own, deleted and then created again,
while the JobSet's other Jobs run on.

Pure functions over the JobSet and Job dicts; the steps of ``v0_12_controller`` call them while
the gate is on.
"""

from __future__ import annotations

import logging

from manager.meta.object import Json as Object
from manager.meta.object import labels_of, name_of
from manager.meta.strconv import atoi
from trainer.api import jobset_constants as c
from trainer.api.v2_3 import jobset_constants as c23
from trainer.jobset.levels.controller import FailurePolicyError, JobRestart

__all__ = [
    "JobRestartError",
    "job_restart_keys",
    "job_restarts",
    "job_restarts_count_towards_max",
    "previous_job_attempt",
    "record_job_restart",
    "replicated_job_status_fields",
    "total_restarts_count_towards_max",
]
log = logging.getLogger(__name__)

JOB_RESTARTS = "jobRestarts"
JOB_RESTARTS_COUNT_TOWARDS_MAX = "jobRestartsCountTowardsMax"
_ACTIONS = {
    c23.RestartJob: (c23.RestartJobActionReason, c23.RestartJobActionMessage, True),
    c23.RestartJobAndIgnoreMaxRestarts: (
        c23.RestartJobAndIgnoreMaxRestartsActionReason,
        c23.RestartJobAndIgnoreMaxRestartsActionMessage,
        False,
    ),
}


class JobRestartError(FailurePolicyError):
    """A Job whose labels the RestartJob bookkeeping cannot read: the reconcile fails with it."""


# -- the counts in the status --------------------------------------------------------------------


def _replicas(js: Object, rjob_name: str) -> int:
    """The replicated job's ``replicas`` (0 when the spec has no such replicated job)."""
    for rjob in (js.get("spec") or {}).get("replicatedJobs") or []:
        if rjob.get("name") == rjob_name:
            replicas = rjob.get("replicas")
            return 1 if replicas is None else int(replicas)
    return 0


def _per_job(js: Object, rjob_name: str, key: str) -> list[int]:
    """``getJobRestarts``/``getJobRestartsCountTowardsMax``: the replicated job's list, a copy;
    zeros, one per replica, when it has none yet."""
    for entry in (js.get("status") or {}).get("replicatedJobsStatus") or []:
        if entry.get("name") == rjob_name:
            values = entry.get(key) or []
            if values:
                return [int(v) for v in values]
            break
    return [0] * _replicas(js, rjob_name)


def _set_per_job(js: Object, rjob_name: str, key: str, values: list[int]) -> None:
    """Only an existing entry is set (the pass computed one per replicated job before)."""
    for entry in (js.get("status") or {}).get("replicatedJobsStatus") or []:
        if entry.get("name") == rjob_name:
            entry[key] = values
            return


def job_restarts(js: Object, rjob_name: str) -> list[int]:
    return _per_job(js, rjob_name, JOB_RESTARTS)


def job_restarts_count_towards_max(js: Object, rjob_name: str) -> list[int]:
    return _per_job(js, rjob_name, JOB_RESTARTS_COUNT_TOWARDS_MAX)


def total_restarts_count_towards_max(js: Object) -> int:
    """The JobSet's restarts that count towards ``maxRestarts``: its own (RestartJobSet) plus
    every Job's (RestartJob)."""
    status = js.get("status") or {}
    total = int(status.get("restartsCountTowardsMax") or 0)
    for entry in status.get("replicatedJobsStatus") or []:
        total += sum(int(v) for v in entry.get(JOB_RESTARTS_COUNT_TOWARDS_MAX) or [])
    return total


def replicated_job_status_fields(js: Object, rjob_name: str) -> Object:
    """The per-Job counts a recomputed ``replicatedJobsStatus`` entry keeps from the current one
    (they change only in the failure policy); empty lists are omitted, as Go writes them."""
    for entry in (js.get("status") or {}).get("replicatedJobsStatus") or []:
        if entry.get("name") == rjob_name:
            return {
                key: list(entry[key])
                for key in (JOB_RESTARTS, JOB_RESTARTS_COUNT_TOWARDS_MAX)
                if entry.get(key)
            }
    return {}


# -- the Jobs ------------------------------------------------------------------------------------


def _label(job: Object, key: str) -> str:
    labels = labels_of(job)
    if key not in labels:
        raise JobRestartError(f"missing label {key}")
    return str(labels[key])


def previous_job_attempt(js: Object, job: Object) -> bool:
    """Whether a Job of the JobSet's current restart is of an earlier attempt of its own (its
    ``job-restart-attempt`` below the count of its index). A Job without that label (made
    before the gate was on) counts as current, as upstream (which logs it)."""
    rjob_name = _label(job, c.ReplicatedJobNameKey)
    index_text = _label(job, c.JobIndexKey)
    try:
        index = atoi(index_text)
    except ValueError as err:
        raise JobRestartError(str(err)) from None
    labels = labels_of(job)
    if c23.JobRestartAttemptKey not in labels:
        log.error("missing label %s", c23.JobRestartAttemptKey, extra={"job": name_of(job)})
        return False
    try:
        attempt = atoi(str(labels[c23.JobRestartAttemptKey]))
    except ValueError as err:
        raise JobRestartError(str(err)) from None
    targets = job_restarts(js, rjob_name)
    # upstream indexes the list with a negative index too (a panic); it is out of bounds here
    if not 0 <= index < len(targets):
        raise JobRestartError(f"job index {index} is out of bounds for replicated job {rjob_name}")
    return attempt < targets[index]


def job_restart_keys(js: Object, rjob_name: str, job_index: int) -> dict[str, str]:
    """The ``job-restart-attempt`` label (and annotation) of a Job being created: its index's
    count. Upstream panics on an index the count list does not have; that fails the pass here."""
    counts = job_restarts(js, rjob_name)
    if not 0 <= job_index < len(counts):
        raise JobRestartError(f"job index {job_index} is out of bounds for replicated job {rjob_name}")
    return {c23.JobRestartAttemptKey: str(counts[job_index])}


def record_job_restart(js: Object, failed_job: Object, action: str) -> JobRestart | None:
    """Apply a RestartJob or RestartJobAndIgnoreMaxRestarts action to ``failed_job``.

    RestartJob at ``maxRestarts`` (counting the JobSet's and every Job's restarts) restarts
    nothing: None, and the JobSet fails with ``ReachedMaxRestarts``. Otherwise the Job's counts
    go up by one (RestartJobAndIgnoreMaxRestarts: ``jobRestarts`` only) and the Warning to queue
    is returned; no condition changes (a RestartJob is not a JobSet restart)."""
    reason, base_message, counts_towards_max = _ACTIONS[action]
    job_name = name_of(failed_job)
    if counts_towards_max:
        max_restarts = int(((js.get("spec") or {}).get("failurePolicy") or {}).get("maxRestarts") or 0)
        if total_restarts_count_towards_max(js) >= max_restarts:
            return None
    labels = labels_of(failed_job)
    for key in (c.ReplicatedJobNameKey, c.JobIndexKey):
        if key not in labels:
            raise JobRestartError(f"failed job {job_name} missing {key} label")
    rjob_name, index_text = str(labels[c.ReplicatedJobNameKey]), str(labels[c.JobIndexKey])
    try:
        index = atoi(index_text)
    except ValueError as err:
        raise JobRestartError(
            f"failed job {job_name} has invalid {c.JobIndexKey} label: {index_text}: {err}"
        ) from None
    restarts = job_restarts(js, rjob_name)
    if not 0 <= index < len(restarts):
        raise JobRestartError(
            f"failed job {job_name} has index {index} out of bounds for replicated job {rjob_name} "
            f"(replicas: {len(restarts)})"
        )
    restarts[index] += 1
    _set_per_job(js, rjob_name, JOB_RESTARTS, restarts)
    if counts_towards_max:
        towards = job_restarts_count_towards_max(js, rjob_name)
        if not 0 <= index < len(towards):
            raise JobRestartError(  # upstream prints the other list's length here
                f"failed job {job_name} has index {index} out of bounds for replicated job {rjob_name} "
                f"(replicas: {len(restarts)})"
            )
        towards[index] += 1
        _set_per_job(js, rjob_name, JOB_RESTARTS_COUNT_TOWARDS_MAX, towards)
    return JobRestart(reason, f"{base_message} (first failed job: {job_name})")
