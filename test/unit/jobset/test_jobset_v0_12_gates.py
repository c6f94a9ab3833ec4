"""JobSet v0.12.0's feature-gated controller steps (docs/behaviour/jobset-v0.12.md §1.9-1.11):
RestartJob, InPlaceRestart and ElasticJobSet, each with its gate on and off, and level v2.1
(JobSet v0.10.1) where none of them exists. Scenarios from upstream's
``failure_policy_test.go``, ``in_place_restart_test.go`` and ``jobset_controller_test.go``."""

from __future__ import annotations

import datetime
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
from jsfixtures import NOW, Events, RecordingClient, failed, get_jobset, job, jobset, rjob, ts
from prometheus_client import CollectorRegistry

from manager import Request
from manager.client.errors import Invalid
from manager.meta.gvk import JOB as JOB_GVK
from manager.meta.gvk import POD as POD_GVK
from trainer import features
from trainer.api import jobset_constants as c
from trainer.api.v2_3 import jobset_constants as c23
from trainer.controllers.jobset import status as S
from trainer.controllers.jobset.jobs import ChildJobs, construct_job
from trainer.controllers.jobset.metrics import JobSetMetrics
from trainer.controllers.jobset.reconciler import JOB_OWNER_KEY, JobScalingError, JobSetReconciler
from trainer.jobset.levels import v0_10_controller, v0_12_controller
from trainer.jobset.levels import v0_12_elastic as elastic
from trainer.jobset.levels import v0_12_in_place_restart as in_place
from trainer.jobset.levels import v0_12_restart_job as restart_job
from trainer.jobset.levels.controller import ControllerSteps, FailurePolicyError, InPlaceRestartOutcome

Object = dict[str, Any]
REQ = Request("default", "test-jobset")
UID = "jobset-uid-1"
V0_10: ControllerSteps = v0_10_controller.STEPS
V0_12: ControllerSteps = v0_12_controller.STEPS
EARLIER = NOW - datetime.timedelta(minutes=5)


@pytest.fixture(autouse=True)
def _fresh_gates() -> Iterator[None]:
    features.reset()
    yield
    features.reset()


def gate(name: str, on: bool = True) -> Any:
    return features.override(name, on)


def child(name: str, rjob_name: str, index: int, *, attempt: int | None = 0, **kw: Any) -> Object:
    """A child Job as the controller made it: owned by the JobSet, with its index and (gate on)
    its own restart attempt."""
    out = job(name, rjob_name, **kw)
    out["metadata"]["ownerReferences"][0]["uid"] = UID
    out["metadata"]["labels"][c.JobIndexKey] = str(index)
    if attempt is not None:
        out["metadata"]["labels"][c23.JobRestartAttemptKey] = str(attempt)
    return out


def setup(steps: ControllerSteps, *objects: Object) -> tuple[RecordingClient, JobSetReconciler, Events]:
    client = RecordingClient(*objects)
    client.add_index(POD_GVK, c23.PodsIndexByJobSetKey, in_place.JOBSET_PODS.index_value)
    client.add_index(JOB_GVK, JOB_OWNER_KEY, steps.job_owner_index)
    events = Events()
    rec = JobSetReconciler(
        client, events, now=lambda: NOW, metrics=JobSetMetrics(CollectorRegistry()), steps=steps
    )
    return client, rec, events


def restart_rules(action: str, max_restarts: int = 2) -> Object:
    return {
        "maxRestarts": max_restarts,
        "rules": [{"name": "perJob", "action": action, "onJobFailureReasons": ["PodFailurePolicy"]}],
    }


def two_rjobs(**spec: Any) -> Object:
    return jobset(rjob("a", 1), rjob("b", 2), uid=UID, **spec)


def three_children(**a_kw: Any) -> list[Object]:
    return [
        child("test-jobset-a-0", "a", 0, **a_kw),
        child("test-jobset-b-0", "b", 0),
        child("test-jobset-b-1", "b", 1),
    ]


def rjob_status(js: Object, name: str) -> Object:
    return next(s for s in js["status"]["replicatedJobsStatus"] if s["name"] == name)


RESTART_JOB_MESSAGE = "applying RestartJob failure policy action (first failed job: test-jobset-a-0)"


# -- the gates and the levels ---------------------------------------------------------------------


def test_the_three_jobset_gates_are_alpha_off_and_jobsets() -> None:
    for name in ("InPlaceRestart", "RestartJob", "ElasticJobSet"):
        spec = features.KNOWN[name]
        assert (spec.default, spec.pre_release, spec.component) == (False, "Alpha", "jobset")
        assert features.enabled(name) is False
    assert features.of_component({"RestartJob": True, "TrainJobStatus": True}, "jobset") == {
        "RestartJob": True
    }


def test_only_level_v2_3_has_the_jobset_gates() -> None:
    from trainer.levels import LEVELS
    from trainer.levels.check import feature_gate_errors

    gates = frozenset({"InPlaceRestart", "RestartJob", "ElasticJobSet", "TrainJobStatus"})
    assert feature_gate_errors(LEVELS["v2.3"], gates) == []
    assert LEVELS["v2.1"].jobset.feature_gates == frozenset()
    assert feature_gate_errors(LEVELS["v2.1"], frozenset({"RestartJob", "TrainJobStatus"})) == [
        "featureGates.RestartJob: Forbidden: RestartJob is a feature gate of jobset v0.12.0 (API level v2.3); "
        "this manager runs API level v2.1 (trainer v2.1.0, jobset v0.10.1), whose JobSet has no such gate"
    ]


@pytest.mark.parametrize("how", ["flag", "config"])
def test_the_entry_point_refuses_a_jobset_gate_at_level_v2_1(tmp_path: Any, how: str, capsys: Any) -> None:
    """Named at all (false too), at v2.1 it is a start-up error naming the gate and the level."""
    from trainer.__main__ import main

    if how == "flag":
        code = main(["--api-level=v2.1", "--feature-gates=ElasticJobSet=false"])
    else:
        config = tmp_path / "config.yaml"
        config.write_text("apiLevel: v2.1\nfeatureGates:\n  ElasticJobSet: true\n")
        code = main([f"--config={config}"])
    assert code == 1
    out = capsys.readouterr()
    assert "featureGates.ElasticJobSet: Forbidden: ElasticJobSet is a feature gate of jobset v0.12.0" in (
        out.out + out.err
    )


# -- RestartJob -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "towards_max"),
    [("RestartJob", [1]), ("RestartJobAndIgnoreMaxRestarts", None)],
)
async def test_restart_job_counts_the_failed_job_only(action: str, towards_max: list[int] | None) -> None:
    """upstream integration: jobset restarts with RestartJob / RestartJobAndIgnoreMaxRestarts."""
    a, b0, b1 = three_children(conditions=failed("PodFailurePolicy"))
    client, rec, events = setup(V0_12, two_rjobs(failurePolicy=restart_rules(action)), a, b0, b1)
    with gate("RestartJob"):
        await rec.reconcile(REQ)
    js = await get_jobset(client)
    assert js["status"]["restarts"] == 0 and "restartsCountTowardsMax" not in js["status"]
    assert rjob_status(js, "a").get("jobRestarts") == [1]
    assert rjob_status(js, "a").get("jobRestartsCountTowardsMax") == towards_max
    assert "jobRestarts" not in rjob_status(js, "b")
    reason = {"RestartJob": "RestartJobFailurePolicyAction"}.get(
        action, "RestartJobAndIgnoreMaxRestartsFailurePolicyAction"
    )
    message = RESTART_JOB_MESSAGE.replace("RestartJob", action)
    assert events.items == [("Warning", reason, message)]
    assert not js["status"].get("conditions"), "a Job's restart is not a JobSet restart: no RestartingJobSet"
    assert client.deletes == []


async def test_the_next_pass_recreates_only_the_failed_job_at_its_new_attempt() -> None:
    a, b0, b1 = three_children(conditions=failed("PodFailurePolicy"))
    js = two_rjobs(failurePolicy=restart_rules("RestartJob"))
    js["status"] = {
        "restarts": 0,
        "replicatedJobsStatus": [
            {"name": "a", "ready": 0, "succeeded": 0, "failed": 1, "active": 0, "suspended": 0,
             "jobRestarts": [1], "jobRestartsCountTowardsMax": [1]},
            {"name": "b", "ready": 0, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0},
        ],
    }  # fmt: skip
    client, rec, events = setup(V0_12, js, a, b0, b1)
    with gate("RestartJob"):
        await rec.reconcile(REQ)  # a-0 is of attempt 0 < 1: deleted
        assert client.deletes == [("Job", "test-jobset-a-0", "Foreground")]
        await rec.reconcile(REQ)  # gone: made again at attempt 1
    recreated = client.stored("Job", "test-jobset-a-0")
    assert recreated is not None
    for meta in (recreated["metadata"], recreated["spec"]["template"]["metadata"]):
        assert meta["labels"][c23.JobRestartAttemptKey] == "1"
        assert meta["annotations"][c23.JobRestartAttemptKey] == "1"
        assert meta["labels"][c.RestartsKey] == "0"
    assert client.deletes == [("Job", "test-jobset-a-0", "Foreground")], "b's Jobs ran on"
    stored = await get_jobset(client)
    assert rjob_status(stored, "a")["jobRestarts"] == [1], "the counts stay in the status"
    assert events.items == []


async def test_restart_job_at_max_restarts_fails_the_jobset() -> None:
    """The JobSet's own restarts and every Job's count towards maxRestarts."""
    a, b0, b1 = three_children(conditions=failed("PodFailurePolicy"))
    js = two_rjobs(failurePolicy=restart_rules("RestartJob", max_restarts=2))
    js["status"] = {
        "restarts": 1,
        "restartsCountTowardsMax": 1,
        "replicatedJobsStatus": [
            {"name": "b", "ready": 0, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0,
             "jobRestarts": [0, 1], "jobRestartsCountTowardsMax": [0, 1]},
        ],
    }  # fmt: skip
    for j in (a, b0, b1):
        j["metadata"]["labels"][c.RestartsKey] = "1"
    b1["metadata"]["labels"][c23.JobRestartAttemptKey] = "1"
    client, rec, _events = setup(V0_12, js, a, b0, b1)
    with gate("RestartJob"):
        await rec.reconcile(REQ)
    stored = await get_jobset(client)
    assert stored["status"]["terminalState"] == "Failed"
    failed_cond = next(x for x in stored["status"]["conditions"] if x["type"] == "Failed")
    assert (failed_cond["reason"], failed_cond["message"]) == (
        "ReachedMaxRestarts",
        "jobset failed due to reaching max number of restarts (first failed job: test-jobset-a-0)",
    )


@pytest.mark.parametrize(("gate_on", "fails"), [(True, True), (False, False)])
async def test_restart_jobset_counts_the_jobs_restarts_only_with_the_gate(gate_on: bool, fails: bool) -> None:
    """RestartJobSet at maxRestarts 1: a Job's own restart counts only while RestartJob is on."""
    a, b0, b1 = three_children(conditions=failed("PodFailurePolicy"))
    js = two_rjobs(failurePolicy={"maxRestarts": 1})
    js["status"] = {
        "restarts": 0,
        "replicatedJobsStatus": [{"name": "b", "jobRestarts": [1, 0], "jobRestartsCountTowardsMax": [1, 0]}],
    }
    client, rec, _events = setup(V0_12, js, a, b0, b1)
    with gate("RestartJob", gate_on):
        await rec.reconcile(REQ)
    stored = await get_jobset(client)
    assert (stored["status"].get("terminalState") == "Failed") is fails
    assert stored["status"]["restarts"] == (0 if fails else 1)
    # with the gate off the Jobs' counts are not carried over (upstream drops them too)
    assert ("jobRestarts" in rjob_status(stored, "b")) is gate_on


@pytest.mark.parametrize(
    ("steps", "gate_on", "error"),
    [
        (
            V0_12,
            False,
            "RestartJob failure policy action cannot be used when the feature gate RestartJob is disabled",
        ),
        (V0_10, True, "failed to find a corresponding action for the FailurePolicyRuleAction RestartJob"),
    ],
)
async def test_a_restart_job_action_without_the_gate_fails_the_pass(
    steps: ControllerSteps, gate_on: bool, error: str
) -> None:
    """A JobSet that bypassed the webhook (created with the gate on, the manager restarted
    with it off): the pass fails with upstream's words; v0.10.1 has no such action."""
    a, b0, b1 = three_children(conditions=failed("PodFailurePolicy"))
    _client, rec, events = setup(steps, two_rjobs(failurePolicy=restart_rules("RestartJob")), a, b0, b1)
    with gate("RestartJob", gate_on), pytest.raises(FailurePolicyError, match=error):
        await rec.reconcile(REQ)
    assert events.items == []


def test_classification_by_the_jobs_own_attempt() -> None:
    js = two_rjobs()
    js["status"] = {"replicatedJobsStatus": [{"name": "b", "jobRestarts": [0, 2]}]}
    assert restart_job.previous_job_attempt(js, child("x-b-1", "b", 1, attempt=1)) is True
    assert restart_job.previous_job_attempt(js, child("x-b-1", "b", 1, attempt=2)) is False
    assert restart_job.previous_job_attempt(js, child("x-b-0", "b", 0, attempt=0)) is False
    # no status entry yet: zeros, one per replica
    assert restart_job.previous_job_attempt(js, child("x-a-0", "a", 0, attempt=0)) is False
    # made before the gate was on: current (upstream logs the missing label)
    assert restart_job.previous_job_attempt(js, child("x-b-1", "b", 1, attempt=None)) is False


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda j: j["metadata"]["labels"].pop(c.JobIndexKey), "missing label jobset.sigs.k8s.io/job-index"),
        (
            lambda j: j["metadata"]["labels"].pop(c.ReplicatedJobNameKey),
            "missing label jobset.sigs.k8s.io/replicatedjob-name",
        ),
        (
            lambda j: j["metadata"]["labels"].update({c.JobIndexKey: "x"}),
            'strconv.Atoi: parsing "x": invalid syntax',
        ),
        (
            lambda j: j["metadata"]["labels"].update({c23.JobRestartAttemptKey: "one"}),
            'strconv.Atoi: parsing "one": invalid syntax',
        ),
        (
            lambda j: j["metadata"]["labels"].update({c.JobIndexKey: "5"}),
            "job index 5 is out of bounds for replicated job b",
        ),
        (
            lambda j: j["metadata"]["labels"].update({c.JobIndexKey: "-1"}),
            "job index -1 is out of bounds for replicated job b",
        ),
    ],
)
async def test_a_job_whose_labels_cannot_be_read_fails_the_pass(change: Any, error: str) -> None:
    a, b0, b1 = three_children()
    change(b1)
    _client, rec, _events = setup(V0_12, two_rjobs(), a, b0, b1)
    with gate("RestartJob"), pytest.raises(FailurePolicyError, match=error):
        await rec.reconcile(REQ)
    # with the gate off the same Job is simply a current Job
    await rec.reconcile(REQ)


def test_new_jobs_carry_their_attempt_only_with_the_gate() -> None:
    js = two_rjobs()
    js["status"] = {"replicatedJobsStatus": [{"name": "b", "jobRestarts": [0, 3]}]}
    with gate("RestartJob"):
        made = construct_job(js, js["spec"]["replicatedJobs"][1], 1, V0_12)
        assert made["metadata"]["labels"][c23.JobRestartAttemptKey] == "3"
        assert made["spec"]["template"]["metadata"]["annotations"][c23.JobRestartAttemptKey] == "3"
        with pytest.raises(FailurePolicyError, match="job index 2 is out of bounds for replicated job b"):
            restart_job.job_restart_keys(js, "b", 2)
    made = construct_job(js, js["spec"]["replicatedJobs"][1], 1, V0_12)
    assert c23.JobRestartAttemptKey not in made["metadata"]["labels"]
    assert (
        c23.JobRestartAttemptKey
        not in construct_job(js, js["spec"]["replicatedJobs"][1], 1, V0_10)["metadata"]["labels"]
    )


def test_record_job_restart_errors_name_the_job() -> None:
    js = two_rjobs(failurePolicy={"maxRestarts": 5})
    js["status"] = {"replicatedJobsStatus": [{"name": "b"}]}
    bad = child("test-jobset-b-7", "b", 7)
    with pytest.raises(
        FailurePolicyError,
        match=r"failed job test-jobset-b-7 has index 7 out of bounds for replicated job b \(replicas: 2\)",
    ):
        restart_job.record_job_restart(js, bad, "RestartJob")
    bad["metadata"]["labels"][c.JobIndexKey] = "z"
    with pytest.raises(
        FailurePolicyError,
        match=re.escape(
            "failed job test-jobset-b-7 has invalid jobset.sigs.k8s.io/job-index label: z: strconv.Atoi"
        ),
    ):
        restart_job.record_job_restart(js, bad, "RestartJob")
    del bad["metadata"]["labels"][c.JobIndexKey]
    with pytest.raises(
        FailurePolicyError,
        match=re.escape("failed job test-jobset-b-7 missing jobset.sigs.k8s.io/job-index label"),
    ):
        restart_job.record_job_restart(js, bad, "RestartJob")


def test_status_fields_kept_only_with_the_gate() -> None:
    js = two_rjobs()
    js["status"] = {
        "replicatedJobsStatus": [{"name": "b", "jobRestarts": [0, 1], "jobRestartsCountTowardsMax": []}]
    }
    owned = ChildJobs()
    with gate("RestartJob"):
        statuses = S.replicated_jobs_statuses(js, owned, V0_12)
    assert statuses[1] == {
        "name": "b", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0, "jobRestarts": [0, 1]
    }  # fmt: skip
    assert "jobRestarts" not in S.replicated_jobs_statuses(js, owned, V0_12)[1]


# -- InPlaceRestart -------------------------------------------------------------------------------


def in_place_jobset(*rjobs: Object, max_restarts: int = 3, **status: Any) -> Object:
    js = jobset(
        *(rjobs or (rjob("w", 2, parallelism=2, completions=2),)),
        uid=UID,
        failurePolicy={"maxRestarts": max_restarts, "restartStrategy": "InPlaceRestart"},
    )
    js["status"] = {"restarts": 0, **status}
    return js


def agent_pod(
    name: str, attempt: str | None, *, phase: str = "Running", restarts: int = 0, init_restarts: int = 0
) -> Object:
    annotations = {} if attempt is None else {c23.InPlaceRestartAttemptKey: attempt}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {c.JobSetNameKey: "test-jobset"},
            "annotations": annotations,
        },
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {
            "phase": phase,
            "initContainerStatuses": [{"name": "agent", "restartCount": init_restarts}],
            "containerStatuses": [{"name": "c", "restartCount": restarts}],
        },
    }


def pods(*attempts: str | None) -> list[Object]:
    return [agent_pod(f"p{i}", a) for i, a in enumerate(attempts)]


@pytest.mark.parametrize(
    ("the_pods", "status", "outcome", "current", "previous"),
    [
        # all four pods at 0, first sync since creation: current 0
        (pods("0", "0", "0", "0"), {}, InPlaceRestartOutcome.UPDATED, 0, None),
        # all in sync after the first restart
        (pods("1", "1", "1", "1"), {"currentInPlaceRestartAttempt": 0, "previousInPlaceRestartAttempt": 0},
         InPlaceRestartOutcome.UPDATED, 1, 0),
        # nothing new
        (pods("1", "1", "1", "1"), {"currentInPlaceRestartAttempt": 1}, InPlaceRestartOutcome.UNCHANGED, 1, None),
        # a new JobSet whose agents have not all started: wait
        (pods("0", "0", None), {}, InPlaceRestartOutcome.UNCHANGED, None, None),
        (pods(), {}, InPlaceRestartOutcome.UNCHANGED, None, None),
        # one pod restarted in place: the others must follow (previous = max - 1)
        (pods("1", "0", "0", "0"), {"currentInPlaceRestartAttempt": 0}, InPlaceRestartOutcome.UPDATED, 0, 0),
        (pods("2", "1", "1", "1"), {"currentInPlaceRestartAttempt": 1, "previousInPlaceRestartAttempt": 0},
         InPlaceRestartOutcome.UPDATED, 1, 1),
        # never lowered, not rewritten
        (pods("2", "1", "1", "1"), {"previousInPlaceRestartAttempt": 1}, InPlaceRestartOutcome.UNCHANGED, None, 1),
        (pods("2", "1", "1", "1"), {"previousInPlaceRestartAttempt": 3}, InPlaceRestartOutcome.UNCHANGED, None, 3),
        # a Failed pod is left out (its replacement may exist)
        ([*pods("1", "1", "1", "1"), agent_pod("old", "0", phase="Failed")], {}, InPlaceRestartOutcome.UPDATED, 1, None),
    ],
)  # fmt: skip
def test_in_place_restart_attempts(
    the_pods: list[Object],
    status: Object,
    outcome: InPlaceRestartOutcome,
    current: int | None,
    previous: int | None,
) -> None:
    js = in_place_jobset(**status)
    assert in_place.reconcile(js, the_pods) is outcome
    assert js["status"].get("currentInPlaceRestartAttempt") == current
    assert js["status"].get("previousInPlaceRestartAttempt") == previous


@pytest.mark.parametrize(
    ("the_pods", "status"),
    [
        # a container restarted more often than maxRestarts (the barrier never lifted)
        ([agent_pod("p", "0", restarts=4)], {}),
        ([agent_pod("p", "0", init_restarts=4)], {}),
        # an attempt beyond maxRestarts
        (pods("4", "3"), {}),
        # restarts that do not count are taken off: 5 - (2 - 0) = 3 is not above 3
    ],
)
def test_too_many_restarts_fail_the_jobset(the_pods: list[Object], status: Object) -> None:
    assert (
        in_place.reconcile(in_place_jobset(**status), the_pods) is InPlaceRestartOutcome.EXCEEDED_MAX_RESTARTS
    )


def test_uncounted_restarts_are_taken_off_the_attempt() -> None:
    """upstream: max restarts (not) exceeded with uncounted restarts."""
    assert not in_place.exceeded_max_restarts(in_place_jobset(restarts=2), [5])
    assert in_place.exceeded_max_restarts(in_place_jobset(restarts=2, restartsCountTowardsMax=1), [5])
    assert in_place.exceeded_max_restarts(in_place_jobset(restarts=1, restartsCountTowardsMax=1), [4])
    assert not in_place.exceeded_max_restarts(in_place_jobset(), [])


@pytest.mark.parametrize(
    ("value", "error"),
    [("x", True), ("-1", True), ("1.5", True), ("+2", False), ("007", False)],
)
def test_a_bad_attempt_annotation_fails_the_step(value: str, error: bool) -> None:
    if error:
        with pytest.raises(
            in_place.InPlaceRestartError,
            match=re.escape(in_place.ATTEMPT_ERROR),
        ):
            in_place.pod_attempts(pods(value))
    else:
        assert in_place.pod_attempts(pods(value)) == [int(value)]


def test_total_pods_needs_completions_equal_to_parallelism() -> None:
    js = in_place_jobset(
        rjob("w", 2, parallelism=2, completions=2), rjob("x", 3, parallelism=1, completions=1)
    )
    assert in_place.total_pods(js) == 7
    bad = in_place_jobset(rjob("w", 2, parallelism=2, completions=3))
    with pytest.raises(
        in_place.InPlaceRestartError,
        match=r"w: in-place restart requires jobTemplate.spec.completions == jobTemplate.spec.parallelism != nil",
    ):
        in_place.total_pods(bad)
    with pytest.raises(in_place.InPlaceRestartError):
        in_place.total_pods(in_place_jobset(rjob("w", 1, parallelism=1)))


async def test_the_reconciler_writes_the_current_attempt_from_the_indexed_pods() -> None:
    the_pods = [agent_pod(f"p{i}", "0") for i in range(4)]
    stranger = agent_pod("other", "5")
    stranger["metadata"]["labels"][c.JobSetNameKey] = "another-jobset"
    client, rec, _events = setup(V0_12, in_place_jobset(), *the_pods, stranger)
    with gate("InPlaceRestart"):
        await rec.reconcile(REQ)
    js = await get_jobset(client)
    assert js["status"]["currentInPlaceRestartAttempt"] == 0
    assert "previousInPlaceRestartAttempt" not in js["status"]


async def test_the_reconciler_fails_the_jobset_without_a_first_failed_job() -> None:
    client, rec, events = setup(V0_12, in_place_jobset(max_restarts=1), agent_pod("p", "0", restarts=2))
    with gate("InPlaceRestart"):
        await rec.reconcile(REQ)
    js = await get_jobset(client)
    failed_cond = next(x for x in js["status"]["conditions"] if x["type"] == "Failed")
    assert (failed_cond["reason"], failed_cond["message"]) == (
        "ReachedMaxRestarts",
        "jobset failed due to reaching max number of restarts",
    )
    assert (
        "Warning",
        "ReachedMaxRestarts",
        "jobset failed due to reaching max number of restarts",
    ) in events.items


@pytest.mark.parametrize("steps", [V0_12, V0_10])
async def test_without_the_gate_no_pod_is_read(steps: ControllerSteps, caplog: Any) -> None:
    caplog.set_level(logging.INFO)
    client, rec, _events = setup(steps, in_place_jobset(), *(agent_pod(f"p{i}", "0") for i in range(4)))
    assert steps.jobset_pods() is None
    await rec.reconcile(REQ)
    js = await get_jobset(client)
    assert "currentInPlaceRestartAttempt" not in js["status"]
    logged = "in-place restart strategy cannot be used when the feature gate is disabled" in caplog.text
    assert logged is (steps is V0_12)


def test_the_pod_index_and_watch_map_a_pod_to_its_jobset() -> None:
    with gate("InPlaceRestart"):
        jobset_pods = V0_12.jobset_pods()
    assert jobset_pods is not None and jobset_pods.index == "podsIndexByJobSet"
    pod = agent_pod("p", "0")
    assert jobset_pods.index_value(pod) == ["default/test-jobset"]
    assert jobset_pods.key(in_place_jobset()) == "default/test-jobset"
    assert [(k.namespace, k.name) for k in jobset_pods.jobsets_of(pod)] == [("default", "test-jobset")]
    del pod["metadata"]["labels"][c.JobSetNameKey]
    assert jobset_pods.index_value(pod) == [] and list(jobset_pods.jobsets_of(pod)) == []


# -- ElasticJobSet --------------------------------------------------------------------------------


def scaled(parallelism: int | None, completions: int | None) -> Object:
    spec: Object = {}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return {"spec": spec}


@pytest.mark.parametrize(
    ("job_values", "desired", "patch"),
    [
        ((2, 2), (4, 4), {"spec": {"parallelism": 4, "completions": 4}}),
        ((4, 2), (4, 4), {"spec": {"completions": 4}}),
        ((2, 2), (2, 2), None),
        # the template's values differ from each other: not an elastic change
        ((2, 2), (4, 3), None),
        # a template without either value: the Job's defaults (1, 1) are what a patch would make
        ((1, 1), (None, None), None),
        ((3, 3), (None, None), {"spec": {"parallelism": None, "completions": None}}),
    ],
)
def test_scaling_patch(job_values: tuple[int, int], desired: tuple[Any, Any], patch: Object | None) -> None:
    assert elastic.scaling_patch(scaled(*job_values), *desired) == patch


async def test_the_reconciler_patches_active_jobs_to_their_template() -> None:
    js = jobset(rjob("w", 2, parallelism=4, completions=4, completion_mode="Indexed"), rjob("x", 1), uid=UID)
    w0 = child("test-jobset-w-0", "w", 0, parallelism=2, completions=2)
    w1 = child("test-jobset-w-1", "w", 1, parallelism=4, completions=4)
    x0 = child("test-jobset-x-0", "x", 0, parallelism=1, completions=1)
    done = child(
        "test-jobset-w-9",
        "w",
        9,
        parallelism=2,
        completions=2,
        conditions=[{"type": "Complete", "status": "True"}],
    )
    client, rec, _events = setup(V0_12, js, w0, w1, x0, done)
    with gate("ElasticJobSet"):
        await rec.reconcile(REQ)
    for name, values in (("test-jobset-w-0", (4, 4)), ("test-jobset-w-1", (4, 4)), ("test-jobset-x-0", (1, 1)),
                         ("test-jobset-w-9", (2, 2))):  # fmt: skip
        stored = client.stored("Job", name)
        assert stored is not None
        assert (stored["spec"]["parallelism"], stored["spec"]["completions"]) == values, name


async def test_without_the_gate_nothing_is_patched() -> None:
    js = jobset(rjob("w", 1, parallelism=4, completions=4, completion_mode="Indexed"), uid=UID)
    client, rec, _events = setup(V0_12, js, child("test-jobset-w-0", "w", 0, parallelism=2, completions=2))
    await rec.reconcile(REQ)
    stored = client.stored("Job", "test-jobset-w-0")
    assert stored is not None and stored["spec"]["parallelism"] == 2


async def test_a_refused_scaling_patch_fails_the_pass_naming_the_job() -> None:
    js = jobset(rjob("w", 1, parallelism=4, completions=4, completion_mode="Indexed"), uid=UID)
    client, rec, _events = setup(V0_12, js, child("test-jobset-w-0", "w", 0, parallelism=2, completions=2))

    async def refuse(obj: Any, patch: Any, **kw: Any) -> Any:
        raise Invalid('Job.batch "test-jobset-w-0" is invalid: spec.completions: field is immutable')

    client.patch = refuse  # type: ignore[method-assign]
    with gate("ElasticJobSet"), pytest.raises(JobScalingError) as err:
        await rec.reconcile(REQ)
    assert str(err.value).startswith('failed to patch job "test-jobset-w-0" for scaling: ')


def test_elastic_update_rules() -> None:
    def js(
        parallelism: int | None, completions: int | None, *, mode: str = "Indexed", **status: Any
    ) -> Object:
        out = jobset(rjob("w", 1, parallelism=parallelism, completions=completions, completion_mode=mode))
        out["status"] = status
        return out

    assert elastic.scaling_problems(js(2, 2), js(4, 4)) == []
    assert [str(p) for p in elastic.scaling_problems(js(2, 2), js(0, 3))] == [
        "spec.replicatedJobs[0].template.spec.parallelism: Invalid value: 0: parallelism must be >= 1",
        "spec.replicatedJobs[0].template.spec.completions: Invalid value: 3: completions must be equal to "
        "parallelism for Elastic Indexed Jobs",
    ]
    done = js(2, 2, conditions=[{"type": "Completed", "status": "True", "reason": "x", "message": "y",
                                 "lastTransitionTime": ts(NOW)}])  # fmt: skip
    assert [str(p) for p in elastic.scaling_problems(done, js(3, 3))] == [
        "spec.replicatedJobs[0].template.spec: Forbidden: Cannot mutate parallelism or completions when JobSet "
        "is in a terminal state (Completed or Failed)"
    ]
    # NonIndexed: not judged here; the immutability check refuses it
    assert elastic.scaling_problems(js(2, 2, mode="NonIndexed"), js(3, 3, mode="NonIndexed")) == []
