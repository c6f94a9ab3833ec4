"""TrainJob reconciler steps on a fake API (docs/behaviour/trainer.md §3.2-§3.4)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from trainer_unit_fixtures import (
    NOW,
    ClientReader,
    FakeRecorder,
    fake_client,
    rjob,
    runtime,
    trainjob,
)

from manager.client.errors import InternalError
from manager.controller.event import CreateEvent, DeleteEvent, GenericEvent, UpdateEvent
from manager.controller.reconcile import ReconcileError, Request
from manager.testing.fake import FakeClient
from trainer.controllers.conditions import remove_failed_condition, set_suspended_condition
from trainer.controllers.trainjob import TrainJobReconciler, creation_failed_message, notifying_predicate
from trainer.runtime.objects import JOBSET_GVK, TRAINJOB_GVK
from trainer.runtime.registry import new_runtimes

Json = dict[str, Any]
REQ = Request("default", "test-job")
SUSPENDED = {"type": "Suspended", "status": "True", "reason": "Suspended", "message": "TrainJob is suspended"}
RESUMED = {"type": "Suspended", "status": "False", "reason": "Resumed", "message": "TrainJob is resumed"}
FAILED_JOBS = {
    "type": "Failed",
    "status": "True",
    "reason": "FailedJobs",
    "message": "jobset failed due to one or more job failures",
    "lastTransitionTime": "2025-01-01T00:00:00Z",
}


def node_runtime() -> Json:
    return runtime(rjobs=[rjob("node", "trainer", [{"name": "node", "image": "runtime-image"}])])


async def setup(*objects: Json) -> tuple[TrainJobReconciler, FakeClient, FakeRecorder]:
    client = fake_client(objects)
    recorder = FakeRecorder()
    runtimes = await new_runtimes(ClientReader(client), client)
    return TrainJobReconciler(client, runtimes, recorder, now=lambda: NOW), client, recorder


async def stored_trainjob(client: FakeClient) -> Json:
    tj: Json = await client.get(TRAINJOB_GVK, "test-job", "default")
    return tj


def without_times(conditions: list[Json]) -> list[Json]:
    return [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in conditions]


async def test_suspended_trainjob_gets_its_jobset_and_the_suspended_condition() -> None:
    reconciler, client, recorder = await setup(node_runtime(), trainjob(suspend=True))
    assert await reconciler.reconcile(REQ) is None
    jobset = await client.get(JOBSET_GVK, "test-job", "default")
    assert jobset["spec"]["suspend"] is True
    assert jobset["metadata"]["ownerReferences"][0]["name"] == "test-job"
    assert client.requests["apply"] == 1
    tj = await stored_trainjob(client)
    assert tj["status"]["conditions"] == [{**SUSPENDED, "lastTransitionTime": NOW}]
    assert recorder.events == []


async def test_running_steady_trainjob_causes_no_writes() -> None:
    reconciler, client, _ = await setup(node_runtime(), trainjob())
    await reconciler.reconcile(REQ)
    jobset = await client.get(JOBSET_GVK, "test-job", "default")
    jobs = [{"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}]
    jobset["status"] = {"replicatedJobsStatus": jobs}
    await client.status.update(jobset)
    await reconciler.reconcile(REQ)
    assert (await stored_trainjob(client))["status"] == {"jobsStatus": jobs}
    writes = client.writes
    await reconciler.reconcile(REQ)
    await reconciler.reconcile(REQ)
    assert client.writes == writes  # the running JobSet is not re-applied, the status is unchanged


async def test_never_suspended_trainjob_has_no_suspended_condition() -> None:
    reconciler, client, _ = await setup(node_runtime(), trainjob())
    await reconciler.reconcile(REQ)
    assert "status" not in await stored_trainjob(client)
    assert client.requests["status.update"] == 0


async def test_unsupported_runtime_is_persisted_as_failed() -> None:
    # Upstream panics after setting the condition and never writes it (divergence).
    tj = trainjob(group="example.com", kind="Foo")
    reconciler, client, recorder = await setup(tj)
    with pytest.raises(ReconcileError, match=r"^unsupported runtime: Foo\.example\.com$"):
        await reconciler.reconcile(REQ)
    stored = await stored_trainjob(client)
    assert stored["status"]["conditions"] == [
        {
            "type": "Failed",
            "status": "True",
            "reason": "TrainingRuntimeNotSupported",
            "message": "unsupported runtime: Foo.example.com",
            "lastTransitionTime": NOW,
        }
    ]
    assert recorder.events == []
    # retries of a TrainJob that stays unsupported write nothing (no hot loop on its own events)
    reconciler.now = lambda: "2026-02-02T00:00:00Z"
    writes = client.writes
    with pytest.raises(ReconcileError):
        await reconciler.reconcile(REQ)
    assert client.writes == writes


async def test_missing_runtime_emits_a_warning_and_retries() -> None:
    reconciler, client, recorder = await setup(trainjob(suspend=True))
    with pytest.raises(ReconcileError) as err:
        await reconciler.reconcile(REQ)
    [event] = recorder.events
    assert (event.type, event.reason) == ("Warning", "TrainJobResourcesCreationFailed")
    assert event.message == (
        'TrainJob resources reconciliation failed: TrainingRuntime specified in TrainJob is not found: TrainingRuntime.trainer.kubeflow.org "test-runtime" not found'
    )
    # the status step fails too (no JobSet), but the Suspended condition is still written
    assert str(err.value).splitlines()[0].startswith("TrainingRuntime specified in TrainJob is not found")
    assert str(err.value).splitlines()[1].endswith('JobSet.jobset.x-k8s.io "test-job" not found')
    assert without_times((await stored_trainjob(client))["status"]["conditions"]) == [
        {k: v for k, v in SUSPENDED.items()}
    ]


async def test_apply_failure_is_reported() -> None:
    reconciler, client, recorder = await setup(node_runtime(), trainjob())
    client.inject_error("apply", InternalError("etcd is down"))
    with pytest.raises(ReconcileError, match="etcd is down"):
        await reconciler.reconcile(REQ)
    [event] = recorder.events
    assert event.message == "TrainJob resources reconciliation failed: etcd is down"


def test_event_message_is_cut_at_950_characters() -> None:
    prefix = "TrainJob resources reconciliation failed: "
    assert creation_failed_message("x" * 950) == prefix + "x" * 950
    assert creation_failed_message("x" * 951) == prefix + "x" * 950 + " ..."


COMPLETED = {
    "type": "Complete",
    "status": "True",
    "reason": "AllJobsCompleted",
    "message": "jobset completed successfully",
    "lastTransitionTime": "2025-01-01T00:00:00Z",
}


@pytest.mark.parametrize("terminal", [FAILED_JOBS, COMPLETED], ids=["failed", "complete"])
async def test_finished_trainjob_whose_jobset_is_gone_gets_no_new_jobset(terminal: Json) -> None:
    # Upstream v2.1.0 drops Failed, re-applies the JobSet and runs the training again (#3737, #3779).
    jobs = [{"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}]
    status = {"conditions": [{**RESUMED, "lastTransitionTime": NOW}, terminal], "jobsStatus": jobs}
    reconciler, client, recorder = await setup(node_runtime(), trainjob(status=status))
    assert await reconciler.reconcile(REQ) is None  # no NotFound error, no retry loop
    assert await client.list(JOBSET_GVK, namespace="default") == []
    assert client.writes == 0
    assert (await stored_trainjob(client))["status"] == status
    assert recorder.events == []


async def test_running_trainjob_whose_jobset_is_deleted_gets_it_back() -> None:
    reconciler, client, _ = await setup(node_runtime(), trainjob())
    await reconciler.reconcile(REQ)
    first = await client.get(JOBSET_GVK, "test-job", "default")
    await client.delete(first)
    await reconciler.reconcile(REQ)
    again = await client.get(JOBSET_GVK, "test-job", "default")
    assert again["metadata"]["uid"] != first["metadata"]["uid"]
    assert again["metadata"]["ownerReferences"][0]["name"] == "test-job"


async def test_finished_trainjob_still_mirrors_its_existing_jobset() -> None:
    reconciler, client, _ = await setup(node_runtime(), trainjob())
    await reconciler.reconcile(REQ)
    jobset = await client.get(JOBSET_GVK, "test-job", "default")
    jobs = [{"name": "node", "ready": 0, "succeeded": 0, "failed": 1, "active": 0, "suspended": 0}]
    jobset["status"] = {
        "conditions": [{**FAILED_JOBS, "observedGeneration": 3}],
        "replicatedJobsStatus": jobs,
    }
    await client.status.update(jobset)
    await reconciler.reconcile(REQ)
    status = (await stored_trainjob(client))["status"]
    assert status == {"conditions": [{**FAILED_JOBS, "observedGeneration": 3}], "jobsStatus": jobs}
    applies = client.requests["apply"]
    await reconciler.reconcile(REQ)
    assert client.requests["apply"] == applies  # a finished TrainJob is never re-applied


async def test_deleted_trainjob_is_done() -> None:
    reconciler, client, _ = await setup(node_runtime())
    assert await reconciler.reconcile(REQ) is None
    assert client.writes == 0


def test_suspended_condition_rules() -> None:
    status: Json = {}
    set_suspended_condition({"spec": {}}, status, lambda: NOW)
    assert status == {}
    set_suspended_condition({"spec": {"suspend": True}}, status, lambda: NOW)
    assert status["conditions"] == [{**SUSPENDED, "lastTransitionTime": NOW}]
    set_suspended_condition({"spec": {"suspend": False}}, status, lambda: "later")
    assert status["conditions"] == [{**RESUMED, "lastTransitionTime": "later"}]
    set_suspended_condition({"spec": {"suspend": False}}, status, lambda: "even-later")
    assert status["conditions"] == [{**RESUMED, "lastTransitionTime": "later"}]


def test_remove_failed_condition() -> None:
    status: Json = {"conditions": [FAILED_JOBS]}
    remove_failed_condition(status)
    assert status == {}


class _Watcher:
    def __init__(self) -> None:
        self.calls: list[tuple[Json | None, Json | None]] = []

    def notify_trainjob_update(self, old: Json | None, new: Json | None) -> None:
        self.calls.append((old, new))


def test_every_trainjob_event_passes_and_notifies_the_watchers() -> None:
    watcher = _Watcher()
    predicate = notifying_predicate([watcher])
    old, new = {"metadata": {"name": "old"}}, {"metadata": {"name": "new"}}
    assert predicate.create(CreateEvent(new))
    assert predicate.update(UpdateEvent(old, new))
    assert predicate.delete(DeleteEvent(old))
    assert predicate.generic(GenericEvent(new))
    assert watcher.calls == [(None, new), (old, new), (old, None)]


async def test_apply_of_an_unserved_kind_is_reported_like_any_apply_error() -> None:
    from manager.client.restmapper import NoKindMatch

    reconciler, client, recorder = await setup(node_runtime(), trainjob())
    client.inject_error("apply", NoKindMatch(JOBSET_GVK))
    with pytest.raises(
        ReconcileError, match=r'no matches for kind "JobSet" in version "jobset.x-k8s.io/v1alpha2"'
    ):
        await reconciler.reconcile(REQ)
    [event] = recorder.events
    assert event.reason == "TrainJobResourcesCreationFailed"


class LaggingReader(ClientReader):
    """A cache that has not seen any JobSet yet (its watch event is still on the way)."""

    lagging = True

    async def get(self, gvk: Any, name: str, namespace: str = "") -> Json:
        if self.lagging and gvk == JOBSET_GVK:
            from manager.testing.fake import _not_found

            raise _not_found(gvk, name)
        return await super().get(gvk, name, namespace)


async def test_jobset_not_yet_in_the_cache_after_its_apply_is_no_error() -> None:
    client = fake_client([node_runtime(), trainjob(suspend=True)])
    reader = LaggingReader(client)
    reconciler = TrainJobReconciler(
        client, await new_runtimes(reader, client), FakeRecorder(), now=lambda: NOW
    )
    # no ReconcileError (no back-off): the JobSet's own watch event brings the TrainJob back
    assert await reconciler.reconcile(REQ) is None
    assert (await client.get(JOBSET_GVK, "test-job", "default"))["spec"]["suspend"] is True
    assert (await stored_trainjob(client))["status"]["conditions"] == [
        {**SUSPENDED, "lastTransitionTime": NOW}
    ]
    # the watch event: the cache now has the JobSet and its status is mirrored as usual
    jobset = await client.get(JOBSET_GVK, "test-job", "default")
    jobs = [{"name": "node", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 1}]
    jobset["status"] = {"replicatedJobsStatus": jobs}
    await client.status.update(jobset)
    reader.lagging = False
    assert await reconciler.reconcile(REQ) is None
    assert (await stored_trainjob(client))["status"]["jobsStatus"] == jobs


async def test_jobset_missing_without_an_apply_is_still_an_error() -> None:
    # a failed apply leaves nothing to wait for: the missing JobSet stays an error (retried)
    client = fake_client([node_runtime(), trainjob(suspend=True)])
    reconciler = TrainJobReconciler(
        client, await new_runtimes(LaggingReader(client), client), FakeRecorder(), now=lambda: NOW
    )
    client.inject_error("apply", InternalError("etcd is down"))
    with pytest.raises(ReconcileError, match='jobsets "test-job" not found'):
        await reconciler.reconcile(REQ)


async def test_status_conflict_from_a_stale_cached_trainjob_is_no_error() -> None:
    from manager.client.errors import Conflict

    reconciler, client, _ = await setup(node_runtime(), trainjob(suspend=True))
    client.inject_error("status.update", Conflict("the object has been modified", code=409))
    # the newer TrainJob's watch event brings it back: no error, no back-off
    assert await reconciler.reconcile(REQ) is None
    assert "status" not in await stored_trainjob(client)
    assert await reconciler.reconcile(REQ) is None
    assert (await stored_trainjob(client))["status"]["conditions"] == [
        {**SUSPENDED, "lastTransitionTime": NOW}
    ]


async def test_state_is_written_only_with_the_trainjob_state_gate() -> None:
    from trainer import features

    reconciler, client, _ = await setup(node_runtime(), trainjob(suspend=True))
    await reconciler.reconcile(REQ)
    assert "state" not in (await stored_trainjob(client))["status"]  # gate off: v2.1's status
    with features.override(features.TrainJobState, True):
        await reconciler.reconcile(REQ)
        assert (await stored_trainjob(client))["status"]["state"] == "Suspended"
        current = await stored_trainjob(client)
        current["spec"]["suspend"] = False
        await client.update(current)
        await reconciler.reconcile(REQ)
        resumed = (await stored_trainjob(client))["status"]
        # upstream's column (last condition's type) would still read Suspended here
        assert [c["type"] for c in resumed["conditions"]] == ["Suspended"]
        assert resumed["state"] == "Pending"
        jobset = await client.get(JOBSET_GVK, "test-job", "default")
        jobs = [{"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}]
        jobset["status"] = {"replicatedJobsStatus": jobs}
        await client.status.update(jobset)
        await reconciler.reconcile(REQ)
        assert (await stored_trainjob(client))["status"]["state"] == "Running"
        jobset = await client.get(JOBSET_GVK, "test-job", "default")
        jobset["status"] = {"conditions": [FAILED_JOBS], "replicatedJobsStatus": jobs}
        await client.status.update(jobset)
        await reconciler.reconcile(REQ)
        assert (await stored_trainjob(client))["status"]["state"] == "Failed"
    await reconciler.reconcile(REQ)  # gate off again: the field goes, it cannot go stale
    assert "state" not in (await stored_trainjob(client))["status"]


def recording_status_updates(client: FakeClient) -> list[Json]:
    sent: list[Json] = []
    update = client.status.update

    async def recording_update(obj: Any, **kwargs: Any) -> Any:
        sent.append(copy.deepcopy(obj))
        return await update(obj, **kwargs)

    client.status.update = recording_update  # type: ignore[method-assign]
    return sent


async def test_an_empty_status_is_left_out_of_the_go_encoded_put() -> None:
    # Go would send status: {} (rejected by the CRD's minProperties: 1, T-11); the PUT omits it.
    # (A status holding only a state written while the TrainJobState gate was on empties once the
    # gate is off; a Failed TrainJob no longer loses its condition: finished stays finished.)
    reconciler, client, _ = await setup(node_runtime(), trainjob(status={"state": "Pending"}))
    sent = recording_status_updates(client)
    stored = await stored_trainjob(client)
    assert await reconciler.update_status_if_changed(stored, {"state": "Pending"}, {}) is None
    (body,) = sent
    assert "status" not in body
    assert "status" not in await stored_trainjob(client)


async def test_unchanged_jobset_is_not_applied_again() -> None:
    # A JobSet status change brings the TrainJob back; the apply document is the same and the
    # cached JobSet holds every field of it: no PATCH (upstream sends a no-op apply each time).
    reconciler, client, _ = await setup(node_runtime(), trainjob(suspend=True))
    await reconciler.reconcile(REQ)
    assert client.requests["apply"] == 1
    jobset = await client.get(JOBSET_GVK, "test-job", "default")
    jobset["status"] = {"replicatedJobsStatus": [{"name": "node", "ready": 0, "succeeded": 0}]}
    await client.status.update(jobset)
    await reconciler.reconcile(REQ)
    await reconciler.reconcile(REQ)
    assert client.requests["apply"] == 1


async def test_jobset_changed_by_another_writer_is_applied_again() -> None:
    # (a suspended TrainJob's JobSet: a running one is never re-applied, as upstream)
    reconciler, client, _ = await setup(node_runtime(), trainjob(suspend=True))
    await reconciler.reconcile(REQ)
    jobset = await client.get(JOBSET_GVK, "test-job", "default")
    jobset["metadata"]["labels"] = {**(jobset["metadata"].get("labels") or {}), "other": "x"}
    await client.update(jobset)
    await reconciler.reconcile(REQ)
    assert client.requests["apply"] == 1  # a field we do not set: still unchanged for us
    jobset = await client.get(JOBSET_GVK, "test-job", "default")
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["image"] = "someone-else"  # a field we set, changed by another writer
    await client.update(jobset)
    await reconciler.reconcile(REQ)
    assert client.requests["apply"] == 2  # taken back
    again = await client.get(JOBSET_GVK, "test-job", "default")
    assert (
        again["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["image"]
        == "runtime-image"
    )


async def test_trainjob_spec_change_applies_again() -> None:
    reconciler, client, _ = await setup(node_runtime(), trainjob(suspend=True))
    await reconciler.reconcile(REQ)
    tj = await stored_trainjob(client)
    tj["spec"]["suspend"] = False
    await client.update(tj)
    await reconciler.reconcile(REQ)
    assert client.requests["apply"] == 2
    assert (await client.get(JOBSET_GVK, "test-job", "default"))["spec"]["suspend"] is False


async def test_a_pass_on_a_trainjob_older_than_our_status_write_does_nothing() -> None:
    # The JobSet's event can start a pass before the TrainJob's MODIFIED event of our status
    # write reached the cache: that PUT would be a 409 (docs/divergences.md, "Hot paths").
    reconciler, client, _ = await setup(node_runtime(), trainjob(suspend=True))
    before_write = copy.deepcopy(await stored_trainjob(client))
    await reconciler.reconcile(REQ)
    assert client.requests["status.update"] == 1
    real_get = client.get

    async def lagging_get(kind: Any, name: str, namespace: str = "") -> Any:
        if getattr(kind, "kind", "") == "TrainJob":
            return copy.deepcopy(before_write)
        return await real_get(kind, name, namespace)

    client.get = lagging_get  # type: ignore[method-assign]
    applies = client.requests["apply"]
    await reconciler.reconcile(REQ)
    assert client.requests["status.update"] == 1  # no PUT with the old resourceVersion
    assert client.requests["apply"] == applies  # nor anything else decided from the old copy
    client.get = real_get  # type: ignore[method-assign]
    client.requests.clear()
    await reconciler.reconcile(REQ)
    assert client.requests["status.update"] == 0, client.requests
    assert without_times((await stored_trainjob(client))["status"]["conditions"]) == [
        {k: v for k, v in SUSPENDED.items() if k != "lastTransitionTime"}
    ]
