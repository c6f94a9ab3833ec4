"""The JobSet controller of level v2.3 (JobSet v0.12.0) against a real kube-apiserver
(docs/behaviour/jobset-v0.12.md §1): volumeClaimPolicies' PVCs and claim volumes, the
RestartingJobSet flow, and the events.k8s.io Events with action ``Reconciling``.

The module's own control plane has the v2.3 JobSet CRD (``config/overlays/v2.3/crd``; the
session's has v0.10.1's, which has no volumeClaimPolicies). As in the controller suite there
are no webhooks, no Job controller and no garbage collector: the tests write Job status and
clear the ``foregroundDeletion`` finalizers themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from jsharness import Harness, make_jobset, rjob
from module_env import V2_3_JOBSET_CRD, module_control_plane

from manager import Manager, Options
from manager.cache.cache import CacheOptions
from manager.client.errors import NotFound
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.scheme import GroupVersionKind
from manager.testing import eventually
from trainer.api import jobset_constants as c
from trainer.components import component
from trainer.controllers import podcache
from trainer.jobset.levels.v0_12 import V0_12
from trainer.runtime.context import SetupContext

PVC_GVK = GroupVersionKind("", "v1", "PersistentVolumeClaim")
EVENT_V1_GVK = GroupVersionKind("events.k8s.io", "v1", "Event")
Object = dict[str, Any]


@pytest.fixture(scope="module")
def env_v0_12(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    """etcd + kube-apiserver with JobSet v0.12.0's CRD, for this module only."""
    with module_control_plane(tmp_path_factory, "jobset-v0.12", [V2_3_JOBSET_CRD]) as env:
        yield env


@pytest.fixture
async def h(env_v0_12: Environment) -> AsyncIterator[Harness]:
    """The JobSet component at JobSet v0.12.0 in this process, in a namespace of its own."""
    config = await load_kubeconfig(env_v0_12.kubeconfig)
    namespace = f"js12-{uuid.uuid4().hex[:8]}"
    namespace_obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    options = CacheOptions(default_namespaces=[namespace])
    async with Cluster(config, field_owner="jobset-test", cache_options=options) as cluster:
        await cluster.api_reader.create(namespace_obj)
        mgr = Manager(cluster, Options(metrics_bind_address="0"))
        assert await podcache.configure(mgr, None, ["jobset"]) == "Minimal/label-selected"
        assert await component("jobset").setup(SetupContext(mgr, None, jobset_level=V0_12)) is True
        task = asyncio.create_task(mgr.run())
        try:
            await eventually(lambda: mgr.elected.is_set(), timeout=30, message="the manager leads")
            yield Harness(cluster.api_reader, namespace, flush_events=cluster.flush_events)
        finally:
            mgr.stop()
            await asyncio.gather(task, return_exceptions=True)
            with contextlib.suppress(NotFound):
                await cluster.api_reader.delete(namespace_obj)


def claim(name: str, storage: str = "1Gi", **meta: Any) -> Object:
    return {
        "metadata": {"name": name, **meta},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}},
    }


def mounting(name: str, replicas: int, *mounts: str) -> Object:
    r = rjob(name, replicas)
    container = r["template"]["spec"]["template"]["spec"]["containers"][0]
    container["volumeMounts"] = [{"name": m, "mountPath": f"/{m}"} for m in mounts]
    return r


async def events_of(h: Harness, name: str) -> list[Object]:
    """The events.k8s.io/v1 Events about JobSet ``name``, oldest first."""
    items = await h.api.list(EVENT_V1_GVK, namespace=h.namespace)
    mine = [e for e in items if (e.get("regarding") or {}).get("name") == name]
    return sorted(mine, key=lambda e: (e.get("eventTime") or "", e["metadata"]["name"]))


def restarting(js: Object) -> Object | None:
    for x in (js.get("status") or {}).get("conditions") or []:
        if x["type"] == "RestartingJobSet":
            return dict(x)
    return None


# -- volumeClaimPolicies ---------------------------------------------------------------------------


async def test_volume_claim_policies_create_the_shared_pvcs_and_mount_them(h: Harness) -> None:
    policies = [
        {
            "templates": [claim("shared", labels={"team": "a"}, annotations={"note": "x"})],
            "retentionPolicy": {"whenDeleted": "Delete"},
        },
        {"templates": [claim("kept", "2Gi")], "retentionPolicy": {"whenDeleted": "Retain"}},
    ]
    js = make_jobset(
        h.namespace,
        "claims",
        volumeClaimPolicies=policies,
        replicatedJobs=[mounting("workers", 2, "shared", "kept"), mounting("reader", 1, "shared")],
    )
    created = await h.create(js)
    uid = created["metadata"]["uid"]

    async def pvcs() -> dict[str, Object]:
        items = await h.api.list(PVC_GVK, namespace=h.namespace)
        found = {p["metadata"]["name"]: p for p in items}
        assert sorted(found) == ["kept-claims", "shared-claims"], sorted(found)
        return found

    found = await eventually(pvcs, timeout=20, message="the two PVCs <claim>-<jobset>")
    shared, kept = found["shared-claims"], found["kept-claims"]
    assert shared["metadata"]["labels"] == {"team": "a", c.JobSetNameKey: "claims"}
    assert shared["metadata"]["annotations"] == {"note": "x"}
    assert shared["spec"]["resources"] == {"requests": {"storage": "1Gi"}}
    # whenDeleted: Delete -> owned by the JobSet (the garbage collector deletes it with it)
    ((owner),) = shared["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "JobSet",
        "claims",
        uid,
        True,
    )
    # whenDeleted: Retain -> not owned: it stays after the JobSet
    assert "ownerReferences" not in kept["metadata"]
    assert kept["metadata"]["labels"] == {c.JobSetNameKey: "claims"}

    jobs = await h.wait_jobs(3, "claims")
    volumes = {
        j["metadata"]["name"]: [
            (v["name"], v["persistentVolumeClaim"]["claimName"])
            for v in j["spec"]["template"]["spec"]["volumes"]
        ]
        for j in jobs
    }
    assert volumes == {
        "claims-workers-0": [("shared", "shared-claims"), ("kept", "kept-claims")],
        "claims-workers-1": [("shared", "shared-claims"), ("kept", "kept-claims")],
        "claims-reader-0": [("shared", "shared-claims")],
    }


async def test_a_refused_pvc_is_a_pvc_creation_failed_event_and_no_jobs(h: Harness) -> None:
    bad = {"metadata": {"name": "scratch"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}}
    js = make_jobset(
        h.namespace,
        "refused",
        volumeClaimPolicies=[{"templates": [bad], "retentionPolicy": {"whenDeleted": "Delete"}}],
        replicatedJobs=[mounting("workers", 1, "scratch")],
    )
    await h.create(js)

    async def refused() -> Object:
        assert h.flush_events is not None
        await h.flush_events()
        found = [e for e in await events_of(h, "refused") if e["reason"] == "PVCCreationFailed"]
        assert found, "no PVCCreationFailed event"
        return found[0]

    event = await eventually(refused, timeout=20, message="a PVCCreationFailed Warning on the JobSet")
    assert event["type"] == "Warning"
    assert (event["action"], event["reportingController"]) == ("Reconciling", "jobset")
    assert "spec.accessModes: Required value" in event["note"]
    assert event["regarding"]["kind"] == "JobSet"
    assert await h.jobs("refused") == []  # the claims hold the Jobs that mount them back


# -- the restart flow ------------------------------------------------------------------------------


async def test_a_restart_is_restarting_until_all_jobs_are_ready_then_completed(h: Harness) -> None:
    name = "restart"
    await h.create(make_jobset(h.namespace, name, failurePolicy={"maxRestarts": 1}))
    jobs = await h.wait_jobs(4, name)
    await h.fail_job(jobs[0])

    async def restarting_now() -> Object:
        js = await h.jobset(name)
        cond = restarting(js)
        assert cond is not None and cond["status"] == "True", cond
        assert js["status"]["restarts"] == 1
        return cond

    first = await eventually(restarting_now, timeout=20, message="RestartingJobSet True after the failure")
    failed_job = jobs[0]["metadata"]["name"]
    assert first["reason"] == "DefaultFailurePolicy"
    assert (
        first["message"] == f"applying RestartJobSet failure policy action (first failed job: {failed_job})"
    )

    # the old attempt's Jobs are foreground-deleted; the garbage collector's part is ours here
    await h.wait_terminating(4, name)
    await h.remove_finalizers(expect=4, name=name)

    async def new_attempt() -> list[Object]:
        current = await h.jobs(name)
        assert len(current) == 4 and all(j["metadata"]["labels"][c.RestartsKey] == "1" for j in current)
        return current

    jobs = await eventually(new_attempt, timeout=20, message="four Jobs of restart attempt 1")
    for job in jobs[:-1]:
        await h.ready_job(job)
    # not all ready yet: still restarting
    await h.wait_rjob_status({"replicated-job-a": {"ready": 1, "active": 1}}, name)
    assert (restarting(await h.jobset(name)) or {}).get("status") == "True"
    await h.ready_job(jobs[-1])
    ready = await h.wait_condition("RestartingJobSet", "False", name)
    assert (ready["reason"], ready["message"]) == ("JobsReady", "all jobs are ready")

    for job in jobs:
        await h.complete_job(job)
    await h.wait_condition("Completed", name=name)
    done = restarting(await h.jobset(name))
    assert done is not None
    assert (done["status"], done["reason"], done["message"]) == (
        "False",
        "JobSetCompleted",
        "jobset completed successfully",
    )
    assert done["lastTransitionTime"] == ready["lastTransitionTime"]  # same status: the time stays

    async def all_events() -> list[tuple[str, str]]:
        assert h.flush_events is not None
        await h.flush_events()
        events = await events_of(h, name)
        reasons = [(e["type"], e["reason"]) for e in events]
        assert ("Normal", "JobSetCompleted") in reasons, reasons
        assert all(e["action"] == "Reconciling" and e["reportingController"] == "jobset" for e in events)
        return reasons

    reasons = await eventually(all_events, timeout=20, message="the restart's events.k8s.io Events")
    assert reasons == [
        ("Warning", "DefaultFailurePolicy"),
        ("Warning", "RestartJobSetFailurePolicyAction"),
        ("Normal", "JobsReady"),
        ("Normal", "AllJobsCompleted"),
        ("Normal", "JobSetCompleted"),
    ]


async def test_reaching_max_restarts_fails_the_jobset_and_ends_the_restart(h: Harness) -> None:
    name = "maxed"
    await h.create(make_jobset(h.namespace, name, failurePolicy={"maxRestarts": 1}))
    jobs = await h.wait_jobs(4, name)
    await h.fail_job(jobs[1])
    await h.wait_condition("RestartingJobSet", "True", name)
    await h.wait_terminating(4, name)
    await h.remove_finalizers(expect=4, name=name)

    async def new_attempt() -> list[Object]:
        current = await h.jobs(name)
        assert len(current) == 4 and all(j["metadata"]["labels"][c.RestartsKey] == "1" for j in current)
        return current

    jobs = await eventually(new_attempt, timeout=20, message="four Jobs of restart attempt 1")
    await h.fail_job(jobs[2])
    failed = await h.wait_condition("Failed", name=name)
    assert failed["reason"] == "ReachedMaxRestarts"
    ended = restarting(await h.jobset(name))
    assert ended is not None
    assert (ended["status"], ended["reason"], ended["message"]) == ("False", "JobSetFailed", "jobset failed")


# -- the Job index by uid, and JobCreationFailed ---------------------------------------------------


async def test_a_new_jobset_of_an_old_name_does_not_take_the_old_ones_jobs(h: Harness) -> None:
    name = "again"
    await h.create(make_jobset(h.namespace, name, replicatedJobs=[rjob("w", 1)]))
    (old_job,) = await h.wait_jobs(1, name)
    await h.fail_job(old_job)
    await h.api.delete(await h.jobset(name))  # no garbage collector here: the failed Job stays
    new = await h.create(make_jobset(h.namespace, name, replicatedJobs=[rjob("w", 1)]))
    new_uid = new["metadata"]["uid"]

    async def refused() -> Object:
        assert h.flush_events is not None
        await h.flush_events()
        found = [
            e
            for e in await events_of(h, name)
            if e["reason"] == "JobCreationFailed" and e["regarding"].get("uid") == new_uid
        ]
        assert found, "no JobCreationFailed event on the new JobSet"
        return found[0]

    event = await eventually(refused, timeout=20, message="JobCreationFailed on the new JobSet")
    assert (event["type"], event["action"], event["reportingController"]) == (
        "Warning",
        "Reconciling",
        "jobset",
    )
    assert event["note"].startswith('job "again-w-0" creation failed with error: ')
    assert "already exists" in event["note"]
    # the old JobSet's failed Job is not the new one's: it is not failed by it
    assert not ((await h.jobset(name)).get("status") or {}).get("conditions")
