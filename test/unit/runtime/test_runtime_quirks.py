"""Upstream quirks we copy on purpose (docs/behaviour/trainer.md §9), pinned so nobody "fixes" an observable contract."""

from __future__ import annotations

from typing import Any

from runtime_fixtures import (
    FakeReader,
    RecordingIndexer,
    redact_ssh_secret,
    rjob,
    sort_objects,
    training_runtime,
    trainjob,
)

from trainer.runtime.registry import TRAINING_RUNTIME_KEY, new_runtimes

Json = dict[str, Any]


async def objects(runtime: Json, tj: Json, *existing: Json) -> list[Json]:
    runtimes = await new_runtimes(FakeReader([runtime, *existing]), RecordingIndexer())
    return redact_ssh_secret(sort_objects(await runtimes[TRAINING_RUNTIME_KEY].new_objects(tj)))


def node_container(jobset: Json, job: int = 0) -> Json:
    return jobset["spec"]["replicatedJobs"][job]["template"]["spec"]["template"]["spec"]["containers"][0]  # type: ignore[no-any-return]


async def test_quirk_9_master_address_ignores_custom_subdomain_and_job_name() -> None:
    runtime = training_runtime(
        rjobs=[rjob("trainer-job", "trainer", [{"name": "node"}])],
        ml_policy={"torch": {"numProcPerNode": 1}},
        spec_extra={"network": {"subdomain": "custom"}},
    )
    (jobset,) = await objects(runtime, trainjob(trainer={"numNodes": 2}))
    env = {e["name"]: e.get("value") for e in node_container(jobset)["env"]}
    assert env["PET_MASTER_ADDR"] == "test-job-node-0-0.test-job"


async def test_quirk_10_unnamed_template_port_is_replaced_by_29500() -> None:
    runtime = training_runtime(
        rjobs=[rjob("node", "trainer", [{"name": "node", "ports": [{"containerPort": 8080}]}])],
        ml_policy={"torch": {"numProcPerNode": 1}},
    )
    (jobset,) = await objects(runtime, trainjob(trainer={}))
    assert node_container(jobset)["ports"] == [{"containerPort": 29500}]


async def test_quirk_11_pod_group_ignores_trainjob_resources_per_node() -> None:
    runtime = training_runtime(
        rjobs=[rjob("node", "trainer", [{"name": "node", "resources": {"requests": {"cpu": "1"}}}])],
        ml_policy={"numNodes": 1},
        pod_group_policy={"coscheduling": {"scheduleTimeoutSeconds": 60}},
    )
    tj = trainjob(trainer={"numNodes": 4, "resourcesPerNode": {"requests": {"cpu": "8"}}})
    _, pod_group = await objects(runtime, tj)
    assert pod_group["spec"] == {"minMember": 4, "minResources": {"cpu": "4"}, "scheduleTimeoutSeconds": 60}


async def test_quirk_12_hostfile_is_rebuilt_while_the_jobset_runs() -> None:
    launcher = rjob("launcher", None, [{"name": "node"}])
    node = rjob("node", "trainer", [{"name": "node"}])
    runtime = training_runtime(rjobs=[launcher, node], ml_policy={"numNodes": 1, "mpi": {}})
    running = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "test-job", "namespace": "default"},
        "spec": {"suspend": False},
    }
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "test-job-mpi-ssh-auth", "namespace": "default"},
    }
    result = await objects(runtime, trainjob(suspend=False, trainer={"numNodes": 3}), running, secret)
    assert [(o["kind"], o["metadata"]["name"]) for o in result] == [("ConfigMap", "test-job-mpi-hostfile")]
    assert result[0]["data"]["hostfile"] == (
        "test-job-node-0-0.test-job slots=1\ntest-job-node-0-1.test-job slots=1\ntest-job-node-0-2.test-job slots=1\n"
    )
