"""The JobSet controller's steps at both releases (docs/behaviour/jobset-v0.12.md §1): what
v0.12.0 (level v2.3) does differently, and that v0.10.1 (level v2.1) does not."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from jsfixtures import NOW, Events, RecordingClient, cond, failed, get_jobset, job, jobset, rjob
from prometheus_client import CollectorRegistry

from manager import Request
from manager.client.errors import AlreadyExists, Forbidden
from manager.meta.gvk import JOB as JOB_GVK
from manager.meta.gvk import POD as POD_GVK
from trainer.api import jobset_constants as c
from trainer.controllers.jobset import status as S
from trainer.controllers.jobset.jobs import construct_job
from trainer.controllers.jobset.metrics import JobSetMetrics
from trainer.controllers.jobset.pod_reconciler import PodReconciler
from trainer.controllers.jobset.reconciler import (
    JOB_OWNER_KEY,
    JOBSET_GVK,
    JobSetReconciler,
    VolumeClaimError,
)
from trainer.jobset.levels import v0_10_controller, v0_12_controller
from trainer.jobset.levels.controller import ControllerSteps
from trainer.jobset.placement import POD_JOB_KEY, PlacementError
from trainer.jobset.volume_claims import volume_claims

Object = dict[str, Any]
REQ = Request("default", "test-jobset")
UID = "jobset-uid-1"
V0_10: ControllerSteps = v0_10_controller.STEPS
V0_12: ControllerSteps = v0_12_controller.STEPS
EARLIER = NOW - datetime.timedelta(hours=1)


def owned(obj: Object, uid: str = UID) -> Object:
    obj["metadata"]["ownerReferences"][0]["uid"] = uid
    return obj


def the_jobset(**spec: Any) -> Object:
    return jobset(rjob("a", 1), rjob("b", 2), uid=UID, **spec)


def setup(
    steps: ControllerSteps, *objects: Object, client: RecordingClient | None = None
) -> tuple[RecordingClient, JobSetReconciler, Events]:
    """A reconciler on ``client`` (a ``RecordingClient`` of ``objects`` unless one is given)."""
    client = client if client is not None else RecordingClient(*objects)
    client.add_index(JOB_GVK, JOB_OWNER_KEY, steps.job_owner_index)
    events = Events()
    rec = JobSetReconciler(
        client, events, now=lambda: NOW, metrics=JobSetMetrics(CollectorRegistry()), steps=steps
    )
    return client, rec, events


def restarting(js: Object) -> Object | None:
    for x in (js.get("status") or {}).get("conditions") or []:
        if x["type"] == "RestartingJobSet":
            return dict(x)
    return None


def three_jobs(*, restarts: int = 0, **status: Object) -> list[Object]:
    names = [("test-jobset-a-0", "a"), ("test-jobset-b-0", "b"), ("test-jobset-b-1", "b")]
    return [owned(job(n, r, restarts=restarts, status=status.get(n))) for n, r in names]


READY = {"active": 1, "ready": 1}
RESTART_MESSAGE = "applying RestartJobSet failure policy action (first failed job: test-jobset-a-0)"


# -- the restart: RestartingJobSet True ------------------------------------------------------------


async def test_a_restart_by_the_default_action_sets_restarting_before_its_event() -> None:
    a, b0, b1 = three_jobs()
    a["status"]["conditions"] = failed("BackoffLimitExceeded")
    client, rec, events = setup(V0_12, the_jobset(failurePolicy={"maxRestarts": 2}), a, b0, b1)
    await rec.reconcile(REQ)
    js = await get_jobset(client)
    assert js["status"]["restarts"] == 1
    assert restarting(js) == {
        "type": "RestartingJobSet",
        "status": "True",
        "reason": "DefaultFailurePolicy",
        "message": RESTART_MESSAGE,
        "lastTransitionTime": "2026-01-01T12:00:00Z",
    }
    assert events.items == [
        ("Warning", "DefaultFailurePolicy", RESTART_MESSAGE),
        ("Warning", "RestartJobSetFailurePolicyAction", RESTART_MESSAGE),
    ]


@pytest.mark.parametrize(
    ("action", "event_reason"),
    [
        ("RestartJobSet", "RestartJobSetFailurePolicyAction"),
        ("RestartJobSetAndIgnoreMaxRestarts", "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction"),
    ],
)
async def test_a_restart_by_a_rule_is_named_after_the_rule(action: str, event_reason: str) -> None:
    a, b0, b1 = three_jobs()
    a["status"]["conditions"] = failed("PodFailurePolicy")
    policy = {"maxRestarts": 2, "rules": [{"name": "onPodFailure", "action": action}]}
    client, rec, events = setup(V0_12, the_jobset(failurePolicy=policy), a, b0, b1)
    await rec.reconcile(REQ)
    cond_ = restarting(await get_jobset(client))
    assert cond_ is not None and (cond_["status"], cond_["reason"]) == ("True", "FailurePolicy_onPodFailure")
    assert [e[1] for e in events.items] == ["FailurePolicy_onPodFailure", event_reason]
    assert cond_["message"] == events.items[1][2]


async def test_v0_10_restarts_without_a_condition() -> None:
    a, b0, b1 = three_jobs()
    a["status"]["conditions"] = failed()
    client, rec, events = setup(V0_10, the_jobset(failurePolicy={"maxRestarts": 2}), a, b0, b1)
    await rec.reconcile(REQ)
    js = await get_jobset(client)
    assert js["status"]["restarts"] == 1 and restarting(js) is None
    assert events.items == [("Warning", "RestartJobSetFailurePolicyAction", RESTART_MESSAGE)]


async def test_a_second_restart_replaces_the_message_and_keeps_the_time() -> None:
    js = the_jobset(failurePolicy={"maxRestarts": 3})
    first = {"type": "RestartingJobSet", "status": "True", "reason": "DefaultFailurePolicy"}
    js["status"] = {
        "restarts": 1,
        "restartsCountTowardsMax": 1,
        "conditions": [{**first, "message": RESTART_MESSAGE, "lastTransitionTime": "2026-01-01T11:00:00Z"}],
    }
    a, b0, b1 = three_jobs(restarts=1)
    b1["status"]["conditions"] = failed()
    client, rec, events = setup(V0_12, js, a, b0, b1)
    await rec.reconcile(REQ)
    second = "applying RestartJobSet failure policy action (first failed job: test-jobset-b-1)"
    assert restarting(await get_jobset(client)) == {
        **first,
        "message": second,
        "lastTransitionTime": "2026-01-01T11:00:00Z",
    }
    assert events.items[0] == ("Warning", "DefaultFailurePolicy", second)


# -- the end of a restart: RestartingJobSet False --------------------------------------------------


def after_restart(**spec: Any) -> Object:
    js = the_jobset(**spec)
    js["status"] = {
        "restarts": 1,
        "restartsCountTowardsMax": 1,
        "conditions": [
            {
                "type": "RestartingJobSet",
                "status": "True",
                "reason": "DefaultFailurePolicy",
                "message": RESTART_MESSAGE,
                "lastTransitionTime": "2026-01-01T11:00:00Z",
            }
        ],
    }
    return js


async def test_all_jobs_ready_ends_the_restart() -> None:
    jobs = three_jobs(
        restarts=1, **{n: READY for n in ("test-jobset-a-0", "test-jobset-b-0", "test-jobset-b-1")}
    )
    client, rec, events = setup(V0_12, after_restart(failurePolicy={"maxRestarts": 2}), *jobs)
    await rec.reconcile(REQ)
    assert restarting(await get_jobset(client)) == {
        "type": "RestartingJobSet",
        "status": "False",
        "reason": "JobsReady",
        "message": "all jobs are ready",
        "lastTransitionTime": "2026-01-01T12:00:00Z",
    }
    assert events.items == [("Normal", "JobsReady", "all jobs are ready")]


async def test_not_all_jobs_ready_keeps_restarting() -> None:
    jobs = three_jobs(restarts=1, **{"test-jobset-a-0": READY, "test-jobset-b-0": READY})
    client, rec, events = setup(V0_12, after_restart(failurePolicy={"maxRestarts": 2}), *jobs)
    await rec.reconcile(REQ)
    cond_ = restarting(await get_jobset(client))
    assert cond_ is not None and cond_["status"] == "True"
    assert events.items == []


async def test_completion_ends_the_restart_and_replaces_jobs_ready_keeping_its_time() -> None:
    js = after_restart(failurePolicy={"maxRestarts": 2})
    js["status"]["conditions"][0].update(
        status="False",
        reason="JobsReady",
        message="all jobs are ready",
        lastTransitionTime="2026-01-01T11:30:00Z",
    )
    jobs = three_jobs(restarts=1)
    for j in jobs:
        j["status"]["conditions"] = [cond("Complete")]
    client, rec, events = setup(V0_12, js, *jobs)
    await rec.reconcile(REQ)
    stored = await get_jobset(client)
    assert restarting(stored) == {
        "type": "RestartingJobSet",
        "status": "False",
        "reason": "JobSetCompleted",
        "message": "jobset completed successfully",
        "lastTransitionTime": "2026-01-01T11:30:00Z",
    }
    assert events.items == [
        ("Normal", "AllJobsCompleted", "jobset completed successfully"),
        ("Normal", "JobSetCompleted", "jobset completed successfully"),
    ]


async def test_failure_ends_the_restart() -> None:
    jobs = three_jobs(restarts=1)
    jobs[0]["status"]["conditions"] = failed()
    client, rec, events = setup(V0_12, after_restart(failurePolicy={"maxRestarts": 1}), *jobs)
    await rec.reconcile(REQ)
    stored = await get_jobset(client)
    cond_ = restarting(stored)
    assert cond_ is not None
    assert (cond_["status"], cond_["reason"], cond_["message"]) == ("False", "JobSetFailed", "jobset failed")
    assert [e[:2] for e in events.items] == [("Warning", "ReachedMaxRestarts"), ("Normal", "JobSetFailed")]
    assert events.items[1][2] == "jobset failed"


async def test_suspension_ends_the_restart() -> None:
    client, rec, events = setup(
        V0_12, after_restart(failurePolicy={"maxRestarts": 1}, suspend=True), *three_jobs(restarts=1)
    )
    await rec.reconcile(REQ)
    cond_ = restarting(await get_jobset(client))
    assert cond_ is not None
    assert (cond_["status"], cond_["reason"], cond_["message"]) == (
        "False",
        "JobSetSuspended",
        "jobset is suspended",
    )
    assert events.items == [
        ("Normal", "SuspendedJobs", "jobset is suspended"),
        ("Normal", "JobSetSuspended", "jobset is suspended"),
    ]


@pytest.mark.parametrize("steps", [V0_10, V0_12], ids=["v0.10.1", "v0.12.0"])
async def test_a_jobset_that_never_restarted_shows_no_restarting_condition(steps: ControllerSteps) -> None:
    jobs = three_jobs()
    for j in jobs:
        j["status"]["conditions"] = [cond("Complete")]
    client, rec, events = setup(steps, the_jobset(), *jobs)
    await rec.reconcile(REQ)
    stored = await get_jobset(client)
    assert [x["type"] for x in stored["status"]["conditions"]] == ["Completed"]
    assert events.items == [("Normal", "AllJobsCompleted", "jobset completed successfully")]


def test_the_same_status_with_a_new_message_is_kept_at_v0_10_and_replaced_at_v0_12() -> None:
    old = S.ConditionOpts("Suspended", "True", "SuspendedJobs", "old words", "Normal")
    for steps, message in ((V0_10, "old words"), (V0_12, "jobset is suspended")):
        js: Object = {}
        assert S.update_condition(js, old, EARLIER, steps) is True
        assert S.update_condition(js, S.suspended_condition(), NOW, steps) is (steps is V0_12)
        (only,) = js["status"]["conditions"]
        assert only["message"] == message
        assert only["lastTransitionTime"] == "2026-01-01T11:00:00Z"  # the transition time stays
        assert S.update_condition(js, S.suspended_condition(), NOW, steps) is False


# -- JobCreationFailed -----------------------------------------------------------------------------


async def test_every_failed_job_creation_is_announced_at_v0_12() -> None:
    client, rec, events = setup(V0_12, the_jobset())
    client.inject_error("create", Forbidden("exceeded quota: q", code=403), times=3)
    with pytest.raises(Exception, match="creation failed with error"):
        await rec.reconcile(REQ)
    assert [e[:2] for e in events.items] == [("Warning", "JobCreationFailed")]
    assert events.items[0][2] == 'job "test-jobset-a-0" creation failed with error: exceeded quota: q'


async def test_a_routine_failed_job_creation_is_not_announced_at_v0_10() -> None:
    client, rec, events = setup(V0_10, the_jobset())
    client.inject_error("create", Forbidden("exceeded quota: q", code=403), times=3)
    with pytest.raises(Exception, match="creation failed with error"):
        await rec.reconcile(REQ)
    assert events.items == []


# -- the Job index ---------------------------------------------------------------------------------


def test_the_job_index_is_the_jobsets_name_at_v0_10_and_its_uid_at_v0_12() -> None:
    j = owned(job("test-jobset-a-0", "a"))
    assert V0_10.job_owner_index(j) == ["test-jobset"]
    assert V0_12.job_owner_index(j) == [UID]
    assert V0_12.job_owner_key(the_jobset()) == UID
    other = owned(job("x", "a"))
    other["metadata"]["ownerReferences"][0]["kind"] = "Other"
    assert V0_12.job_owner_index(other) == []


async def test_v0_10_takes_a_job_an_earlier_jobset_of_the_name_left_for_its_own() -> None:
    left = owned(job("test-jobset-a-0", "a", conditions=failed()), uid="earlier-uid")
    client, rec, _ = setup(V0_10, the_jobset(), left)
    await rec.reconcile(REQ)
    js = await get_jobset(client)
    assert {s["name"]: s["failed"] for s in js["status"]["replicatedJobsStatus"]}["a"] == 1
    assert [x["type"] for x in js["status"]["conditions"]] == ["Failed"]


async def test_v0_12_does_not_see_a_job_an_earlier_jobset_of_the_name_left() -> None:
    left = owned(job("test-jobset-a-0", "a", conditions=failed()), uid="earlier-uid")
    client, rec, events = setup(V0_12, the_jobset(), left)
    # not its Job: the JobSet is not failed by it; its own Job of that name cannot be created
    # while the old one is there
    with pytest.raises(
        Exception, match=r'job "test-jobset-a-0" creation failed with error: .*already exists'
    ):
        await rec.reconcile(REQ)
    assert "status" not in await get_jobset(client)
    assert [e[1] for e in events.items] == ["JobCreationFailed"]
    assert client.names("Job") == ["test-jobset-a-0"]  # a refused rjob holds the later ones back


# -- volumeClaimPolicies ---------------------------------------------------------------------------


def claim(name: str, **meta: Any) -> Object:
    return {
        "metadata": {"name": name, **meta},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


POLICIES = [
    {
        "templates": [claim("shared", labels={"team": "a"}, annotations={"note": "x"})],
        "retentionPolicy": {"whenDeleted": "Delete"},
    },
    {"templates": [claim("kept"), claim("init")], "retentionPolicy": {"whenDeleted": "Retain"}},
    {"templates": [claim("nobody")]},
]


def mounting(*names: str, init: tuple[str, ...] = ()) -> Object:
    r = rjob("w", 1)
    pod = r["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["volumeMounts"] = [{"name": n, "mountPath": f"/{n}"} for n in names]
    if init:
        pod["initContainers"] = [
            {
                "name": "i",
                "image": "busybox",
                "volumeMounts": [{"name": n, "mountPath": f"/{n}"} for n in init],
            }
        ]
    return r


def test_the_pvcs_of_each_policy() -> None:
    js = jobset(mounting("shared"), uid=UID, volumeClaimPolicies=POLICIES)
    (deleted,), (kept, init), (nobody,) = volume_claims(js)
    assert deleted == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "shared-test-jobset",
            "namespace": "default",
            "labels": {"team": "a", c.JobSetNameKey: "test-jobset"},
            "annotations": {"note": "x"},
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": "test-jobset",
                    "uid": UID,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": POLICIES[0]["templates"][0]["spec"],  # type: ignore[index]
    }
    assert [p["metadata"]["name"] for p in (kept, init, nobody)] == [
        "kept-test-jobset",
        "init-test-jobset",
        "nobody-test-jobset",
    ]
    # Retain keeps the PVC after its JobSet; so does a policy without retentionPolicy (quirk)
    assert all("ownerReferences" not in p["metadata"] for p in (kept, init, nobody))
    assert V0_10.volume_claims(js) == []


def test_a_child_job_gets_the_claims_its_containers_mount() -> None:
    r = mounting("shared", "kept", init=("init",))
    r["template"]["spec"]["template"]["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    js = jobset(r, uid=UID, volumeClaimPolicies=POLICIES)
    built = construct_job(js, r, 0, V0_12)
    assert built["spec"]["template"]["spec"]["volumes"] == [
        {"name": "scratch", "emptyDir": {}},
        {"name": "shared", "persistentVolumeClaim": {"claimName": "shared-test-jobset"}},
        {"name": "kept", "persistentVolumeClaim": {"claimName": "kept-test-jobset"}},
        {"name": "init", "persistentVolumeClaim": {"claimName": "init-test-jobset"}},
    ]
    assert construct_job(js, r, 0, V0_10)["spec"]["template"]["spec"]["volumes"] == [
        {"name": "scratch", "emptyDir": {}}
    ]


async def test_the_reconcile_creates_the_pvcs_then_the_jobs_and_leaves_existing_pvcs() -> None:
    js = jobset(mounting("shared", "kept"), uid=UID, volumeClaimPolicies=POLICIES[:2])
    existing = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "kept-test-jobset", "namespace": "default"},
    }
    client, rec, events = setup(V0_12, js, existing)
    await rec.reconcile(REQ)
    assert client.names("PersistentVolumeClaim") == [
        "init-test-jobset",
        "kept-test-jobset",
        "shared-test-jobset",
    ]
    kept = client.stored("PersistentVolumeClaim", "kept-test-jobset")
    assert kept is not None and "labels" not in kept["metadata"]  # left as it was
    assert client.names("Job") == ["test-jobset-w-0"]
    assert events.items == []
    await rec.reconcile(REQ)  # the claims exist now: AlreadyExists is no error
    assert client.names("Job") == ["test-jobset-w-0"]


async def test_a_refused_pvc_is_announced_and_holds_the_jobs_back() -> None:
    js = jobset(mounting("shared"), uid=UID, volumeClaimPolicies=POLICIES[:1])
    client, rec, events = setup(V0_12, js)
    client.inject_error(
        "create", Forbidden('persistentvolumeclaims "shared-test-jobset" is forbidden: quota', code=403)
    )
    with pytest.raises(VolumeClaimError, match="is forbidden: quota"):
        await rec.reconcile(REQ)
    assert events.items == [
        ("Warning", "PVCCreationFailed", 'persistentvolumeclaims "shared-test-jobset" is forbidden: quota')
    ]
    assert client.names("Job") == []


async def test_an_already_existing_pvc_is_no_error() -> None:
    js = jobset(mounting("shared"), uid=UID, volumeClaimPolicies=POLICIES[:1])
    client, rec, events = setup(V0_12, js)
    client.inject_error("create", AlreadyExists("exists", code=409))
    await rec.reconcile(REQ)
    assert events.items == [] and client.names("Job") == ["test-jobset-w-0"]


class DeletedAfterTheRead(RecordingClient):
    """The JobSet is deleted (or replaced by a new one of its name) right after the pass read it:
    the TrainJob controller's deadline, the TTL, the garbage collector in the same moment."""

    def __init__(self, *objects: Any, replacement: Object | None = None) -> None:
        super().__init__(*objects)
        self.replacement = replacement
        self.reads = 0

    async def get(self, kind: Any, name: str, namespace: str = "") -> Any:
        result = await super().get(kind, name, namespace)
        if kind == JOBSET_GVK:
            self.reads += 1
            if self.reads == 1:
                await super().delete(result)
                if self.replacement is not None:
                    await super().create(self.replacement)
        return result


@pytest.mark.parametrize("replaced", [False, True], ids=["deleted", "replaced"])
async def test_no_pvc_and_no_job_for_a_jobset_deleted_during_the_pass(replaced: bool) -> None:
    js = jobset(mounting("shared"), uid=UID, volumeClaimPolicies=POLICIES[:1])
    newer = jobset(mounting("shared"), uid="jobset-uid-2", volumeClaimPolicies=POLICIES[:1])
    client, rec, events = setup(
        V0_12, client=DeletedAfterTheRead(js, replacement=newer if replaced else None)
    )
    await rec.reconcile(REQ)
    # no claim would outlive its JobSet until the garbage collector removes it, no Job starts Pods
    assert client.names("PersistentVolumeClaim") == []
    assert client.names("Job") == []
    assert events.items == []


async def test_a_jobset_deleted_after_its_claims_gets_no_jobs() -> None:
    js = jobset(mounting("shared"), uid=UID, volumeClaimPolicies=POLICIES[:1])
    client, rec, events = setup(V0_12, js)
    created = client.create

    async def create_then_delete_the_jobset(obj: Any, **kwargs: Any) -> Any:
        result = await created(obj, **kwargs)
        if obj.get("kind") == "PersistentVolumeClaim":
            await client.delete(js)
        return result

    client.create = create_then_delete_the_jobset  # type: ignore[method-assign]
    await rec.reconcile(REQ)
    assert client.names("PersistentVolumeClaim") == ["shared-test-jobset"]
    assert client.names("Job") == []
    assert events.items == []


# -- the Pod reconciler: the leader's own pods -----------------------------------------------------


def pod(name: str, owner_uid: str | None) -> Object:
    meta: Object = {"name": name, "namespace": "default"}
    if owner_uid is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": owner_uid, "controller": True}
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta}


def test_the_leaders_own_pods() -> None:
    leader, mine, stale = pod("l", "job-1"), pod("f1", "job-1"), pod("f2", "job-0")
    assert V0_12.leader_job_pods(leader, [leader, mine, stale]) == [leader, mine]
    assert V0_10.leader_job_pods(leader, [leader, mine, stale]) == [leader, mine, stale]
    with pytest.raises(PlacementError, match='leader pod "l" has no controller owner'):
        V0_12.leader_job_pods(pod("l", None), [mine])


async def test_the_pod_reconciler_reports_a_leader_without_owner_at_v0_12() -> None:
    leader = pod("js-r-0-0-abc", None)
    leader["metadata"]["labels"] = {c.JobKey: "k"}
    client = RecordingClient(leader)
    client.add_index(POD_GVK, POD_JOB_KEY, lambda p: [])
    with pytest.raises(Exception, match='leader pod "js-r-0-0-abc" has no controller owner'):
        await PodReconciler(client, V0_12).reconcile(Request("default", "js-r-0-0-abc"))


# -- the recorder ----------------------------------------------------------------------------------


class _Recorders:
    def __init__(self) -> None:
        self.asked: list[tuple[str, ...]] = []

    def event_recorder(self, component: str) -> Any:
        self.asked.append(("core/v1", component))
        return object()

    def events_recorder(self, component: str, action: str) -> Any:
        self.asked.append(("events.k8s.io/v1", component, action))
        return object()


def test_the_recorder_is_core_v1_at_v0_10_and_events_k8s_io_reconciling_at_v0_12() -> None:
    recorders = _Recorders()
    V0_10.event_recorder(recorders, "jobset")
    V0_12.event_recorder(recorders, "jobset")
    assert recorders.asked == [("core/v1", "jobset"), ("events.k8s.io/v1", "jobset", "Reconciling")]


async def test_a_suspended_jobset_whose_jobs_are_ready_ends_the_restart_as_suspended_only() -> None:
    names = ("test-jobset-a-0", "test-jobset-b-0", "test-jobset-b-1")
    jobs = three_jobs(restarts=1, **dict.fromkeys(names, READY))
    js = after_restart(failurePolicy={"maxRestarts": 1}, suspend=True)
    client, rec, events = setup(V0_12, js, *jobs)
    await rec.reconcile(REQ)
    cond_ = restarting(await get_jobset(client))
    assert cond_ is not None and cond_["reason"] == "JobSetSuspended"
    assert "JobsReady" not in [e[1] for e in events.items]  # ready only counts while running
