"""Condition rules and replicatedJobsStatus (jobset.md 6.C, 6.D, 2.13)."""

from __future__ import annotations

from typing import Any

from jsfixtures import NOW, job, jobset, rjob, ts

from trainer.controllers.jobset import status as S
from trainer.controllers.jobset.jobs import ChildJobs

Object = dict[str, Any]
T = ts(NOW)


def test_nil_condition_changes_nothing() -> None:  # spec: jobset 6.C.1
    js = jobset()
    assert S.update_condition(js, None, NOW) is False
    assert "conditions" not in js.get("status", {})


def test_completed_appended() -> None:  # spec: jobset 6.C.2
    js = jobset()
    assert S.update_condition(js, S.completed_condition(), NOW) is True
    assert js["status"]["conditions"] == [
        {
            "type": "Completed",
            "status": "True",
            "reason": "AllJobsCompleted",
            "message": "jobset completed successfully",
            "lastTransitionTime": T,
        }
    ]


def test_suspended_appended() -> None:  # spec: jobset 6.C.3
    js = jobset()
    assert S.update_condition(js, S.suspended_condition(), NOW) is True
    assert [c["type"] for c in js["status"]["conditions"]] == ["Suspended"]


def test_resume_replaces_suspended_in_place() -> None:  # spec: jobset 6.C.4
    js = jobset()
    js["status"] = {
        "conditions": [S.suspended_condition().__dict__ | {"lastTransitionTime": "2020-01-01T00:00:00Z"}]
    }
    js["status"]["conditions"][0].pop("event_type")
    assert S.update_condition(js, S.resumed_condition(), NOW) is True
    assert js["status"]["conditions"] == [
        {
            "type": "Suspended",
            "status": "False",
            "reason": "ResumeJobs",
            "message": "jobset is resumed",
            "lastTransitionTime": T,
        }
    ]


def test_duplicate_condition_is_not_refreshed() -> None:  # spec: jobset 6.C.5
    js = jobset()
    S.update_condition(js, S.completed_condition(), NOW.replace(year=2020))
    before = [dict(c) for c in js["status"]["conditions"]]
    assert S.update_condition(js, S.completed_condition(), NOW) is False
    assert js["status"]["conditions"] == before


def test_false_condition_never_appended() -> None:
    js = jobset()
    assert S.update_condition(js, S.resumed_condition(), NOW) is False
    assert "conditions" not in js.get("status", {})


def test_startup_conditions_flip_each_other_status_only() -> None:
    js = jobset()
    old = NOW.replace(year=2020)
    S.update_condition(js, S.in_order_in_progress_condition(), old)
    assert S.update_condition(js, S.in_order_completed_condition(), NOW) is True
    assert js["status"]["conditions"] == [
        {
            "type": "StartupPolicyInProgress",
            "status": "False",
            "reason": "InOrderStartupPolicyInProgress",
            "message": "in order startup policy is in progress",
            "lastTransitionTime": ts(old),
        },
        {
            "type": "StartupPolicyCompleted",
            "status": "True",
            "reason": "InOrderStartupPolicyCompleted",
            "message": "in order startup policy has completed",
            "lastTransitionTime": T,
        },
    ]
    # The quirk of 2.11: in progress again flips Completed to False (status only).
    assert S.update_condition(js, S.in_order_in_progress_condition(), NOW) is True
    assert [(c["type"], c["status"]) for c in js["status"]["conditions"]] == [
        ("StartupPolicyInProgress", "True"),
        ("StartupPolicyCompleted", "False"),
    ]


def test_set_condition_queues_one_event() -> None:
    js, opts = jobset(), S.ReconcileOpts()
    S.set_condition(js, S.suspended_condition(), opts, NOW)
    S.set_condition(js, S.suspended_condition(), opts, NOW)
    assert opts.should_update is True
    assert opts.events == [S.Event("Normal", "SuspendedJobs", "jobset is suspended")]


# -- 6.D ------------------------------------------------------------------------------------------

TWO = jobset(rjob("replicated-job-1", 1), rjob("replicated-job-2", 3))


def zero(name: str, **counts: int) -> Object:
    return {"name": name, "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0, **counts}


def j(rname: str, p: int | None, c: int | None = None, **status: int) -> Object:
    return job(f"x-{rname}", rname, parallelism=p, completions=c, status=dict(status))


def test_ready_counts_with_parallelism_and_completions() -> None:  # spec: jobset 6.D.1
    owned = ChildJobs(
        active=[
            j("replicated-job-1", 1, 2, ready=1, succeeded=1),
            j("replicated-job-2", 5, None, ready=2, succeeded=3),
            j("replicated-job-2", 3, 2, ready=1, succeeded=1),
            j("replicated-job-2", 2, 3, ready=2, succeeded=1),
            j("replicated-job-2", 4, 5, ready=2, succeeded=1),
        ]
    )
    assert S.replicated_jobs_statuses(TWO, owned) == [
        zero("replicated-job-1", ready=1),
        zero("replicated-job-2", ready=3),
    ]


def test_no_jobs_gives_zero_entries() -> None:  # spec: jobset 6.D.2
    assert S.replicated_jobs_statuses(TWO, ChildJobs()) == [
        zero("replicated-job-1"),
        zero("replicated-job-2"),
    ]


def test_single_ready_job() -> None:  # spec: jobset 6.D.3
    owned = ChildJobs(active=[j("replicated-job-2", 5, None, ready=2, succeeded=3)])
    assert S.replicated_jobs_statuses(TWO, owned) == [
        zero("replicated-job-1"),
        zero("replicated-job-2", ready=1),
    ]


def test_succeeded_counts() -> None:  # spec: jobset 6.D.4
    owned = ChildJobs(successful=[j("replicated-job-1", 1), j("replicated-job-2", 1)])
    assert S.replicated_jobs_statuses(TWO, owned) == [
        zero("replicated-job-1", succeeded=1),
        zero("replicated-job-2", succeeded=1),
    ]


def test_failed_counts() -> None:  # spec: jobset 6.D.5
    owned = ChildJobs(failed=[j("replicated-job-1", 1)] * 3 + [j("replicated-job-2", 1)])
    assert S.replicated_jobs_statuses(TWO, owned) == [
        zero("replicated-job-1", failed=3),
        zero("replicated-job-2", failed=1),
    ]


def test_active_counts() -> None:  # spec: jobset 6.D.6
    owned = ChildJobs(
        active=[
            j("replicated-job-1", 2, active=1),
            j("replicated-job-2", 2, active=0),
            j("replicated-job-2", 2, active=1),
        ]
    )
    assert S.replicated_jobs_statuses(TWO, owned) == [
        zero("replicated-job-1", active=1),
        zero("replicated-job-2", active=1),
    ]


def test_suspended_counts() -> None:  # spec: jobset 6.D.7
    suspended_1 = job("a", "replicated-job-1", parallelism=2, suspend=True)
    suspended_2 = job("b", "replicated-job-2", parallelism=2, suspend=True)
    running_2 = job("c", "replicated-job-2", parallelism=2, suspend=False)
    owned = ChildJobs(active=[suspended_1, suspended_2, running_2])
    assert S.replicated_jobs_statuses(TWO, owned) == [
        zero("replicated-job-1", suspended=1),
        zero("replicated-job-2", suspended=1),
    ]


def test_jobs_of_unknown_rjobs_and_previous_are_not_counted() -> None:
    owned = ChildJobs(
        active=[j("nope", 1, ready=1)],
        failed=[j("nope", 1)],
        previous=[j("replicated-job-1", 1, ready=1)],
    )
    assert S.replicated_jobs_statuses(TWO, owned) == [zero("replicated-job-1"), zero("replicated-job-2")]


def test_status_comparison_ignores_order_and_sorts_descending() -> None:
    new = [zero("a"), zero("b")]
    assert S.statuses_equal(list(reversed(new)), new)
    assert [s["name"] for s in S.sorted_statuses(new)] == ["b", "a"]
    assert S.statuses_equal(None, [])
