"""JobSets on a full local cluster (jobset.md 6.U): KWOK runs the pods, the Job controller and the
garbage collector are real, our controllers and webhooks serve the JobSets."""

from __future__ import annotations

from typing import Any

from jse2e import Cluster2, e2e_jobset, e2e_rjob

from manager.client.patch import Patch
from manager.client.rest import JSON_PATCH
from manager.meta.gvk import SERVICE as SERVICE_GVK
from manager.scheme import GroupVersionKind
from manager.testing import eventually
from trainer.api import jobset_constants as c
from trainer.controllers.jobset.reconciler import JOBSET_GVK

Object = dict[str, Any]
POD_GVK = GroupVersionKind("", "v1", "Pod")


async def test_jobset_runs_to_completed_with_service(jobset_cluster: Cluster2) -> None:  # spec: jobset 6.U.1
    k = jobset_cluster
    await k.api.create(
        e2e_jobset(
            k.namespace,
            "js",
            e2e_rjob("rjob", 4),
            network={"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        )
    )
    await k.wait_condition("js", "Completed")
    jobs = await k.jobs("js")
    assert sorted(j["metadata"]["name"] for j in jobs) == [f"js-rjob-{i}" for i in range(4)]
    assert all(j["spec"]["template"]["spec"]["subdomain"] == "js" for j in jobs)
    svc = await k.api.get(SERVICE_GVK, "js", k.namespace)
    assert svc["spec"]["clusterIP"] == "None"
    assert (await k.jobset("js"))["status"]["terminalState"] == "Completed"


async def test_custom_subdomain(jobset_cluster: Cluster2) -> None:  # spec: jobset 6.U.2
    k = jobset_cluster
    await k.api.create(
        e2e_jobset(
            k.namespace,
            "js",
            e2e_rjob("rjob", 4),
            network={"enableDNSHostnames": True, "subdomain": "network-subdomain"},
        )
    )
    await k.wait_condition("js", "Completed")
    await k.api.get(SERVICE_GVK, "network-subdomain", k.namespace)
    assert {j["spec"]["template"]["spec"]["subdomain"] for j in await k.jobs("js")} == {"network-subdomain"}


async def test_ttl_deletes_finished_jobset(jobset_cluster: Cluster2) -> None:  # spec: jobset 6.U.3
    k = jobset_cluster
    js = e2e_jobset(k.namespace, "ttl", e2e_rjob("rjob", 2), ttlSecondsAfterFinished=5)
    js["metadata"]["finalizers"] = ["fake.example.com/blockDeletion"]
    await k.api.create(js)
    await k.wait_condition("ttl", "Completed")

    async def deleting() -> None:
        assert (await k.jobset("ttl"))["metadata"].get("deletionTimestamp"), "TTL did not delete the JobSet"

    await eventually(deleting, timeout=60)
    await k.update_js("ttl", lambda js: js["metadata"].update(finalizers=[]))
    await k.wait_gone("ttl")


async def test_foreground_delete_removes_jobs(jobset_cluster: Cluster2) -> None:  # spec: jobset 6.U.4
    k = jobset_cluster
    pending = e2e_rjob("rjob", 2)
    pending["template"]["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/os": "non-existing-os"}
    await k.api.create(e2e_jobset(k.namespace, "fg", pending))

    async def two_jobs() -> None:
        assert len(await k.jobs("fg")) == 2

    await eventually(two_jobs, timeout=60)
    await k.api.delete_by_name(JOBSET_GVK, "fg", k.namespace, propagation_policy="Foreground")
    await k.wait_gone("fg")
    assert await k.jobs("fg") == []


async def test_failing_job_restarts_then_fails_after_max_restarts(jobset_cluster: Cluster2) -> None:
    """A Job that can never schedule fails by deadline: one restart, then ReachedMaxRestarts."""
    k = jobset_cluster
    failing = e2e_rjob("rjob", 2, activeDeadlineSeconds=3)
    failing["template"]["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/os": "non-existing-os"}
    await k.api.create(e2e_jobset(k.namespace, "fails", failing, failurePolicy={"maxRestarts": 1}))

    async def restarted() -> None:
        status = (await k.jobset("fails")).get("status") or {}
        assert status.get("restarts") == 1 and status.get("restartsCountTowardsMax") == 1, status

    await eventually(restarted, timeout=120)

    async def recreated() -> None:
        jobs = await k.jobs("fails")
        assert {j["metadata"]["labels"][c.RestartsKey] for j in jobs} == {"1"} and len(jobs) == 2

    await eventually(recreated, timeout=120)
    cond = await k.wait_condition("fails", "Failed", timeout=120)
    assert cond["reason"] == "ReachedMaxRestarts"
    assert cond["message"].startswith(
        "jobset failed due to reaching max number of restarts (first failed job: fails-rjob-"
    )
    assert (await k.jobset("fails"))["status"]["terminalState"] == "Failed"


async def test_kueue_like_suspend_resume_with_node_selector(
    jobset_cluster: Cluster2,
) -> None:  # spec: jobset 6.U.5
    k = jobset_cluster
    await k.api.create(e2e_jobset(k.namespace, "kq", e2e_rjob("rjob", 4), suspend=True))

    async def four_suspended() -> None:
        jobs = await k.jobs("kq")
        assert len(jobs) == 4 and all(j["spec"]["suspend"] for j in jobs)

    await eventually(four_suspended, timeout=60)

    async def set_selector(value: str, suspend: bool) -> None:
        def mutate(js: Object) -> None:
            js["spec"]["suspend"] = suspend
            pod_spec = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
            pod_spec["nodeSelector"] = {"kubernetes.io/os": value}

        await k.update_js("kq", mutate)

    await set_selector("non-existing-os", False)

    async def four_active() -> None:
        statuses = (await k.jobset("kq")).get("status", {}).get("replicatedJobsStatus") or []
        assert statuses and statuses[0]["active"] == 4, statuses

    await eventually(four_active, timeout=60)
    await set_selector("linux", True)

    async def all_suspended_again() -> None:
        statuses = (await k.jobset("kq")).get("status", {}).get("replicatedJobsStatus") or []
        assert statuses and statuses[0]["suspended"] == 4, statuses

    await eventually(all_suspended_again, timeout=60)
    await k.update_js("kq", lambda js: js["spec"].update(suspend=False))
    await k.wait_condition("kq", "Completed")
    for job in await k.jobs("kq"):
        assert job["spec"]["template"]["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}


async def test_scheduling_gates_added_on_resume(jobset_cluster: Cluster2) -> None:  # spec: jobset 6.U.6
    k = jobset_cluster
    await k.api.create(e2e_jobset(k.namespace, "gated", e2e_rjob("rjob", 4), suspend=True))

    async def four_jobs() -> None:
        assert len(await k.jobs("gated")) == 4

    await eventually(four_jobs, timeout=60)

    def resume_with_gate(js: Object) -> None:
        js["spec"]["suspend"] = False
        pod_spec = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        pod_spec["schedulingGates"] = [{"name": "example.com/gate"}]

    await k.update_js("gated", resume_with_gate)

    async def gated_pods() -> list[Object]:
        pods = await k.api.list(POD_GVK, namespace=k.namespace, label_selector={c.JobSetNameKey: "gated"})
        assert len(pods) == 4
        assert all(p["spec"].get("schedulingGates") == [{"name": "example.com/gate"}] for p in pods)
        result: list[Object] = pods
        return result

    for pod in await eventually(gated_pods, timeout=60):
        await k.api.patch(pod, Patch(JSON_PATCH, [{"op": "remove", "path": "/spec/schedulingGates"}]))
    await k.wait_condition("gated", "Completed")


async def test_depends_on_initializers(jobset_cluster: Cluster2) -> None:  # spec: jobset 6.U.7
    k = jobset_cluster
    trainer = e2e_rjob("trainer-node", 1)
    trainer["dependsOn"] = [
        {"name": "model-initializer", "status": "Complete"},
        {"name": "dataset-initializer", "status": "Complete"},
    ]
    await k.api.create(
        e2e_jobset(
            k.namespace, "deps", e2e_rjob("model-initializer", 1), e2e_rjob("dataset-initializer", 1), trainer
        )
    )
    await k.wait_condition("deps", "Completed")
    jobs = {j["metadata"]["name"]: j for j in await k.jobs("deps")}
    trainer_created = jobs["deps-trainer-node-0"]["metadata"]["creationTimestamp"]
    for init in ("deps-model-initializer-0", "deps-dataset-initializer-0"):
        assert jobs[init]["status"]["completionTime"] <= trainer_created, (
            "trainer started before its initializers"
        )


async def test_server_side_apply_is_stable(jobset_cluster: Cluster2) -> None:  # spec: jobset 6.U.10
    k = jobset_cluster
    js = e2e_jobset(k.namespace, "test", e2e_rjob("worker", 2))
    generations = []
    for _ in range(3):
        applied = await k.api.apply(js, field_owner="e2e-apply", force=True)
        generations.append(applied["metadata"]["generation"])
    assert generations == [1, 1, 1]


async def _one_job_then_all(k: Cluster2, name: str, first: str, total: int) -> None:
    """Created suspended, only the awaited Job exists; after resuming, the rest follows and it completes."""

    async def only_first() -> None:
        jobs = await k.jobs(name)
        assert [j["metadata"]["name"] for j in jobs] == [first]

    await eventually(only_first, timeout=60)
    await k.update_js(name, lambda js: js["spec"].update(suspend=False))

    async def all_jobs() -> None:
        assert len(await k.jobs(name)) == total

    await eventually(all_jobs, timeout=120)
    await k.wait_condition(name, "Completed")


def _with_startup_probe(rjob: Object) -> Object:
    container = rjob["template"]["spec"]["template"]["spec"]["containers"][0]
    container["startupProbe"] = {"exec": {"command": ["echo", "started"]}, "initialDelaySeconds": 5}
    return rjob


async def test_coordinator_ready_gates_trainer(jobset_cluster: Cluster2) -> None:  # spec: jobset 6.U.8
    k = jobset_cluster
    trainer = e2e_rjob("trainer-node", 1)
    trainer["dependsOn"] = [{"name": "coordinator", "status": "Ready"}]
    coordinator = _with_startup_probe(e2e_rjob("coordinator", 1, completionMode="Indexed"))
    await k.api.create(
        e2e_jobset(
            k.namespace,
            "coord",
            coordinator,
            trainer,
            coordinator={"replicatedJob": "coordinator", "jobIndex": 0, "podIndex": 0},
            suspend=True,
        )
    )
    await _one_job_then_all(k, "coord", "coord-coordinator-0", 2)
    for job in await k.jobs("coord"):
        assert job["metadata"]["labels"][c.CoordinatorKey] == "coord-coordinator-0-0.coord"


async def test_launcher_ready_gates_trainers(jobset_cluster: Cluster2) -> None:  # spec: jobset 6.U.9
    k = jobset_cluster
    trainer = e2e_rjob("trainer-node", 5)
    trainer["dependsOn"] = [{"name": "launcher", "status": "Ready"}]
    launcher = _with_startup_probe(e2e_rjob("launcher", 1))
    await k.api.create(e2e_jobset(k.namespace, "launch", launcher, trainer, suspend=True))
    await _one_job_then_all(k, "launch", "launch-launcher-0", 6)
