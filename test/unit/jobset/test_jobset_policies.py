"""Failure, success, startup and dependsOn policies, TTL (jobset.md 6.G to 6.K)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from jsfixtures import NOW, RecordingClient, cond, failed, job, jobset, reconciler, rjob, ts
from prometheus_client import CollectorRegistry

from trainer.controllers.jobset import policies as P
from trainer.controllers.jobset import status as S
from trainer.controllers.jobset.metrics import JobSetMetrics

Object = dict[str, Any]
H = datetime.timedelta(hours=1)
R1, R2 = "BackoffLimitExceeded", "DeadlineExceeded"


def fjob(
    name: str, rname: str = "rj1", reason: str = "", message: str = "", ago: datetime.timedelta = H
) -> Object:
    return job(name, rname, conditions=failed(reason, message, NOW - ago))


# -- 6.G: first failed job ----------------------------------------------------------------------


def test_find_first_failed_job() -> None:
    assert P.find_first_failed_job([]) is None  # spec: jobset 6.G.1
    one = fjob("job1")
    assert P.find_first_failed_job([one]) is one  # spec: jobset 6.G.2
    j1, j2 = fjob("job1", ago=3 * H), fjob("job2", ago=5 * H)
    assert P.find_first_failed_job([j1, j2]) is j2  # spec: jobset 6.G.3
    assert (
        P.find_first_failed_job([job("a", "r"), job("b", "r", conditions=[cond("Complete")])]) is None
    )  # spec: jobset 6.G.4


def test_ties_keep_list_order() -> None:
    a, b = fjob("a", ago=H), fjob("b", ago=H)
    assert P.find_first_failed_job([a, b]) is a


# -- 6.G: rule applicability -----------------------------------------------------------------------


def rule(
    action: str = "FailJobSet",
    reasons: list[str] | None = None,
    targets: list[str] | None = None,
    patterns: list[str] | None = None,
    name: str = "r",
) -> Object:
    out: Object = {"name": name, "action": action}
    if reasons is not None:
        out["onJobFailureReasons"] = reasons
    if targets is not None:
        out["targetReplicatedJobs"] = targets
    if patterns is not None:
        out["onJobFailureMessagePatterns"] = patterns
    return out


@pytest.mark.parametrize(
    ("the_rule", "rname", "reason", "message", "applies"),
    [
        (rule(), "rj1", R1, "", True),  # spec: jobset 6.G.5
        (rule(reasons=[R1]), "rj1", R1, "", True),  # spec: jobset 6.G.6
        (rule(reasons=[R1]), "rj1", R2, "", False),  # spec: jobset 6.G.7
        (rule(targets=["rj1"]), "rj1", R1, "", True),  # spec: jobset 6.G.8
        (rule(reasons=[R1], targets=["rj1"]), "rj1", R1, "", True),  # spec: jobset 6.G.9
        (rule(reasons=[R1], targets=["rj1"]), "rj1", R2, "", False),  # spec: jobset 6.G.10
        (rule(targets=["rj1"]), "rj2", R1, "", False),  # spec: jobset 6.G.11
        (rule(reasons=[R1], targets=["rj1"]), "rj2", R1, "", False),  # spec: jobset 6.G.12
        (rule(reasons=[R1], targets=["rj1"]), "rj2", R2, "", False),  # spec: jobset 6.G.13
        (
            rule(patterns=["^job failed because.*"]),
            "rj1",
            "",
            "job failed because of a bug",
            True,
        ),  # spec: jobset 6.G.14
        (
            rule(patterns=["^job failed because.*"]),
            "rj1",
            "",
            "another error message",
            False,
        ),  # spec: jobset 6.G.15
        (
            rule(reasons=[R1], patterns=[".*bug.*"]),
            "rj1",
            R1,
            "job failed because of a bug",
            True,
        ),  # spec: jobset 6.G.16
        (
            rule(reasons=[R1], patterns=[".*bug.*"]),
            "rj1",
            R1,
            "job failed due to something else",
            False,
        ),  # spec: jobset 6.G.17
    ],
)
def test_rule_is_applicable(the_rule: Object, rname: str, reason: str, message: str, applies: bool) -> None:
    assert P.rule_is_applicable(the_rule, fjob("j", rname, reason, message), reason, message) is applies


def test_rule_needs_replicated_job_label_and_skips_bad_patterns() -> None:
    unlabeled = fjob("j")
    del unlabeled["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"]
    assert P.rule_is_applicable(rule(), unlabeled, R1, "") is False
    assert P.rule_is_applicable(rule(patterns=["(unclosed"]), fjob("j"), R1, "(unclosed") is False
    assert (
        P.rule_is_applicable(rule(patterns=["some message"]), fjob("j"), R1, "this is some message!") is True
    )


# -- 6.G: first rule and job -----------------------------------------------------------------------

RULES = [
    rule(reasons=[R1], name="r1"),
    rule(reasons=[R2], name="r2"),
    rule(reasons=["FailedIndexes"], name="r3"),
]


def test_first_rule_and_job() -> None:
    assert P.find_first_failed_policy_rule_and_job([], []) == (None, None)  # spec: jobset 6.G.18
    j1 = fjob("job1", reason=R1)
    assert P.find_first_failed_policy_rule_and_job([], [j1]) == (None, None)  # spec: jobset 6.G.19
    assert P.find_first_failed_policy_rule_and_job([rule(reasons=[R2])], [j1]) == (
        None,
        None,
    )  # spec: jobset 6.G.20
    assert P.find_first_failed_policy_rule_and_job(RULES, [j1]) == (RULES[0], j1)  # spec: jobset 6.G.21
    j2 = fjob("job2", reason=R2)
    assert P.find_first_failed_policy_rule_and_job(RULES, [j2]) == (RULES[1], j2)  # spec: jobset 6.G.22
    j3 = fjob("job3", reason="FailedIndexes")
    assert P.find_first_failed_policy_rule_and_job(RULES, [j3]) == (RULES[2], j3)  # spec: jobset 6.G.23
    assert P.find_first_failed_policy_rule_and_job([], [j1, j2]) == (None, None)  # spec: jobset 6.G.24
    a, dup = fjob("job1", reason=R1, ago=6 * H), fjob("job1Dup", reason=R1, ago=12 * H)
    assert P.find_first_failed_policy_rule_and_job([rule(reasons=[R2])], [a, dup]) == (
        None,
        None,
    )  # spec: jobset 6.G.25
    r1 = rule(reasons=[R1])
    assert P.find_first_failed_policy_rule_and_job([r1], [a, dup]) == (r1, dup)  # spec: jobset 6.G.26
    miss = rule(targets=["fakeReplicatedJobName"])
    assert P.find_first_failed_policy_rule_and_job([miss, r1], [a, dup]) == (r1, dup)  # spec: jobset 6.G.27


# -- 6.G: applying actions -------------------------------------------------------------------------


def metrics() -> JobSetMetrics:
    return JobSetMetrics(CollectorRegistry())


def test_apply_fail_jobset() -> None:  # spec: jobset 6.G.28
    js, opts = jobset(failurePolicy={}), S.ReconcileOpts()
    P.apply_failure_policy_rule_action(js, fjob("job1"), "FailJobSet", opts, NOW, metrics())
    assert js["status"] == {
        "terminalState": "Failed",
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "FailJobSetFailurePolicyAction",
                "message": "applying FailJobSet failure policy action (first failed job: job1)",
                "lastTransitionTime": ts(NOW),
            }
        ],
    }
    assert opts.should_update is True
    assert opts.events == [
        S.Event(
            "Warning",
            "FailJobSetFailurePolicyAction",
            "applying FailJobSet failure policy action (first failed job: job1)",
        )
    ]


def test_apply_restart_counts() -> None:  # spec: jobset 6.G.29
    js, opts = jobset(failurePolicy={"maxRestarts": 5}), S.ReconcileOpts()
    js["status"] = {"restarts": 1, "restartsCountTowardsMax": 1}
    P.apply_failure_policy_rule_action(js, fjob("job1"), "RestartJobSet", opts, NOW, metrics())
    assert js["status"] == {"restarts": 2, "restartsCountTowardsMax": 2}
    assert opts.should_update is True
    assert opts.events == [
        S.Event(
            "Warning",
            "RestartJobSetFailurePolicyAction",
            "applying RestartJobSet failure policy action (first failed job: job1)",
        )
    ]


def test_apply_restart_at_max_fails() -> None:  # spec: jobset 6.G.30
    js, opts = jobset(failurePolicy={"maxRestarts": 2}), S.ReconcileOpts()
    js["status"] = {"restarts": 2, "restartsCountTowardsMax": 2}
    P.apply_failure_policy_rule_action(js, fjob("job1"), "RestartJobSet", opts, NOW, metrics())
    assert js["status"]["restarts"] == 2 and js["status"]["restartsCountTowardsMax"] == 2
    assert js["status"]["terminalState"] == "Failed"
    assert [(c["type"], c["reason"], c["message"]) for c in js["status"]["conditions"]] == [
        (
            "Failed",
            "ReachedMaxRestarts",
            "jobset failed due to reaching max number of restarts (first failed job: job1)",
        )
    ]


def test_apply_restart_ignoring_max() -> None:  # spec: jobset 6.G.31
    js, opts = jobset(failurePolicy={"maxRestarts": 1}), S.ReconcileOpts()
    js["status"] = {"restarts": 1, "restartsCountTowardsMax": 1}
    P.apply_failure_policy_rule_action(
        js, fjob("job1"), "RestartJobSetAndIgnoreMaxRestarts", opts, NOW, metrics()
    )
    assert js["status"] == {"restarts": 2, "restartsCountTowardsMax": 1}
    assert opts.events[0].reason == "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction"


def test_no_failure_policy_fails_with_first_failed_job() -> None:
    js, opts = jobset(), S.ReconcileOpts()
    owned = P.ChildJobs(failed=[fjob("late", ago=H), fjob("early", ago=2 * H)])
    P.execute_failure_policy(js, owned, opts, NOW, metrics())
    (condition,) = js["status"]["conditions"]
    assert condition["reason"] == "FailedJobs"
    assert condition["message"] == "jobset failed due to one or more job failures (first failed job: early)"


def test_empty_failure_policy_fails_with_reached_max_restarts() -> None:
    js, opts = jobset(failurePolicy={}), S.ReconcileOpts()
    P.execute_failure_policy(js, P.ChildJobs(failed=[fjob("j")]), opts, NOW, metrics())
    assert js["status"]["conditions"][0]["reason"] == "ReachedMaxRestarts"


def test_unknown_action_is_an_error() -> None:
    with pytest.raises(
        P.PolicyError, match=r"failed to find a corresponding action for the FailurePolicyRuleAction Nope"
    ):
        P.apply_failure_policy_rule_action(jobset(), fjob("j"), "Nope", S.ReconcileOpts(), NOW, metrics())


# -- 6.H success policy ---------------------------------------------------------------------------


def sjob(rname: str) -> Object:
    return job(f"x-{rname}", rname, conditions=[cond("Complete")])


def test_success_policy_helpers() -> None:
    empty, two = (
        {"operator": "All", "targetReplicatedJobs": []},
        {"operator": "All", "targetReplicatedJobs": ["rj1", "rj2"]},
    )
    assert P.job_matches_success_policy(empty, sjob("rj9")) is True  # spec: jobset 6.H.1
    assert P.job_matches_success_policy(two, sjob("rj1")) is True  # spec: jobset 6.H.2
    assert P.job_matches_success_policy(two, sjob("rj3")) is False  # spec: jobset 6.H.3
    assert P.replicated_job_matches_success_policy(empty, {"name": "rj1"}) is True  # spec: jobset 6.H.4
    assert P.replicated_job_matches_success_policy(two, {"name": "rj1"}) is True  # spec: jobset 6.H.5
    assert P.replicated_job_matches_success_policy(two, {"name": "rj3"}) is False  # spec: jobset 6.H.6
    assert P.num_jobs_matching_success_policy(two, [sjob("rj1"), sjob("rj3")]) == 1  # spec: jobset 6.H.7
    assert P.num_jobs_matching_success_policy(two, [sjob("rj1"), sjob("rj2")]) == 2  # spec: jobset 6.H.8
    assert P.num_jobs_matching_success_policy(two, [sjob("rj3"), sjob("rj4")]) == 0  # spec: jobset 6.H.9
    assert P.num_jobs_matching_success_policy(empty, [sjob("a"), sjob("b")]) == 2  # spec: jobset 6.H.10
    assert (
        P.num_jobs_expected_to_succeed(jobset(rjob("rj1", 4), successPolicy={"operator": "Any"})) == 1
    )  # spec: jobset 6.H.11
    js12 = jobset(rjob("rj1", 1), rjob("rj2", 2), successPolicy=two)
    assert P.num_jobs_expected_to_succeed(js12) == 3  # spec: jobset 6.H.12
    js13 = jobset(
        rjob("rj1", 1),
        rjob("rj2", 2),
        rjob("rj3", 3),
        successPolicy={"operator": "All", "targetReplicatedJobs": ["rj1", "rj3"]},
    )
    assert P.num_jobs_expected_to_succeed(js13) == 4  # spec: jobset 6.H.13


def test_missing_success_policy_means_all() -> None:
    assert P.num_jobs_expected_to_succeed(jobset(rjob("a", 2), rjob("b", 1))) == 3


# -- 6.I startup policy ----------------------------------------------------------------------------


def test_startup_policy_helpers() -> None:
    assert P.in_order_startup_policy({"startupPolicyOrder": "AnyOrder"}) is False  # spec: jobset 6.I.1
    assert P.in_order_startup_policy({"startupPolicyOrder": "InOrder"}) is True  # spec: jobset 6.I.2
    assert P.in_order_startup_policy(None) is False  # spec: jobset 6.I.3
    assert P.all_replicas_started(1, {}) is False  # spec: jobset 6.I.4
    assert P.all_replicas_started(4, {"ready": 4}) is True  # spec: jobset 6.I.5
    assert P.all_replicas_started(4, {"ready": 2, "succeeded": 1, "failed": 1}) is True  # spec: jobset 6.I.6
    assert P.all_replicas_started(4, {"active": 4}) is False  # spec: jobset 6.I.7


# -- 6.J dependsOn --------------------------------------------------------------------------------

TRAINER_COMPLETE = {
    "name": "trainer-node",
    "dependsOn": [{"name": "model-initializer", "status": "Complete"}],
}
BOTH = [
    {"name": "model-initializer", "status": "Complete"},
    {"name": "dataset-initializer", "status": "Complete"},
]
BOTH_READY = [
    {"name": "model-initializer", "status": "Ready"},
    {"name": "dataset-initializer", "status": "Ready"},
]


def st(name: str, **counts: int) -> Object:
    return {"name": name, "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0, **counts}


def test_depends_on_gate() -> None:
    assert P.depends_on_satisfied({"name": "model-initializer"}, {}, []) is True  # spec: jobset 6.J.1
    assert (
        P.depends_on_satisfied(TRAINER_COMPLETE, {"model-initializer": 1}, [st("invalid")]) is False
    )  # spec: jobset 6.J.2
    assert (
        P.depends_on_satisfied(TRAINER_COMPLETE, {"model-initializer": 1}, None) is False
    )  # spec: jobset 6.J.3
    two = {"model-initializer": 2, "dataset-initializer": 2}
    trainer = {"name": "trainer-node", "dependsOn": BOTH}
    done = [st("model-initializer", succeeded=2), st("dataset-initializer", succeeded=2)]
    assert P.depends_on_satisfied(trainer, two, done) is True  # spec: jobset 6.J.4
    half = [st("model-initializer", ready=1, succeeded=1), st("dataset-initializer", succeeded=2)]
    assert P.depends_on_satisfied(trainer, two, half) is False  # spec: jobset 6.J.5
    halves = [st("model-initializer", ready=1, succeeded=1), st("dataset-initializer", ready=1, succeeded=1)]
    assert P.depends_on_satisfied(trainer, two, halves) is False  # spec: jobset 6.J.6
    three = {"model-initializer": 3, "dataset-initializer": 3}
    ready = {"name": "trainer-node", "dependsOn": BOTH_READY}
    mixed = [st(n, ready=1, succeeded=1, failed=1) for n in ("model-initializer", "dataset-initializer")]
    assert P.depends_on_satisfied(ready, three, mixed) is True  # spec: jobset 6.J.7
    one_short = [st("model-initializer", ready=2, active=1), st("dataset-initializer", ready=3)]
    assert P.depends_on_satisfied(ready, three, one_short) is False  # spec: jobset 6.J.8
    both_short = [st(n, ready=2, active=1) for n in ("model-initializer", "dataset-initializer")]
    assert P.depends_on_satisfied(ready, three, both_short) is False  # spec: jobset 6.J.9


# -- 6.K TTL -------------------------------------------------------------------------------------

KEY = "default/test-jobset"


def ttl_js(ttl: int | None, finished: str | None = None, ago: float = 0, deleting: bool = False) -> Object:
    js = jobset(rjob("r", 1)) if ttl is None else jobset(rjob("r", 1), ttlSecondsAfterFinished=ttl)
    if finished is not None:
        js["status"] = {"conditions": [cond(finished, when=NOW - datetime.timedelta(seconds=ago))]}
    if deleting:
        js["metadata"]["deletionTimestamp"] = ts(NOW)
    return js


async def run_ttl(js: Object) -> tuple[float, str | None, bool]:
    client = RecordingClient(js)
    rec, _events, _m = reconciler(client)
    err: str | None = None
    requeue = 0.0
    try:
        result = await rec.execute_ttl_after_finished_policy(js)
        requeue = result.requeue_after if result and result.requeue_after else 0.0
    except P.TTLError as e:
        err = str(e)
    return requeue, err, client.stored("JobSet", "test-jobset") is not None


async def test_execute_ttl() -> None:
    assert await run_ttl(ttl_js(None)) == (0.0, None, True)  # spec: jobset 6.K.1
    requeue, err, kept = await run_ttl(ttl_js(5))  # spec: jobset 6.K.2
    assert (requeue, kept) == (0.0, True)
    assert (
        err is not None
        and f"error checking if ttl expired: unable to find the status of the finished JobSet {KEY}" in err
    )
    assert await run_ttl(ttl_js(None, "Completed")) == (0.0, None, True)  # spec: jobset 6.K.3
    assert await run_ttl(ttl_js(5, "Completed", ago=10)) == (0.0, None, False)  # spec: jobset 6.K.4
    assert await run_ttl(ttl_js(5, "Completed", ago=2)) == (3.0, None, True)  # spec: jobset 6.K.5


def test_check_if_ttl_expired() -> None:
    assert P.check_if_ttl_expired(ttl_js(None, "Completed"), NOW) is False  # spec: jobset 6.K.6
    assert P.check_if_ttl_expired(ttl_js(10, "Completed"), NOW) is False  # spec: jobset 6.K.7
    assert (
        P.check_if_ttl_expired(ttl_js(10, "Completed"), NOW + datetime.timedelta(seconds=15)) is True
    )  # spec: jobset 6.K.8
    for _ in range(2):  # spec: jobset 6.K.9 / spec: jobset 6.K.10
        with pytest.raises(P.TTLError, match=rf"unable to find the status of the finished JobSet {KEY}"):
            P.check_if_ttl_expired(ttl_js(10), NOW)
    assert P.check_if_ttl_expired(ttl_js(10, "Completed", deleting=True), NOW) is False  # spec: jobset 6.K.11
    zero_time = ttl_js(10, "Completed")
    zero_time["status"]["conditions"][0]["lastTransitionTime"] = None
    with pytest.raises(
        P.TTLError, match=rf"unable to find the time when the JobSet {KEY} finished"
    ):  # spec: jobset 6.K.12
        P.check_if_ttl_expired(zero_time, NOW)


def test_time_left() -> None:
    with pytest.raises(
        P.TTLError, match=rf"unable to find the status of the finished JobSet {KEY}"
    ):  # spec: jobset 6.K.13
        P.time_left(ttl_js(0), NOW)
    with pytest.raises(
        P.TTLError, match=r"calculated invalid expiration time, jobset cleanup will be deferred"
    ):  # spec: jobset 6.K.14
        P.time_left(ttl_js(0, "Completed"), None)
    s = datetime.timedelta(seconds=1)
    assert P.time_left(ttl_js(0, "Completed"), NOW) == 0 * s  # spec: jobset 6.K.15
    assert P.time_left(ttl_js(10, "Completed"), NOW) == 10 * s  # spec: jobset 6.K.16
    assert P.time_left(ttl_js(15, "Completed", ago=10), NOW) == 5 * s  # spec: jobset 6.K.17
    assert P.time_left(ttl_js(0, "Failed"), NOW) == 0 * s  # spec: jobset 6.K.18
    assert P.time_left(ttl_js(10, "Failed"), NOW) == 10 * s  # spec: jobset 6.K.19
    assert P.time_left(ttl_js(15, "Failed", ago=10), NOW) == 5 * s  # spec: jobset 6.K.20


def test_requeue_after() -> None:
    s = datetime.timedelta(seconds=1)
    assert P.requeue_jobset_after(ttl_js(None), NOW) == 0 * s  # spec: jobset 6.K.21
    with pytest.raises(
        P.TTLError, match=rf"unable to find the status of the finished JobSet {KEY}"
    ):  # spec: jobset 6.K.22
        P.requeue_jobset_after(ttl_js(5), NOW)
    assert P.requeue_jobset_after(ttl_js(None, "Completed"), NOW) == 0 * s  # spec: jobset 6.K.23
    assert P.requeue_jobset_after(ttl_js(5, "Completed"), NOW) == 5 * s  # spec: jobset 6.K.24
    assert P.requeue_jobset_after(ttl_js(5, "Completed", ago=2), NOW) == 3 * s  # spec: jobset 6.K.25
