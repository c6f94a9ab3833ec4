"""The TrainJob reconciler at API level v2.3 (Trainer v2.3.0's trainjob_controller.go) on a fake
API: the managedBy early return, spec.activeDeadlineSeconds, the status merge patch and the
events.k8s.io recorder (docs/behaviour/trainer.md §12); v2.1 has the managedBy early return too
(divergence T-18), no deadline, PUTs the status and writes core/v1 Events."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from trainer_unit_fixtures import NOW, ClientReader, FakeRecorder, fake_client, rjob, runtime, trainjob

from manager.client.errors import Conflict, InternalError, NotFound
from manager.controller.reconcile import ReconcileError, Request
from manager.testing.fake import FakeClient
from trainer.controllers.trainjob import TrainJobReconciler
from trainer.runtime.levels import RuntimeLevel
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.levels.v2_3 import V2_3, is_managed_by_external_controller
from trainer.runtime.levels.v2_3_status import MergePatchStatus
from trainer.runtime.objects import JOBSET_GVK, TRAINJOB_GVK
from trainer.runtime.registry import new_runtimes

Json = dict[str, Any]
REQ = Request("default", "test-job")
CONTROLLER = "trainer.kubeflow.org/trainjob-controller"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"


def node_runtime() -> Json:
    return runtime(rjobs=[rjob("node", "trainer", [{"name": "node", "image": "runtime-image"}])])


async def setup(level: RuntimeLevel, *objects: Json) -> tuple[TrainJobReconciler, FakeClient]:
    client = fake_client(objects)
    runtimes = await new_runtimes(ClientReader(client), client, level=level)
    return TrainJobReconciler(client, runtimes, FakeRecorder(), now=lambda: NOW, level=level), client


@pytest.mark.parametrize(
    ("managed_by", "external"),
    [(None, False), (CONTROLLER, False), (MULTIKUEUE, True), ("", True), ("example.com/other", True)],
)
def test_managed_by_external_controller_unless_unset_or_the_trainers_own(
    managed_by: str | None, external: bool
) -> None:
    spec = {} if managed_by is None else {"managedBy": managed_by}
    assert is_managed_by_external_controller({"spec": spec}) is external
    assert V2_3.reconciles({"spec": spec}) is not external
    # level v2.1 too, though v2.1.0 reconciled every TrainJob (divergence T-18)
    assert V2_1.reconciles({"spec": spec}) is not external


async def test_v2_3_skips_a_trainjob_managed_by_multikueue_without_any_write() -> None:
    reconciler, client = await setup(V2_3, node_runtime(), trainjob(suspend=True, managedBy=MULTIKUEUE))
    assert await reconciler.reconcile(REQ) is None
    with pytest.raises(NotFound):
        await client.get(JOBSET_GVK, "test-job", "default")
    tj = await client.get(TRAINJOB_GVK, "test-job", "default")
    assert "status" not in tj
    assert client.requests.get("apply", 0) == 0


async def test_v2_3_reconciles_a_trainjob_of_its_own_controller() -> None:
    reconciler, client = await setup(V2_3, node_runtime(), trainjob(suspend=True, managedBy=CONTROLLER))
    await reconciler.reconcile(REQ)
    await client.get(JOBSET_GVK, "test-job", "default")
    tj = await client.get(TRAINJOB_GVK, "test-job", "default")
    assert [c["type"] for c in tj["status"]["conditions"]] == ["Suspended"]


async def test_v2_1_leaves_a_trainjob_managed_by_multikueue_alone_as_v2_3_does() -> None:
    """Divergence T-18: trainer v2.1.0 built (and ran) the JobSet of a MultiKueue TrainJob on the
    management cluster; level v2.1 here writes nothing, as v2.3.0."""
    reconciler, client = await setup(V2_1, node_runtime(), trainjob(suspend=True, managedBy=MULTIKUEUE))
    assert await reconciler.reconcile(REQ) is None
    with pytest.raises(NotFound):
        await client.get(JOBSET_GVK, "test-job", "default")
    assert "status" not in await client.get(TRAINJOB_GVK, "test-job", "default")
    assert client.requests.get("apply", 0) == 0


# -- spec.activeDeadlineSeconds ------------------------------------------------------------------

CREATED = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
DEADLINE_FAILED = {
    "type": "Failed",
    "status": "True",
    "reason": "DeadlineExceeded",
    "message": "TrainJob exceeded its active deadline",
}
SUSPENDED_TRUE = {
    "type": "Suspended",
    "status": "True",
    "reason": "Suspended",
    "message": "TrainJob is suspended",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}


def at(seconds: float) -> datetime.datetime:
    return CREATED + datetime.timedelta(seconds=seconds)


def deadline_job(seconds: int = 60, *, status: Json | None = None, **spec: Any) -> Json:
    tj = trainjob(activeDeadlineSeconds=seconds, status=status, **spec)
    tj["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    return tj


async def deadline_setup(
    level: RuntimeLevel, now_seconds: float, *objects: Json
) -> tuple[TrainJobReconciler, FakeClient]:
    reconciler, client = await setup(level, node_runtime(), *objects)
    reconciler.clock = lambda: at(now_seconds)
    return reconciler, client


def conditions(tj: Json) -> list[Json]:
    return [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in tj["status"]["conditions"]]


async def test_v2_3_requeues_a_running_trainjob_at_its_deadline_from_creation() -> None:
    reconciler, client = await deadline_setup(V2_3, 10.25, deadline_job(60))
    result = await reconciler.reconcile(REQ)
    assert result is not None and result.requeue_after == pytest.approx(49.75)
    await client.get(JOBSET_GVK, "test-job", "default")
    tj = await client.get(TRAINJOB_GVK, "test-job", "default")
    assert "status" not in tj or not tj["status"].get("conditions")


async def test_v2_3_fails_the_trainjob_and_deletes_its_jobset_once_the_deadline_passed() -> None:
    reconciler, client = await deadline_setup(V2_3, 10, deadline_job(60))
    await reconciler.reconcile(REQ)
    await client.get(JOBSET_GVK, "test-job", "default")
    reconciler.clock = lambda: at(60.5)
    assert await reconciler.reconcile(REQ) is None
    tj = await client.get(TRAINJOB_GVK, "test-job", "default")
    assert conditions(tj) == [DEADLINE_FAILED]
    assert tj["status"]["conditions"][0]["lastTransitionTime"] == NOW
    with pytest.raises(NotFound):
        await client.get(JOBSET_GVK, "test-job", "default")
    # the JobSet's delete event: a finished TrainJob without its JobSet keeps its status
    assert await reconciler.reconcile(REQ) is None
    assert conditions(await client.get(TRAINJOB_GVK, "test-job", "default")) == [DEADLINE_FAILED]


async def test_v2_3_a_stale_pass_after_the_deadline_keeps_the_jobset_deleted_and_jobs_status() -> None:
    # conformance `deadline`: the deleted JobSet's event can start a pass while the cache still
    # holds the TrainJob from before the DeadlineExceeded write; that pass took it for running,
    # applied the JobSet again (status-less) and the next pass emptied jobsStatus from it.
    reconciler, client = await deadline_setup(V2_3, 10, deadline_job(60))
    await reconciler.reconcile(REQ)
    jobset = await client.get(JOBSET_GVK, "test-job", "default")
    jobs = [{"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}]
    await client.status.update({**jobset, "status": {"replicatedJobsStatus": jobs}})
    await reconciler.reconcile(REQ)
    running = await client.get(TRAINJOB_GVK, "test-job", "default")
    assert running["status"]["jobsStatus"] == jobs
    reconciler.clock = lambda: at(60.5)
    await reconciler.reconcile(REQ)
    real_get = client.get

    async def lagging_get(kind: Any, name: str, namespace: str = "") -> Any:
        return running if getattr(kind, "kind", "") == "TrainJob" else await real_get(kind, name, namespace)

    client.get = lagging_get  # type: ignore[method-assign]
    client.requests.clear()
    assert await reconciler.reconcile(REQ) is None
    assert not client.requests, client.requests  # no apply, no delete, no status write
    client.get = real_get  # type: ignore[method-assign]
    with pytest.raises(NotFound):
        await client.get(JOBSET_GVK, "test-job", "default")
    assert await reconciler.reconcile(REQ) is None
    tj = await client.get(TRAINJOB_GVK, "test-job", "default")
    assert conditions(tj) == [DEADLINE_FAILED]
    assert tj["status"]["jobsStatus"] == jobs


async def test_v2_3_a_first_pass_past_the_deadline_builds_nothing_and_fails_the_trainjob() -> None:
    # found by the chaos suite: a TrainJob whose first pass came after its deadline (its reconcile
    # delayed by the faults) got its JobSet applied only to have it deleted at once; upstream does
    # that (objects first, deadline after). Here nothing is built: no snapshot, no JobSet.
    reconciler, client = await deadline_setup(V2_3, 90, deadline_job(60))
    assert await reconciler.reconcile(REQ) is None
    assert client.requests.get("apply", 0) == 0
    with pytest.raises(NotFound):
        await client.get(JOBSET_GVK, "test-job", "default")
    assert conditions(await client.get(TRAINJOB_GVK, "test-job", "default")) == [DEADLINE_FAILED]


async def test_v2_3_the_retry_of_a_failed_deadline_status_write_does_not_make_the_jobset_again() -> None:
    # found by the chaos suite (the JobSet of an expiring TrainJob made twice): the pass past the
    # deadline deleted the JobSet, its status write failed (a 500 of the API server), and the retry,
    # still reading a running TrainJob, applied the JobSet again before deleting it once more.
    reconciler, client = await deadline_setup(V2_3, 10, deadline_job(60))
    await reconciler.reconcile(REQ)
    await client.get(JOBSET_GVK, "test-job", "default")
    reconciler.clock = lambda: at(60.5)
    client.inject_error("status.patch", InternalError("an error on the server has prevented the request"))
    with pytest.raises(ReconcileError):
        await reconciler.reconcile(REQ)
    with pytest.raises(NotFound):
        await client.get(JOBSET_GVK, "test-job", "default")
    applies = client.requests.get("apply", 0)
    assert await reconciler.reconcile(REQ) is None
    assert client.requests.get("apply", 0) == applies  # the retry built nothing
    with pytest.raises(NotFound):
        await client.get(JOBSET_GVK, "test-job", "default")
    assert conditions(await client.get(TRAINJOB_GVK, "test-job", "default")) == [DEADLINE_FAILED]


async def test_v2_3_a_resume_past_the_old_deadline_builds_the_jobset() -> None:
    # the clock restarts at the resume: a pass that resumes a TrainJob created long ago builds it
    job = deadline_job(60, status={"conditions": [SUSPENDED_TRUE]})
    reconciler, client = await deadline_setup(V2_3, 3600, job)
    result = await reconciler.reconcile(REQ)
    assert result is not None and result.requeue_after == pytest.approx(60)
    await client.get(JOBSET_GVK, "test-job", "default")


async def test_v2_3_a_failed_delete_of_the_jobset_at_the_deadline_is_retried_until_it_is_gone() -> None:
    # the chaos suite at level v2.3: an expiring TrainJob ended Failed/DeadlineExceeded with its
    # JobSet still there 300 s later. Upstream deletes the JobSet once and only logs a failure; the
    # TrainJob, now finished, is never looked at again and its JobSet's pods run on.
    reconciler, client = await deadline_setup(V2_3, 10, deadline_job(60))
    await reconciler.reconcile(REQ)
    reconciler.clock = lambda: at(60.5)
    client.inject_error("delete", InternalError("an error on the server has prevented the request"))
    with pytest.raises(ReconcileError, match="an error on the server"):
        await reconciler.reconcile(REQ)
    assert conditions(await client.get(TRAINJOB_GVK, "test-job", "default")) == [DEADLINE_FAILED]
    await client.get(JOBSET_GVK, "test-job", "default")  # still there
    # the retry: a finished TrainJob failed by its deadline keeps no JobSet
    assert await reconciler.reconcile(REQ) is None
    with pytest.raises(NotFound):
        await client.get(JOBSET_GVK, "test-job", "default")
    assert conditions(await client.get(TRAINJOB_GVK, "test-job", "default")) == [DEADLINE_FAILED]


async def test_v2_3_a_jobset_made_after_the_deadline_failure_is_deleted_by_the_next_pass() -> None:
    # a write of the JobSet that lands after the TrainJob failed on its deadline (an apply in
    # flight when its leader died): the JobSet's create event brings the finished TrainJob back
    reconciler, client = await deadline_setup(V2_3, 90, deadline_job(60))
    await reconciler.reconcile(REQ)
    tj = await client.get(TRAINJOB_GVK, "test-job", "default")
    assert conditions(tj) == [DEADLINE_FAILED]
    owner = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "test-job"}
    late = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "test-job",
            "namespace": "default",
            "ownerReferences": [owner | {"uid": tj["metadata"]["uid"], "controller": True}],
        },
        "spec": {"replicatedJobs": []},
    }
    await client.create(late)
    client.requests.clear()
    assert await reconciler.reconcile(REQ) is None
    with pytest.raises(NotFound):
        await client.get(JOBSET_GVK, "test-job", "default")
    assert client.requests.get("delete") == 1
    assert client.requests.get("status.patch", 0) == 0  # the status stays as it was
    # a JobSet of that name the TrainJob does not control is not its to delete
    await client.create({**late, "metadata": {"name": "test-job", "namespace": "default"}})
    assert await reconciler.reconcile(REQ) is None
    await client.get(JOBSET_GVK, "test-job", "default")


async def test_v2_3_deadline_due_but_not_past_requeues_after_one_second() -> None:
    reconciler, _ = await deadline_setup(V2_3, 60, deadline_job(60))
    result = await reconciler.reconcile(REQ)
    assert result is not None and result.requeue_after == 1.0


async def test_v2_3_the_clock_does_not_run_while_suspended() -> None:
    reconciler, client = await deadline_setup(V2_3, 3600, deadline_job(60, suspend=True))
    assert await reconciler.reconcile(REQ) is None
    tj = await client.get(TRAINJOB_GVK, "test-job", "default")
    assert [c["type"] for c in tj["status"]["conditions"]] == ["Suspended"]


async def test_v2_3_a_resume_in_this_reconcile_restarts_the_clock_at_the_precise_time() -> None:
    job = deadline_job(60, status={"conditions": [SUSPENDED_TRUE]})
    reconciler, client = await deadline_setup(V2_3, 3600.5, job)
    result = await reconciler.reconcile(REQ)
    assert result is not None and result.requeue_after == pytest.approx(60)
    tj = await client.get(TRAINJOB_GVK, "test-job", "default")
    assert conditions(tj) == [{**RESUMED_FIELDS}]


RESUMED_FIELDS = {
    "type": "Suspended",
    "status": "False",
    "reason": "Resumed",
    "message": "TrainJob is resumed",
}


async def test_v2_3_the_clock_runs_from_the_last_resume() -> None:
    resumed = {**RESUMED_FIELDS, "lastTransitionTime": "2026-01-01T00:01:40Z"}  # at(100)
    job = deadline_job(60, status={"conditions": [resumed]})
    reconciler, client = await deadline_setup(V2_3, 150, job)
    result = await reconciler.reconcile(REQ)
    assert result is not None and result.requeue_after == pytest.approx(10)
    reconciler.clock = lambda: at(161)
    assert await reconciler.reconcile(REQ) is None
    tj = await client.get(TRAINJOB_GVK, "test-job", "default")
    assert DEADLINE_FAILED in conditions(tj)


async def test_v2_3_the_deadline_failure_survives_the_jobsets_own_failed_condition() -> None:
    failed = {**DEADLINE_FAILED, "lastTransitionTime": "2026-01-01T00:01:00Z"}
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "test-job", "namespace": "default"},
        "spec": {},
        "status": {
            "conditions": [
                {"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "jobset failed"}
            ]
        },
    }
    reconciler, client = await deadline_setup(
        V2_3, 300, deadline_job(60, status={"conditions": [failed]}), jobset
    )
    assert await reconciler.reconcile(REQ) is None
    tj = await client.get(TRAINJOB_GVK, "test-job", "default")
    assert tj["status"]["conditions"] == [failed]


async def test_v2_3_without_a_creation_time_or_deadline_nothing_is_scheduled() -> None:
    reconciler, _ = await deadline_setup(V2_3, 10, trainjob(activeDeadlineSeconds=60))
    assert await reconciler.reconcile(REQ) is None
    reconciler, _ = await deadline_setup(V2_3, 10, deadline_job(0))
    assert await reconciler.reconcile(REQ) is None


async def test_v2_1_has_no_active_deadline() -> None:
    reconciler, client = await deadline_setup(V2_1, 3600, deadline_job(60))
    assert await reconciler.reconcile(REQ) is None
    await client.get(JOBSET_GVK, "test-job", "default")


# -- status by merge patch, events through events.k8s.io ---------------------------------------------

COND_A = {
    "type": "Suspended",
    "status": "True",
    "reason": "Suspended",
    "message": "m",
    "lastTransitionTime": NOW,
}
COND_B = {**DEADLINE_FAILED, "lastTransitionTime": NOW}


def test_the_v2_3_status_patch_carries_only_what_changed_as_go_encodes_it() -> None:
    write = V2_3.status_write
    assert isinstance(write, MergePatchStatus)
    jobs = [{"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}]
    assert write.patch({"conditions": [COND_A]}, {"conditions": [COND_A, COND_B]}) == {
        "status": {"conditions": [COND_A, COND_B]}
    }
    assert write.patch({"conditions": [COND_A], "jobsStatus": jobs}, {"conditions": [COND_A]}) == {
        "status": {"jobsStatus": None}
    }
    # v2.3.0's status is omitzero: an emptied status goes away ({} is refused by minProperties: 1)
    assert write.patch({"conditions": [COND_A]}, {}) == {"status": None}
    assert write.patch({}, {"conditions": [COND_A]}) == {"status": {"conditions": [COND_A]}}


async def test_v2_3_writes_the_status_with_a_merge_patch_without_a_resource_version() -> None:
    reconciler, client = await setup(V2_3, node_runtime(), trainjob(suspend=True))
    sent: list[tuple[Json, Any]] = []
    patch = client.status.patch

    async def spy(obj: Any, p: Any, **kwargs: Any) -> Any:
        sent.append((obj, p))
        return await patch(obj, p, **kwargs)

    client.status.patch = spy  # type: ignore[method-assign]
    await reconciler.reconcile(REQ)
    assert client.requests.get("update", 0) == 0
    ((_, sent_patch),) = sent
    assert sent_patch.content_type == "application/merge-patch+json"
    assert sent_patch.data == {"status": {"conditions": [{**SUSPENDED_TRUE, "lastTransitionTime": NOW}]}}
    tj = await client.get(TRAINJOB_GVK, "test-job", "default")
    assert conditions(tj) == [{k: v for k, v in SUSPENDED_TRUE.items() if k != "lastTransitionTime"}]


async def test_v2_3_status_patch_from_a_stale_copy_is_not_refused() -> None:
    client = fake_client([trainjob(suspend=True)])
    stale = await client.get(TRAINJOB_GVK, "test-job", "default")
    await client.update({**stale, "metadata": {**stale["metadata"], "labels": {"newer": "yes"}}})
    status = {"conditions": [COND_A]}
    await V2_3.status_write.write(client, stale, {}, status, "trainer")
    assert (await client.get(TRAINJOB_GVK, "test-job", "default"))["status"] == status
    with pytest.raises(Conflict):
        await V2_1.status_write.write(client, stale, {}, status, "trainer")


class Recorders:
    def __init__(self) -> None:
        self.asked: list[tuple[str, ...]] = []

    def event_recorder(self, component: str) -> Any:
        self.asked.append(("core/v1", component))
        return FakeRecorder()

    def events_recorder(self, component: str, action: str) -> Any:
        self.asked.append(("events.k8s.io/v1", component, action))
        return FakeRecorder()


def test_v2_3_reports_through_events_k8s_io_with_upstreams_action_and_v2_1_through_core_v1() -> None:
    recorders = Recorders()
    V2_3.trainjob_event_recorder(recorders, "trainer-trainjob-controller")
    V2_1.trainjob_event_recorder(recorders, "trainer-trainjob-controller")
    assert recorders.asked == [
        ("events.k8s.io/v1", "trainer-trainjob-controller", "Reconciling"),
        ("core/v1", "trainer-trainjob-controller"),
    ]
