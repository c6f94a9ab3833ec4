"""The reconcile loop on the framework's FakeClient: Service (6.E), writes, events, flows."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from jsfixtures import (
    NOW,
    Events,
    RecordingClient,
    cond,
    failed,
    get_jobset,
    job,
    jobset,
    reconciler,
    rjob,
    ts,
)
from prometheus_client import CollectorRegistry

from manager import Request, Result
from manager.client.errors import Conflict, Forbidden, InternalError, Invalid, NotFound
from manager.meta.gvk import JOB as JOB_GVK
from manager.scheme import GroupVersionKind
from trainer.api import jobset_constants as c
from trainer.controllers.jobset.metrics import JobSetMetrics
from trainer.controllers.jobset.reconciler import (
    JOBSET_GVK,
    OWNER_NOT_YET_SEEN_RETRY,
    JobCreationError,
    JobSetReconciler,
    merge_pod_template,
)

Object = dict[str, Any]
REQ = Request("default", "test-jobset")


def dns(subdomain: str | None = None, publish: bool | None = None) -> Object:
    net: Object = {"enableDNSHostnames": True}
    if subdomain is not None:
        net["subdomain"] = subdomain
    if publish is not None:
        net["publishNotReadyAddresses"] = publish
    return net


def service(name: str) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {},
    }


# -- 6.E headless Service -----------------------------------------------------------------------


async def test_existing_service_is_not_created() -> None:  # spec: jobset 6.E.1
    client = RecordingClient(jobset(network=dns()), service("test-jobset"))
    rec, _, _ = reconciler(client)
    await rec.create_headless_svc_if_necessary(jobset(network=dns()))
    assert client.requests["create"] == 0


async def test_service_create_error_is_returned_and_announced() -> None:  # spec: jobset 6.E.2
    client = RecordingClient()
    client.inject_error("create", InternalError("unexpected error", code=500))
    rec, events, _ = reconciler(client)
    with pytest.raises(InternalError, match=r"unexpected error"):
        await rec.create_headless_svc_if_necessary(jobset(network=dns()))
    assert events.items == [("Warning", "HeadlessServiceCreationFailed", "unexpected error")]


async def test_an_invalid_job_template_is_announced_on_the_jobset() -> None:
    # docs/divergences.md J-11: a Job the API server refuses as invalid cannot be created by a
    # retry; the user sees a JobCreationFailed Warning on the JobSet, not only a log line.
    client = RecordingClient()
    client.inject_error("create", Invalid('Job.batch "test-jobset-w-0" is invalid: name: bad', code=422))
    rec, events, _ = reconciler(client)
    with pytest.raises(JobCreationError, match="creation failed with error"):
        await rec.create_jobs([job("test-jobset-w-0", "w")], jobset())
    assert events.items == [
        (
            "Warning",
            "JobCreationFailed",
            'job "test-jobset-w-0" creation failed with error: Job.batch "test-jobset-w-0" is invalid: name: bad',
        )
    ]


async def test_a_routine_job_create_refusal_is_only_retried() -> None:
    # a namespace being terminated, a quota: routine, retried with back-off, no event (upstream)
    client = RecordingClient()
    client.inject_error("create", Forbidden("unable to create new content in namespace default", code=403))
    rec, events, _ = reconciler(client)
    with pytest.raises(JobCreationError):
        await rec.create_jobs([job("test-jobset-w-0", "w")], jobset())
    assert events.items == []


async def test_service_literal() -> None:  # spec: jobset 6.E.3
    client = RecordingClient()
    rec, _, _ = reconciler(client)
    await rec.create_headless_svc_if_necessary(jobset(network=dns()))
    assert client.names("Service") == ["test-jobset"]
    created = client.created[0]
    for server_field in ("uid", "resourceVersion", "generation", "creationTimestamp"):
        created["metadata"].pop(server_field)
    assert created == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "test-jobset",
            "namespace": "default",
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": "test-jobset",
                    "uid": "",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {"jobset.sigs.k8s.io/jobset-name": "test-jobset"},
            "publishNotReadyAddresses": True,
        },
    }


async def test_service_named_by_subdomain() -> None:  # spec: jobset 6.E.4
    client = RecordingClient()
    rec, _, _ = reconciler(client)
    await rec.create_headless_svc_if_necessary(jobset(network=dns("test-subdomain")))
    assert client.names("Service") == ["test-subdomain"]


@pytest.mark.parametrize("publish", [False, True])  # spec: jobset 6.E.5 / spec: jobset 6.E.6
async def test_service_publish_not_ready(publish: bool) -> None:
    client = RecordingClient()
    rec, _, _ = reconciler(client)
    await rec.create_headless_svc_if_necessary(jobset(network=dns(publish=publish)))
    assert client.stored("Service", "test-jobset")["spec"]["publishNotReadyAddresses"] is publish  # type: ignore[index]


async def test_no_service_without_dns() -> None:
    client = RecordingClient()
    rec, _, _ = reconciler(client)
    await rec.create_headless_svc_if_necessary(jobset(network={"enableDNSHostnames": False}))
    await rec.create_headless_svc_if_necessary(jobset())
    assert client.requests["create"] == 0 and client.requests["get"] == 0


# -- whole reconciles ---------------------------------------------------------------------------


def two_rjobs(**spec: Any) -> Object:
    return jobset(rjob("a", 1), rjob("b", 2), **spec)


async def test_first_reconcile_creates_jobs_service_and_status_then_steady_state_writes_nothing() -> None:
    client = RecordingClient(two_rjobs(network=dns(), successPolicy={"operator": "All"}))
    rec, events, _ = reconciler(client)
    await rec.reconcile(REQ)
    assert client.names("Job") == ["test-jobset-a-0", "test-jobset-b-0", "test-jobset-b-1"]
    assert client.names("Service") == ["test-jobset"]
    stored = await get_jobset(client)
    assert stored["status"] == {
        "restarts": 0,
        "replicatedJobsStatus": [
            {"name": "b", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0},
            {"name": "a", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0},
        ],
    }
    assert events.items == []
    client.requests.clear()
    for _ in range(3):
        await rec.reconcile(REQ)
    assert client.writes == 0, client.requests


async def test_deleting_jobset_is_left_alone() -> None:
    js = two_rjobs()
    js["metadata"]["deletionTimestamp"] = ts(NOW)
    client = RecordingClient(js)
    rec, _, _ = reconciler(client)
    await rec.reconcile(REQ)
    assert client.writes == 0


async def test_missing_jobset_is_done() -> None:
    rec, _, _ = reconciler(RecordingClient())
    assert await rec.reconcile(REQ) is None


async def test_managed_by_other_controller_is_skipped() -> None:
    client = RecordingClient(two_rjobs(managedBy="example.com/other"))
    rec, _, _ = reconciler(client)
    await rec.reconcile(REQ)
    assert client.writes == 0
    client2 = RecordingClient(two_rjobs(managedBy=c.JobSetControllerName))
    rec2, _, _ = reconciler(client2)
    await rec2.reconcile(REQ)
    assert len(client2.names("Job")) == 3


async def test_failed_job_without_policy_fails_then_finished_path_deletes_active() -> None:
    client = RecordingClient(
        two_rjobs(),
        job("test-jobset-a-0", "a", conditions=failed("BackoffLimitExceeded", "boom")),
        job("test-jobset-b-0", "b"),
        job("test-jobset-b-1", "b", conditions=[cond("Complete")]),
    )
    rec, events, metrics = reconciler(client)
    await rec.reconcile(REQ)
    stored = await get_jobset(client)
    assert stored["status"]["terminalState"] == "Failed"
    assert [(x["type"], x["reason"]) for x in stored["status"]["conditions"]] == [("Failed", "FailedJobs")]
    assert events.items == [
        (
            "Warning",
            "FailedJobs",
            "jobset failed due to one or more job failures (first failed job: test-jobset-a-0)",
        )
    ]
    assert metrics.failed.labels("test-jobset", "default")._value.get() == 1
    assert client.requests["create"] == 0
    await rec.reconcile(REQ)
    assert client.deletes == [("Job", "test-jobset-b-0", "Foreground")]


async def test_restart_then_previous_jobs_deleted_and_recreated() -> None:
    client = RecordingClient(
        two_rjobs(failurePolicy={"maxRestarts": 1}),
        job("test-jobset-a-0", "a", conditions=failed()),
        job("test-jobset-b-0", "b"),
        job("test-jobset-b-1", "b"),
    )
    rec, events, _ = reconciler(client)
    await rec.reconcile(REQ)
    stored = await get_jobset(client)
    assert stored["status"]["restarts"] == 1 and stored["status"]["restartsCountTowardsMax"] == 1
    assert events.items == [
        (
            "Warning",
            "RestartJobSetFailurePolicyAction",
            "applying RestartJobSet failure policy action (first failed job: test-jobset-a-0)",
        )
    ]
    assert client.requests["create"] == 0  # never restart and create in the same pass
    await rec.reconcile(REQ)
    assert sorted(d[1] for d in client.deletes) == ["test-jobset-a-0", "test-jobset-b-0", "test-jobset-b-1"]
    assert all(d[2] == "Foreground" for d in client.deletes)
    # Names taken by the snapshot are not recreated in the pass that deletes them ...
    assert client.names("Job") == []
    # ... the next pass sees them gone (the fake has no finalizers) and recreates at attempt 1.
    await rec.reconcile(REQ)
    assert client.names("Job") == ["test-jobset-a-0", "test-jobset-b-0", "test-jobset-b-1"]
    assert {client.stored("Job", n)["metadata"]["labels"][c.RestartsKey] for n in client.names("Job")} == {
        "1"
    }  # type: ignore[index]


async def test_blocking_recreate_waits_while_previous_jobs_terminate() -> None:
    js = two_rjobs(failurePolicy={"maxRestarts": 1, "restartStrategy": "BlockingRecreate"})
    js["status"] = {"restarts": 1, "restartsCountTowardsMax": 1}
    client = RecordingClient(js, job("test-jobset-a-0", "a", restarts=0, deleting=True))
    rec, _, _ = reconciler(client)
    await rec.reconcile(REQ)
    assert client.names("Job") == ["test-jobset-a-0"]
    assert client.deletes == []  # already terminating: not deleted again


async def test_success_policy_completes_and_stops() -> None:
    client = RecordingClient(
        two_rjobs(successPolicy={"operator": "Any"}),
        job("test-jobset-b-1", "b", conditions=[cond("Complete")]),
    )
    rec, events, metrics = reconciler(client)
    await rec.reconcile(REQ)
    stored = await get_jobset(client)
    assert stored["status"]["terminalState"] == "Completed"
    assert events.items == [("Normal", "AllJobsCompleted", "jobset completed successfully")]
    assert client.requests["create"] == 0
    assert metrics.completed.labels("test-jobset", "default")._value.get() == 1


async def test_status_conflict_drops_events_and_waits_for_the_newer_jobset() -> None:
    client = RecordingClient(
        two_rjobs(successPolicy={"operator": "Any"}),
        job("test-jobset-b-1", "b", conditions=[cond("Complete")]),
    )
    client.inject_error("status.update", Conflict("conflict", code=409))
    rec, events, _ = reconciler(client)
    # the newer JobSet's watch event reconciles again: no error, no back-off
    assert await rec.reconcile(REQ) is None
    assert events.items == []
    # that next pass writes the status and records the events
    await rec.reconcile(REQ)
    assert (await get_jobset(client))["status"]["terminalState"] == "Completed"
    assert events.items == [("Normal", "AllJobsCompleted", "jobset completed successfully")]


async def test_a_jobset_deleted_before_its_status_write_is_no_error() -> None:
    # docs/divergences.md J-1: the garbage collector deleted it (its TrainJob went) while the
    # pass ran; upstream returns the NotFound as a reconcile error, the delete event follows.
    client = RecordingClient(two_rjobs())
    client.inject_error(
        "status.update", NotFound('jobsets.jobset.x-k8s.io "test-jobset" not found', code=404)
    )
    rec, events, _ = reconciler(client)
    assert await rec.reconcile(REQ) is None
    assert events.items == []


async def test_suspended_first_reconcile_counts_the_jobs_it_created_in_its_one_status_write() -> None:
    # Upstream writes suspended 0 here and 1 on the pass the Jobs' watch events cause; we write
    # what that pass would, once (docs/divergences.md, "Hot paths").
    client = RecordingClient(two_rjobs(suspend=True))
    rec, events, _ = reconciler(client)
    await rec.reconcile(REQ)
    assert client.names("Job") == ["test-jobset-a-0", "test-jobset-b-0", "test-jobset-b-1"]
    stored = await get_jobset(client)
    assert stored["status"]["replicatedJobsStatus"] == [
        {"name": "b", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 2},
        {"name": "a", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 1},
    ]
    assert client.requests["status.update"] == 1
    assert events.items == [("Normal", "SuspendedJobs", "jobset is suspended")]
    client.requests.clear()
    await rec.reconcile(REQ)  # what the Jobs' watch events cause: nothing left to write
    assert client.writes == 0, client.requests


async def test_events_are_emitted_without_waiting_for_their_write() -> None:
    import asyncio

    from prometheus_client import CollectorRegistry

    from manager.events import EventRecorder
    from trainer.controllers.jobset.metrics import JobSetMetrics
    from trainer.controllers.jobset.reconciler import JobSetReconciler

    gate = asyncio.Event()

    class SlowEvents(RecordingClient):
        async def create(self, obj: Any, **kwargs: Any) -> Any:
            if obj.get("kind") == "Event":
                await gate.wait()
            return await super().create(obj, **kwargs)

    client = SlowEvents(two_rjobs(suspend=True))
    recorder = EventRecorder(client, component="jobset")
    rec = JobSetReconciler(client, recorder, now=lambda: NOW, metrics=JobSetMetrics(CollectorRegistry()))
    await asyncio.wait_for(rec.reconcile(REQ), 5)  # returns with the Event's POST still blocked
    assert client.names("Event") == []
    assert (await get_jobset(client))["status"]["conditions"][0]["reason"] == "SuspendedJobs"
    gate.set()
    await recorder.flush(5)
    [event] = [o for o in client.created if o["kind"] == "Event"]
    assert (event["type"], event["reason"], event["message"]) == (
        "Normal",
        "SuspendedJobs",
        "jobset is suspended",
    )
    assert event["involvedObject"]["name"] == "test-jobset"


async def test_a_pass_on_a_jobset_older_than_our_status_write_skips_the_write_it_would_lose() -> None:
    # The Job's ADDED event can start a pass before the JobSet's MODIFIED event of our status
    # write reached the cache: that PUT would be a 409 (docs/divergences.md, "Hot paths").
    import copy

    class LaggingCache(RecordingClient):
        stale: Object | None = None

        async def get(self, kind: Any, name: str, namespace: str = "") -> Any:
            if self.stale is not None and getattr(kind, "kind", "") == "JobSet":
                return copy.deepcopy(self.stale)
            return await super().get(kind, name, namespace)

    client = LaggingCache(two_rjobs(suspend=True))
    before_write = await get_jobset(client)
    rec, events, _ = reconciler(client)
    await rec.reconcile(REQ)
    assert client.requests["status.update"] == 1 and len(rec.status_writes) == 1
    client.stale = before_write  # the cache has not seen our write yet
    await rec.reconcile(REQ)
    assert client.requests["status.update"] == 1  # no PUT with the old resourceVersion
    assert events.items == [("Normal", "SuspendedJobs", "jobset is suspended")]  # nor its event again
    client.stale = None  # our write's watch event: the cache caught up
    client.requests.clear()
    await rec.reconcile(REQ)
    assert client.writes == 0, client.requests
    assert len(rec.status_writes) == 0


async def test_a_job_already_listed_is_not_counted_twice() -> None:
    client = RecordingClient(two_rjobs(suspend=True), job("test-jobset-b-0", "b", suspend=True))
    rec, _, _ = reconciler(client)
    await rec.reconcile(REQ)
    assert client.requests["create"] == 2
    statuses = (await get_jobset(client))["status"]["replicatedJobsStatus"]
    assert [s["suspended"] for s in statuses] == [2, 1]


async def test_inner_error_skips_status_write() -> None:
    client = RecordingClient(two_rjobs())
    client.inject_error("create", InternalError("nope", code=500))
    rec, _, _ = reconciler(client)
    with pytest.raises(Exception, match=r'job "test-jobset-a-0" creation failed with error: nope'):
        await rec.reconcile(REQ)
    assert client.requests["status.update"] == 0


async def test_suspend_updates_active_jobs_and_sets_condition() -> None:
    client = RecordingClient(two_rjobs(suspend=True), job("test-jobset-a-0", "a", suspend=False))
    rec, events, _ = reconciler(client)
    await rec.reconcile(REQ)
    assert client.stored("Job", "test-jobset-a-0")["spec"]["suspend"] is True  # type: ignore[index]
    assert client.stored("Job", "test-jobset-b-0")["spec"]["suspend"] is True  # type: ignore[index]
    assert ("Normal", "SuspendedJobs", "jobset is suspended") in events.items
    assert client.requests["patch"] == 0


async def test_resume_clears_start_time_merges_template_and_unsuspends() -> None:
    js = jobset(rjob("a", 1, pod_labels={"new": "l"}))
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "z1"}
    js["status"] = {"conditions": [cond("Suspended", reason="SuspendedJobs", message="jobset is suspended")]}
    suspended = job("test-jobset-a-0", "a", suspend=True, status={"startTime": ts(NOW)})
    suspended["spec"]["template"]["metadata"] = {"labels": {"old": "x"}}
    client = RecordingClient(js, suspended)
    rec, events, _ = reconciler(client)
    await rec.reconcile(REQ)
    stored = client.stored("Job", "test-jobset-a-0")
    assert stored is not None
    assert stored["spec"]["suspend"] is False
    assert "startTime" not in stored["status"]
    assert stored["spec"]["template"]["metadata"]["labels"] == {"old": "x", "new": "l"}
    assert stored["spec"]["template"]["spec"]["nodeSelector"] == {"zone": "z1"}
    assert client.requests["status.update"] == 2  # the Job's startTime, then the JobSet
    assert events.items == [("Normal", "ResumeJobs", "jobset is resumed")]
    assert (await get_jobset(client))["status"]["conditions"][0]["status"] == "False"


@pytest.mark.parametrize("verb", ["update", "status.update"])
async def test_a_stale_child_job_ends_the_pass_without_error_and_the_next_resumes_it(verb: str) -> None:
    # docs/divergences.md J-1: the job controller wrote the Job (its status) after the cache saw
    # it, so resuming it is refused with a Conflict. Upstream returns the error (a logged
    # "Reconciler error" and a back-off); the Job's newer version reconciles again anyway.
    js = jobset(rjob("a", 1))
    js["status"] = {"conditions": [cond("Suspended", reason="SuspendedJobs", message="jobset is suspended")]}
    client = RecordingClient(js, job("test-jobset-a-0", "a", suspend=True, status={"startTime": ts(NOW)}))
    client.inject_error(verb, Conflict("the object has been modified", code=409))
    rec, events, _ = reconciler(client)
    assert await rec.reconcile(REQ) is None  # no error: no back-off, no "Reconciler error"
    assert events.items == []  # the pass ended before its status write, its events dropped
    assert (await get_jobset(client))["status"]["conditions"][0]["status"] == "True"
    await rec.reconcile(REQ)  # the Job's watch event
    assert client.stored("Job", "test-jobset-a-0")["spec"]["suspend"] is False  # type: ignore[index]
    assert events.items == [("Normal", "ResumeJobs", "jobset is resumed")]


async def test_a_stale_child_job_while_suspending_ends_the_pass_without_error() -> None:
    client = RecordingClient(two_rjobs(suspend=True), job("test-jobset-a-0", "a", suspend=False))
    client.inject_error("update", Conflict("the object has been modified", code=409))
    rec, events, _ = reconciler(client)
    assert await rec.reconcile(REQ) is None
    assert events.items == [] and client.requests["status.update"] == 0
    await rec.reconcile(REQ)
    assert client.stored("Job", "test-jobset-a-0")["spec"]["suspend"] is True  # type: ignore[index]
    assert ("Normal", "SuspendedJobs", "jobset is suspended") in events.items


async def test_never_suspended_jobset_gets_no_suspended_condition() -> None:
    client = RecordingClient(two_rjobs())
    rec, _, _ = reconciler(client)
    await rec.reconcile(REQ)
    assert "conditions" not in (await get_jobset(client))["status"]


async def test_in_order_creates_one_rjob_at_a_time() -> None:
    client = RecordingClient(two_rjobs(startupPolicy={"startupPolicyOrder": "InOrder"}))
    rec, events, _ = reconciler(client)
    await rec.reconcile(REQ)
    assert client.names("Job") == ["test-jobset-a-0"]
    assert events.items == [
        ("Normal", "InOrderStartupPolicyInProgress", "in order startup policy is in progress")
    ]
    a0 = client.stored("Job", "test-jobset-a-0")
    assert a0 is not None
    a0["status"] = {"ready": 1, "active": 1}
    await rec.reconcile(REQ)
    assert client.names("Job") == ["test-jobset-a-0", "test-jobset-b-0", "test-jobset-b-1"]
    for name in ("test-jobset-b-0", "test-jobset-b-1"):
        client.stored("Job", name)["status"] = {"ready": 1, "active": 1}  # type: ignore[index]
    await rec.reconcile(REQ)
    conditions = {x["type"]: x["status"] for x in (await get_jobset(client))["status"]["conditions"]}
    assert conditions == {"StartupPolicyInProgress": "False", "StartupPolicyCompleted": "True"}


async def test_depends_on_waits_for_dependency() -> None:
    js = jobset(rjob("a", 1), rjob("b", 2, depends_on=[{"name": "a", "status": "Complete"}]))
    client = RecordingClient(js)
    rec, _, _ = reconciler(client)
    await rec.reconcile(REQ)
    assert client.names("Job") == ["test-jobset-a-0"]
    client.stored("Job", "test-jobset-a-0")["status"] = {"conditions": [cond("Complete")], "succeeded": 1}  # type: ignore[index]
    await rec.reconcile(REQ)  # statuses are written first ...
    await rec.reconcile(REQ)
    assert client.names("Job") == ["test-jobset-a-0", "test-jobset-b-0", "test-jobset-b-1"]


async def test_ttl_deletes_finished_jobset_or_requeues() -> None:
    js = two_rjobs(ttlSecondsAfterFinished=5)
    js["status"] = {"conditions": [cond("Completed", when=NOW)], "terminalState": "Completed"}
    client = RecordingClient(js)
    rec, _, _ = reconciler(client)
    result = await rec.reconcile(REQ)
    assert result is not None and result.requeue_after == 5
    import datetime

    rec.now = lambda: NOW + datetime.timedelta(seconds=6)
    await rec.reconcile(REQ)
    assert ("JobSet", "test-jobset", "Foreground") in client.deletes


async def test_bad_restart_attempt_label_aborts() -> None:
    bad = job("test-jobset-a-0", "a")
    bad["metadata"]["labels"][c.RestartsKey] = "x"
    client = RecordingClient(two_rjobs(), bad)
    rec, _, _ = reconciler(client)
    with pytest.raises(ValueError, match=r"invalid syntax"):
        await rec.reconcile(REQ)
    assert client.writes == 0


async def test_jobs_listed_through_owner_index_only() -> None:
    other = job("other-a-0", "a", js_name="other")
    client = RecordingClient(two_rjobs(), other)
    rec, _, _ = reconciler(client)
    owned = await rec.get_child_jobs(two_rjobs())
    assert owned.active == []
    assert client.requests["list"] == 1
    assert (await client.list(JOB_GVK, field_selector={".metadata.controller": "other"}))[0]["metadata"][
        "name"
    ] == "other-a-0"


def test_merge_pod_template_union_rules() -> None:
    existing = {
        "spec": {
            "template": {
                "metadata": {"labels": {"a": "1", "b": "1"}},
                "spec": {
                    "tolerations": [{"key": "k", "operator": "Exists"}],
                    "schedulingGates": [{"name": "g1"}],
                },
            }
        }
    }
    template = {
        "metadata": {"labels": {"b": "2"}, "annotations": {"x": "y"}},
        "spec": {
            "nodeSelector": {"n": "1"},
            "tolerations": [{"key": "k", "operator": "Exists"}, {"key": "k2", "operator": "Exists"}],
            "schedulingGates": [{"name": "g2"}],
        },
    }
    merge_pod_template(existing, template)
    assert existing["spec"]["template"] == {
        "metadata": {"labels": {"a": "1", "b": "2"}, "annotations": {"x": "y"}},
        "spec": {
            "nodeSelector": {"n": "1"},
            "tolerations": [{"key": "k", "operator": "Exists"}, {"key": "k2", "operator": "Exists"}],
            "schedulingGates": [{"name": "g1"}, {"name": "g2"}],
        },
    }


async def test_setup_skips_when_the_crd_is_not_served() -> None:
    from types import SimpleNamespace

    from manager.client.restmapper import NoKindMatch
    from trainer.controllers.jobset import setup
    from trainer.runtime.context import SetupContext

    class Mapper:
        async def mapping(self, gvk: Any) -> Any:
            raise NoKindMatch(gvk)

    class Untouchable:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"setup touched the manager's {name} although the CRD is absent")

    mgr = SimpleNamespace(mapper=Mapper(), client=Untouchable(), cache=Untouchable(), cluster=Untouchable())
    assert await setup(SetupContext(mgr)) is False  # type: ignore[arg-type]


async def test_creates_and_deletes_run_in_parallel_at_most_50() -> None:
    import asyncio

    class Counting(RecordingClient):
        def __init__(self, *objects: Any) -> None:
            super().__init__(*objects)
            self.current = self.peak = 0

        async def _track(self) -> None:
            self.current += 1
            self.peak = max(self.peak, self.current)
            for _ in range(5):
                await asyncio.sleep(0)
            self.current -= 1

        async def create(self, obj: Any, **kwargs: Any) -> Any:
            await self._track()
            return await super().create(obj, **kwargs)

        async def delete(self, obj: Any, **kwargs: Any) -> None:
            await self._track()
            await super().delete(obj, **kwargs)

    client = Counting(jobset(rjob("wide", 120)))
    rec, _, _ = reconciler(client)
    await rec.reconcile(REQ)
    assert len(client.names("Job")) == 120
    assert client.peak == 50
    client.peak = 0
    await rec.delete_jobs([client.stored("Job", n) for n in client.names("Job")])  # type: ignore[misc]
    assert client.names("Job") == [] and client.peak == 50


async def test_status_update_sends_the_jobset_as_go_reencodes_it() -> None:
    # Upstream's r.Status().Update(ctx, js) PUTs the whole typed struct: every field Go always
    # writes is in the body (here the Job templates' metadata and the pod templates' metadata).
    client = RecordingClient(two_rjobs())
    sent: list[Object] = []
    update = client.status.update

    async def recording_update(obj: Any, **kwargs: Any) -> Any:
        sent.append(obj)
        return await update(obj, **kwargs)

    client.status.update = recording_update  # type: ignore[method-assign]
    rec, _, _ = reconciler(client)
    await rec.reconcile(REQ)
    assert len(sent) == 1
    body = sent[0]
    for replicated in body["spec"]["replicatedJobs"]:
        assert replicated["template"]["metadata"] == {}
        assert replicated["template"]["spec"]["template"]["metadata"] == {}
    assert body["status"]["restarts"] == 0


class LaggingCache(RecordingClient):
    """Reads see no Job and no Service yet (their watch events are on the way); writes are live."""

    async def list(self, gvk: Any, **kwargs: Any) -> Any:
        return [] if gvk == JOB_GVK else await super().list(gvk, **kwargs)

    async def get(self, gvk: Any, name: str, namespace: str | None = None) -> Any:
        if gvk.kind in ("Job", "Service"):
            from manager.testing.fake import _not_found

            raise _not_found(gvk, name)
        return await super().get(gvk, name, namespace)


async def test_jobs_and_service_not_yet_in_the_cache_are_no_error() -> None:
    client = LaggingCache(two_rjobs(network=dns()))
    rec, events, _ = reconciler(client)
    await rec.reconcile(REQ)
    assert client.names("Job") == ["test-jobset-a-0", "test-jobset-b-0", "test-jobset-b-1"]
    # the JobSet's status event comes back before the Jobs' and the Service's: the creates meet
    # AlreadyExists for our own objects, which is cache lag: no error, no Warning event
    assert await rec.reconcile(REQ) is None
    assert events.items == []
    assert client.names("Job") == ["test-jobset-a-0", "test-jobset-b-0", "test-jobset-b-1"]


async def test_job_of_the_same_name_owned_by_another_jobset_is_still_an_error() -> None:
    foreign = job("test-jobset-a-0", "a", js_name="other")
    foreign["metadata"]["ownerReferences"] = [
        {"apiVersion": c.API_VERSION, "kind": "JobSet", "name": "other", "uid": "other", "controller": True}
    ]
    client = RecordingClient(jobset(rjob("a", 1), uid="mine"), foreign)
    rec, _, _ = reconciler(client)
    with pytest.raises(Exception, match='job "test-jobset-a-0" creation failed with error'):
        await rec.reconcile(REQ)


class OwnerLookupWebhook(RecordingClient):
    """Job creates pass an admission webhook that looks the owning JobSet up (Kueue's
    ``mjob.kb.io``): refused NotFound once the JobSet is gone from the API server."""

    def __init__(self, *objs: Any) -> None:
        super().__init__(*objs)
        self.jobset_deleted = False

    async def create(self, obj: Any, **kwargs: Any) -> Any:
        if obj["kind"] == "Job" and self.jobset_deleted:
            from manager.testing.fake import _not_found

            raise _not_found(JOBSET_GVK, "test-jobset")
        return await super().create(obj, **kwargs)


async def test_job_create_refused_not_found_after_the_jobset_was_deleted_is_no_error() -> None:
    cached = RecordingClient(jobset(rjob("a", 1), uid="mine"))  # the cache still holds the JobSet
    live = OwnerLookupWebhook()  # the API server no longer does
    live.jobset_deleted = True
    cached.create = live.create  # type: ignore[method-assign]
    events = Events()
    rec = JobSetReconciler(
        cached, events, now=lambda: NOW, metrics=JobSetMetrics(CollectorRegistry()), api_reader=live
    )
    assert await rec.reconcile(REQ) is None
    assert events.items == []


async def test_job_create_refused_naming_the_jobset_that_exists_is_a_quiet_retry() -> None:
    """The webhook's cache has not seen the JobSet we were just handed (Kueue's mjob.kb.io in the
    Kueue e2e suite, once our JobSet webhook answered from its own process): no error, no event,
    the pass ends and the JobSet is tried again in a moment; then its Jobs are created."""
    client = OwnerLookupWebhook(jobset(rjob("a", 1), uid="mine"))
    client.jobset_deleted = True  # the webhook does not find it, the API server does
    rec, events, _ = reconciler(client)
    assert await rec.reconcile(REQ) == Result(requeue_after=OWNER_NOT_YET_SEEN_RETRY)
    assert events.items == []
    assert client.names("Job") == []
    client.jobset_deleted = False  # the webhook's cache caught up
    await rec.reconcile(REQ)
    assert client.names("Job") == ["test-jobset-a-0"]


async def test_job_create_refused_not_found_naming_something_else_is_still_an_error() -> None:
    class QueueLookupWebhook(RecordingClient):
        async def create(self, obj: Any, **kwargs: Any) -> Any:
            if obj["kind"] == "Job":
                from manager.testing.fake import _not_found

                raise _not_found(GroupVersionKind("kueue.x-k8s.io", "v1beta2", "LocalQueue"), "user-queue")
            return await super().create(obj, **kwargs)

    rec, _, _ = reconciler(QueueLookupWebhook(jobset(rjob("a", 1), uid="mine")))
    with pytest.raises(JobCreationError, match='job "test-jobset-a-0" creation failed with error'):
        await rec.reconcile(REQ)


# -- an MPI-shaped JobSet (success policy on the launcher only) whose launcher wins the race -------
# What the chaos run's "missing node Job" was: upstream's finished path, not a lost trigger.


def mpi_shaped() -> Object:
    return jobset(
        rjob("launcher", 1),
        rjob("node", 1),
        successPolicy={"operator": "All", "targetReplicatedJobs": ["launcher"]},
    )


def finish(client: RecordingClient, name: str) -> None:
    stored = client.stored("Job", name)
    assert stored is not None
    stored["status"] = {"conditions": [cond("SuccessCriteriaMet"), cond("Complete")], "succeeded": 1}


async def test_launcher_done_while_node_active_completes_the_jobset_and_deletes_the_node() -> None:
    client = RecordingClient(mpi_shaped())
    rec, events, _ = reconciler(client)
    await rec.reconcile(REQ)
    assert client.names("Job") == ["test-jobset-launcher-0", "test-jobset-node-0"]
    finish(client, "test-jobset-launcher-0")  # KWOK ran the launcher's pod faster than the node's
    await rec.reconcile(REQ)
    stored = await get_jobset(client)
    assert [(x["type"], x["status"]) for x in stored["status"]["conditions"]] == [("Completed", "True")]
    assert ("Normal", "AllJobsCompleted", "jobset completed successfully") in events.items
    await rec.reconcile(REQ)  # the finished path: active Jobs go, with foreground propagation
    assert client.deletes == [("Job", "test-jobset-node-0", "Foreground")]
    assert client.names("Job") == ["test-jobset-launcher-0"]
    await rec.reconcile(REQ)  # and the finished JobSet never creates it again
    assert client.names("Job") == ["test-jobset-launcher-0"]


async def test_node_create_failed_and_launcher_done_before_the_retry_completes_without_the_node() -> None:
    client = RecordingClient(mpi_shaped())
    rec, _, _ = reconciler(client)
    original = client.create

    async def create(obj: Any, **kwargs: Any) -> Any:
        if obj["kind"] == "Job" and obj["metadata"]["name"].endswith("-node-0"):
            raise InternalError("the answer was lost", code=500)  # a dropped or refused create
        return await original(obj, **kwargs)

    client.create = create  # type: ignore[method-assign]
    with pytest.raises(Exception, match='job "test-jobset-node-0" creation failed'):
        await rec.reconcile(REQ)
    assert client.names("Job") == ["test-jobset-launcher-0"]
    client.create = original  # type: ignore[method-assign]
    finish(client, "test-jobset-launcher-0")  # the retry comes after the launcher finished
    await rec.reconcile(REQ)
    stored = await get_jobset(client)
    assert [(x["type"], x["status"]) for x in stored["status"]["conditions"]] == [("Completed", "True")]
    await rec.reconcile(REQ)
    assert client.names("Job") == ["test-jobset-launcher-0"]


class OverlapClient(RecordingClient):
    """Each create waits (up to 2 s) until a create of the other kind has started."""

    def __init__(self, *objects: Any, fail_service: bool = False) -> None:
        super().__init__(*objects)
        self.started: dict[str, asyncio.Event] = {"Service": asyncio.Event(), "Job": asyncio.Event()}
        self.waited: list[tuple[str, bool]] = []
        self.fail_service = fail_service

    async def create(self, obj: Any, **kwargs: Any) -> Any:
        kind = obj["kind"]
        self.started[kind].set()
        other = self.started["Job" if kind == "Service" else "Service"]
        try:
            await asyncio.wait_for(other.wait(), 2)
            self.waited.append((kind, True))
        except TimeoutError:
            self.waited.append((kind, False))
        if kind == "Service" and self.fail_service:
            raise InternalError("unexpected error", code=500)
        return await super().create(obj, **kwargs)


async def test_service_and_jobs_are_created_side_by_side() -> None:
    # docs/divergences.md J-12: one round trip less per new JobSet on its worker.
    client = OverlapClient(jobset(rjob("w", 2), network=dns()))
    rec, _, _ = reconciler(client)
    await rec.reconcile(REQ)
    assert sorted(client.waited) == [("Job", True), ("Job", True), ("Service", True)]
    assert client.names("Service") == ["test-jobset"]
    assert client.names("Job") == ["test-jobset-w-0", "test-jobset-w-1"]
    status = (await get_jobset(client)).get("status") or {}
    assert [s["name"] for s in status["replicatedJobsStatus"]] == ["w"]  # the pass's status write


async def test_a_service_error_still_fails_the_pass_with_its_warning() -> None:  # spec: jobset 6.E.2
    client = OverlapClient(jobset(rjob("w", 1), network=dns()), fail_service=True)
    rec, events, _ = reconciler(client)
    with pytest.raises(InternalError, match="unexpected error"):
        await rec.reconcile(REQ)
    assert events.items == [("Warning", "HeadlessServiceCreationFailed", "unexpected error")]
    assert client.names("Service") == []
    # no status write from a failed pass, as upstream; the next pass finds the Job and counts it
    assert "replicatedJobsStatus" not in ((await get_jobset(client)).get("status") or {})


class _NetworkClient(RecordingClient):
    """Each create waits for its answer, as one over the network does."""

    async def create(self, obj: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return await super().create(obj, **kwargs)


async def test_a_jobset_of_many_replicas_does_not_stop_the_manager(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reconcile fuzzing admitted a JobSet of ``replicas: 1000000`` (the CRD and the webhook
    allow up to 2147483647) and its reconcile built every Job before the first create, holding
    the manager's event loop for minutes and its memory at 7 GB: the webhooks timed out. Upstream
    builds the whole list too; here the 50 creators take the Jobs one at a time: while they
    create, the loop answers, and no more Jobs exist than were created plus those in flight."""
    import trainer.controllers.jobset.jobs as jobs_module

    built = 0
    construct = jobs_module.construct_job

    def counting(*args: Any, **kwargs: Any) -> Object:
        nonlocal built
        built += 1
        return construct(*args, **kwargs)

    monkeypatch.setattr(jobs_module, "construct_job", counting)
    js = jobset(rjob("w", 200_000))  # enough for building them all first to hold the loop for seconds
    client = _NetworkClient(js)
    rec, _, _ = reconciler(client)
    reconcile = asyncio.create_task(rec.reconcile(REQ))
    loop = asyncio.get_running_loop()
    slowest = 0.0
    try:
        for _ in range(30):
            started = loop.time()
            await asyncio.sleep(0.01)
            slowest = max(slowest, loop.time() - started)
        assert not reconcile.done()
        created = len(client.created)
        assert created > 50, created
        assert built <= created + c.MaxParallelism, (built, created)
    finally:
        reconcile.cancel()
        await asyncio.gather(reconcile, return_exceptions=True)
    # each pass of the loop runs the 50 creators one step (a GC pause or a loaded machine may add
    # to it); building every Job first held it for minutes
    assert slowest < 2.0, f"the event loop was held for {slowest:.2f}s"
