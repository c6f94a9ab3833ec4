"""Policy decisions: failure (docs/behaviour/jobset.md §2.6), success (§2.7), startup and dependsOn gating
(§2.11), TTL (§2.5).

Pure functions: they read the JobSet and its Jobs, and mutate only the in-memory JobSet status
through ``status.set_condition`` and the counters, exactly where upstream does.
"""

from __future__ import annotations

import datetime
import logging
import re

from manager.meta.conditions import find_condition
from manager.meta.object import Json as Object
from manager.meta.object import labels_of, name_of
from manager.meta.object import meta_of as meta
from manager.meta.times import parse_time
from trainer.api import jobset_constants as c
from trainer.controllers.jobset.jobs import ChildJobs, replicas_of, replicated_jobs, spec_of
from trainer.controllers.jobset.metrics import JobSetMetrics
from trainer.controllers.jobset.status import (
    Event,
    ReconcileOpts,
    RestartEnd,
    completed_condition,
    failed_condition,
    find_first_finished_condition,
    msg_with_job,
    set_condition,
    set_restart_ended,
)
from trainer.jobset.levels.controller import FailurePolicyError

log = logging.getLogger(__name__)
_ZERO_TIME = datetime.datetime.min.replace(tzinfo=datetime.UTC)


PolicyError = FailurePolicyError
"""An error a policy step returns to the reconcile (retried with backoff)."""


# -- terminal conditions ------------------------------------------------------------------------------


def set_jobset_failed(
    js: Object, reason: str, message: str, opts: ReconcileOpts, now: datetime.datetime, metrics: JobSetMetrics
) -> None:
    """Failed condition, terminalState and the counter: all on every call, as upstream (2.6 step 5)."""
    set_condition(js, failed_condition(reason, message), opts, now)
    set_restart_ended(js, RestartEnd.FAILED, opts, now)
    js.setdefault("status", {})["terminalState"] = c.TerminalStateFailed
    metrics.jobset_failed(name_of(js), str(meta(js).get("namespace") or ""))


def set_jobset_completed(
    js: Object, opts: ReconcileOpts, now: datetime.datetime, metrics: JobSetMetrics
) -> None:
    set_condition(js, completed_condition(), opts, now)
    set_restart_ended(js, RestartEnd.COMPLETED, opts, now)
    js.setdefault("status", {})["terminalState"] = c.TerminalStateCompleted
    metrics.jobset_completed(name_of(js), str(meta(js).get("namespace") or ""))


# -- failure policy (2.6) -------------------------------------------------------------------------------


def find_job_failure_condition(job: Object) -> Object | None:
    """The first ``Failed=True`` condition of a Job: its reason, message and failure time."""
    cond = find_condition(job.get("status"), "Failed")
    return cond if cond is not None and cond.get("status") == "True" else None


def _failure_time(job: Object) -> datetime.datetime | None:
    cond = find_job_failure_condition(job)
    if cond is None:
        return None
    return parse_time(cond.get("lastTransitionTime")) or _ZERO_TIME


def _earliest_failed(jobs: list[Object]) -> Object | None:
    """Strictly earliest failure time wins; ties keep list order. Jobs not failed are ignored."""
    best: Object | None = None
    best_time: datetime.datetime | None = None
    for job in jobs:
        when = _failure_time(job)
        if when is None:
            continue
        if best_time is None or when < best_time:
            best, best_time = job, when
    return best


def find_first_failed_job(failed_jobs: list[Object]) -> Object | None:
    return _earliest_failed(failed_jobs)


def _pattern_matches(pattern: str, message: str) -> bool:
    """Unanchored search. PORT NOTE: Python ``re`` stands in for RE2; an invalid pattern never matches."""
    try:
        return re.search(pattern, message) is not None
    except re.error as err:
        log.error("invalid onJobFailureMessagePatterns entry %r: %s", pattern, err)
        return False


def rule_is_applicable(rule: Object, failed_job: Object, reason: str, message: str) -> bool:
    reasons = rule.get("onJobFailureReasons") or []
    if reasons and reason not in reasons:
        return False
    patterns = rule.get("onJobFailureMessagePatterns") or []
    if patterns and not any(_pattern_matches(p, message) for p in patterns):
        return False
    rjob_name = labels_of(failed_job).get(c.ReplicatedJobNameKey)
    if not rjob_name:
        return False
    targets = rule.get("targetReplicatedJobs") or []
    return not targets or rjob_name in targets


def find_first_failed_policy_rule_and_job(
    rules: list[Object], failed_jobs: list[Object]
) -> tuple[Object | None, Object | None]:
    """The first rule matching any failed Job, with its earliest-failed matching Job."""
    for rule in rules:
        matching = []
        for job in failed_jobs:
            cond = find_job_failure_condition(job)
            if cond is None:
                continue
            if rule_is_applicable(rule, job, str(cond.get("reason") or ""), str(cond.get("message") or "")):
                matching.append(job)
        first = _earliest_failed(matching)
        if first is not None:
            return rule, first
    return None, None


def apply_failure_policy_rule_action(
    js: Object,
    failed_job: Object,
    action: str,
    opts: ReconcileOpts,
    now: datetime.datetime,
    metrics: JobSetMetrics,
    rule: Object | None = None,
) -> None:
    """``rule``: the failure-policy rule whose action this is (None: the default action)."""
    job_name = name_of(failed_job)
    js.setdefault("status", {})
    if action == c.FailJobSet:
        set_jobset_failed(
            js,
            c.FailJobSetActionReason,
            msg_with_job(c.FailJobSetActionMessage, job_name),
            opts,
            now,
            metrics,
        )
    elif action == c.RestartJobSet:
        max_restarts = int((spec_of(js).get("failurePolicy") or {}).get("maxRestarts") or 0)
        if opts.steps.restarts_count_towards_max(js) >= max_restarts:
            set_jobset_failed(
                js,
                c.ReachedMaxRestartsReason,
                msg_with_job(c.ReachedMaxRestartsMessage, job_name),
                opts,
                now,
                metrics,
            )
            return
        restart_all(
            js,
            Event(
                "Warning", c.RestartJobSetActionReason, msg_with_job(c.RestartJobSetActionMessage, job_name)
            ),
            rule,
            opts,
            now,
            counts_towards_max=True,
        )
    elif action == c.RestartJobSetAndIgnoreMaxRestarts:
        restart_all(
            js,
            Event(
                "Warning",
                c.RestartJobSetAndIgnoreMaxRestartsActionReason,
                msg_with_job(c.RestartJobSetAndIgnoreMaxRestartsActionMessage, job_name),
            ),
            rule,
            opts,
            now,
            counts_towards_max=False,
        )
    else:
        restart_job(js, failed_job, action, opts, now, metrics)


def restart_job(
    js: Object,
    failed_job: Object,
    action: str,
    opts: ReconcileOpts,
    now: datetime.datetime,
    metrics: JobSetMetrics,
) -> None:
    """Any other action is the release's (v0.12.0's RestartJob gate: recreate the failed Job
    only); a release without it fails the pass with ``failed to find a corresponding action``.
    The restart is in the status; at ``maxRestarts`` the JobSet fails instead."""
    restarted = opts.steps.restart_job(js, failed_job, action)
    if restarted is None:
        set_jobset_failed(
            js,
            c.ReachedMaxRestartsReason,
            msg_with_job(c.ReachedMaxRestartsMessage, name_of(failed_job)),
            opts,
            now,
            metrics,
        )
        return
    opts.should_update = True
    opts.events.append(Event("Warning", restarted.reason, restarted.message))


def restart_all(
    js: Object,
    event: Event,
    rule: Object | None,
    opts: ReconcileOpts,
    now: datetime.datetime,
    *,
    counts_towards_max: bool,
) -> None:
    """Upstream's failurePolicyRecreateAll: the next pass sees every Job as of an earlier
    attempt and recreates it. The release's restart condition (with the event's message) is
    set before the restart's own event is queued, in that order."""
    status = js.setdefault("status", {})
    status["restarts"] = int(status.get("restarts") or 0) + 1
    if counts_towards_max:
        status["restartsCountTowardsMax"] = int(status.get("restartsCountTowardsMax") or 0) + 1
    opts.should_update = True
    set_condition(js, opts.steps.restart_condition(rule, event.message), opts, now)
    opts.events.append(event)


def execute_failure_policy(
    js: Object, owned: ChildJobs, opts: ReconcileOpts, now: datetime.datetime, metrics: JobSetMetrics
) -> None:
    policy = spec_of(js).get("failurePolicy")
    if policy is None:
        first = find_first_failed_job(owned.failed)
        job_name = name_of(first) if first is not None else ""
        set_jobset_failed(
            js, c.FailedJobsReason, msg_with_job(c.FailedJobsMessage, job_name), opts, now, metrics
        )
        return
    rule, job = find_first_failed_policy_rule_and_job(list(policy.get("rules") or []), owned.failed)
    action = str(rule.get("action")) if rule is not None else c.RestartJobSet
    if job is None:
        job = find_first_failed_job(owned.failed) or {}
    apply_failure_policy_rule_action(js, job, action, opts, now, metrics, rule)


# -- success policy (2.7) -------------------------------------------------------------------------------


def _success_policy(js: Object) -> Object:
    """Port note (docs/behaviour/jobset.md §2.15): a nil successPolicy (Go would panic) counts as
    ``{operator: All}``."""
    policy: Object = spec_of(js).get("successPolicy") or {"operator": c.OperatorAll}
    return policy


def job_matches_success_policy(policy: Object, job: Object) -> bool:
    targets = policy.get("targetReplicatedJobs") or []
    return not targets or labels_of(job).get(c.ReplicatedJobNameKey) in targets


def replicated_job_matches_success_policy(policy: Object, rjob: Object) -> bool:
    targets = policy.get("targetReplicatedJobs") or []
    return not targets or rjob.get("name") in targets


def num_jobs_matching_success_policy(policy: Object, jobs: list[Object]) -> int:
    return sum(1 for job in jobs if job_matches_success_policy(policy, job))


def num_jobs_expected_to_succeed(js: Object) -> int:
    policy = _success_policy(js)
    operator = policy.get("operator")
    if operator == c.OperatorAny:
        return 1
    if operator == c.OperatorAll:
        return sum(
            replicas_of(r) for r in replicated_jobs(js) if replicated_job_matches_success_policy(policy, r)
        )
    return 0


def execute_success_policy(
    js: Object, owned: ChildJobs, opts: ReconcileOpts, now: datetime.datetime, metrics: JobSetMetrics
) -> bool:
    """Set Completed and return True when enough matching Jobs succeeded."""
    if num_jobs_matching_success_policy(
        _success_policy(js), owned.successful
    ) >= num_jobs_expected_to_succeed(js):
        set_jobset_completed(js, opts, now, metrics)
        return True
    return False


# -- startup policy and dependsOn (2.11) --------------------------------------------------------------


def in_order_startup_policy(startup_policy: Object | None) -> bool:
    return startup_policy is not None and startup_policy.get("startupPolicyOrder") == c.InOrder


def all_replicas_started(replicas: int, status: Object) -> bool:
    """Every Job of the rjob is ready, failed or succeeded (exact equality, as upstream)."""
    return replicas == int(status.get("ready") or 0) + int(status.get("failed") or 0) + int(
        status.get("succeeded") or 0
    )


def depends_on_satisfied(
    rjob: Object, replicas_so_far: dict[str, int], statuses: list[Object] | None
) -> bool:
    """Every ``dependsOn`` entry reached its status, counted with exact equality."""
    by_name = {str(s.get("name")): s for s in statuses or []}
    for dep in rjob.get("dependsOn") or []:
        status = by_name.get(str(dep.get("name")))
        if status is None:
            return False
        expected = replicas_so_far.get(str(dep.get("name")), 0)
        if dep.get("status") == c.DependencyComplete:
            reached = int(status.get("succeeded") or 0)
        else:
            reached = (
                int(status.get("ready") or 0)
                + int(status.get("failed") or 0)
                + int(status.get("succeeded") or 0)
            )
        if reached != expected:
            return False
    return True


# -- TTL after finished (2.5) -----------------------------------------------------------------------------


class TTLError(Exception):
    """The finish time of a finished JobSet cannot be determined."""


def _key(js: Object) -> str:
    return f"{meta(js).get('namespace') or ''}/{name_of(js)}"


def finish_and_expire_time(js: Object) -> tuple[datetime.datetime, datetime.datetime]:
    cond = find_first_finished_condition(js)
    if cond is None:
        raise TTLError(f"unable to find the status of the finished JobSet {_key(js)}")
    finished = parse_time(cond.get("lastTransitionTime"))
    if finished is None or finished == _ZERO_TIME:
        raise TTLError(f"unable to find the time when the JobSet {_key(js)} finished")
    ttl = int(spec_of(js).get("ttlSecondsAfterFinished") or 0)
    return finished, finished + datetime.timedelta(seconds=ttl)


def time_left(js: Object, since: datetime.datetime | None) -> datetime.timedelta:
    """Time until the TTL expires, measured from ``since``."""
    _finished, expire_at = finish_and_expire_time(js)
    if since is None:
        raise TTLError("calculated invalid expiration time, jobset cleanup will be deferred")
    return expire_at - since


def check_if_ttl_expired(js: Object, now: datetime.datetime) -> bool:
    spec = spec_of(js)
    if spec.get("ttlSecondsAfterFinished") is None or meta(js).get("deletionTimestamp"):
        return False
    return time_left(js, now) <= datetime.timedelta(0)


def requeue_jobset_after(js: Object, now: datetime.datetime) -> datetime.timedelta:
    if spec_of(js).get("ttlSecondsAfterFinished") is None:
        return datetime.timedelta(0)
    return time_left(js, now)
