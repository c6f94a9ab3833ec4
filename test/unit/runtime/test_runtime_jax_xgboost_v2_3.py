"""The JAX and XGBoost plugins of level v2.3 (Trainer v2.3.0's ``jax`` and ``xgboost`` plugins;
docs/behaviour/trainer.md §12): the env and port they put on the trainer node, XGBoost's
reserved ``DMLC_*`` names, PlainML leaving JAX runtimes alone -- and level v2.1 without either."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_fixtures import FakeReader, RecordingIndexer, rjob, training_runtime, trainjob

from trainer.runtime.levels import RuntimeLevel
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.levels.v2_3 import V2_3
from trainer.runtime.plugins import new_registry
from trainer.runtime.registry import TRAINING_RUNTIME_KEY, new_runtimes

Json = dict[str, Any]

INDEX = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}


def runtime(policy: str, resources: Json | None = None) -> Json:
    """The shape of v2.3.0's shipped ``jax-distributed``/``xgboost-distributed``: one trainer job."""
    node: Json = {"name": "node", "image": "img"}
    if resources is not None:
        node["resources"] = resources
    return training_runtime(rjobs=[rjob("node", "trainer", [node])], ml_policy={"numNodes": 1, policy: {}})


async def node_container(level: RuntimeLevel, rt: Json, **trainer: Any) -> tuple[Json, int]:
    """The JobSet's trainer container and its job's parallelism for a TrainJob ``test-job``."""
    runtimes = await new_runtimes(FakeReader([rt]), RecordingIndexer(), level=level)
    objects = await runtimes[TRAINING_RUNTIME_KEY].new_objects(trainjob(trainer=trainer))
    (jobset,) = [o for o in objects if o["kind"] == "JobSet"]
    (job,) = jobset["spec"]["replicatedJobs"]
    (container,) = job["template"]["spec"]["template"]["spec"]["containers"]
    return container, job["template"]["spec"].get("parallelism", 1)


async def validate(level: RuntimeLevel, rt: Json, **trainer: Any) -> list[str]:
    runtimes = await new_runtimes(FakeReader([rt]), RecordingIndexer(), level=level)
    _, errors = await runtimes[TRAINING_RUNTIME_KEY].validate_objects(None, trainjob(trainer=trainer))
    return [str(e) for e in errors]


# -- registration ------------------------------------------------------------------------------


def test_the_plugins_run_after_torch_at_v2_3_only() -> None:
    assert list(new_registry(V2_3))[:7] == [
        "CoScheduling",
        "Volcano",
        "MPI",
        "PlainML",
        "Torch",
        "JAX",
        "XGBoost",
    ]
    assert "JAX" not in new_registry(V2_1) and "XGBoost" not in new_registry(V2_1)
    assert list(new_registry()) == list(new_registry(V2_1))


# -- JAX ---------------------------------------------------------------------------------------


async def test_jax_sets_the_process_count_id_and_coordinator_and_its_port() -> None:
    container, parallelism = await node_container(V2_3, runtime("jax"), numNodes=3)
    assert parallelism == 3
    assert container["env"] == [
        {"name": "JAX_NUM_PROCESSES", "value": "3"},
        {"name": "JAX_PROCESS_ID", "valueFrom": INDEX},
        {"name": "JAX_COORDINATOR_ADDRESS", "value": "test-job-node-0-0.test-job:29500"},
    ]
    assert container["ports"] == [{"containerPort": 29500}]


async def test_jax_without_num_nodes_counts_the_runtimes_nodes() -> None:
    container, parallelism = await node_container(V2_3, runtime("jax"))
    assert parallelism == 1
    assert container["env"][0] == {"name": "JAX_NUM_PROCESSES", "value": "1"}


async def test_a_jax_containers_trainjob_env_follows_the_plugins() -> None:
    # PlainML skips a JAX runtime at v2.3.0 and the JAX plugin sets only its own variables: the
    # TrainJob's env comes from the JobSet builder, after them (an XGBoost container has it first)
    container, _ = await node_container(V2_3, runtime("jax"), env=[{"name": "FOO", "value": "bar"}])
    assert [e["name"] for e in container["env"]] == [
        "JAX_NUM_PROCESSES",
        "JAX_PROCESS_ID",
        "JAX_COORDINATOR_ADDRESS",
        "FOO",
    ]


async def test_jax_validates_nothing() -> None:
    assert await validate(V2_3, runtime("jax"), env=[{"name": "JAX_PROCESS_ID", "value": "0"}]) == []


# -- XGBoost -----------------------------------------------------------------------------------


async def test_xgboost_sets_the_tracker_and_one_worker_per_cpu_node_after_the_trainjob_env() -> None:
    container, parallelism = await node_container(
        V2_3, runtime("xgboost"), numNodes=2, env=[{"name": "FOO", "value": "bar"}]
    )
    assert parallelism == 2
    assert container["env"] == [
        {"name": "FOO", "value": "bar"},  # PlainML's, before the plugin's
        {"name": "DMLC_TRACKER_URI", "value": "test-job-node-0-0.test-job"},
        {"name": "DMLC_TRACKER_PORT", "value": "29500"},
        {"name": "DMLC_TASK_ID", "valueFrom": INDEX},
        {"name": "DMLC_NUM_WORKER", "value": "2"},
    ]
    assert container["ports"] == [{"containerPort": 29500}]


async def test_xgboost_runs_a_worker_per_gpu_of_the_runtime() -> None:
    rt = runtime("xgboost", {"limits": {"nvidia.com/gpu": 4}})
    container, _ = await node_container(V2_3, rt, numNodes=2)
    assert {"name": "DMLC_NUM_WORKER", "value": "8"} in container["env"]


async def test_xgboost_takes_the_trainjobs_gpus_over_the_runtimes() -> None:
    rt = runtime("xgboost", {"limits": {"nvidia.com/gpu": 4}})
    container, _ = await node_container(
        V2_3, rt, numNodes=3, resourcesPerNode={"requests": {"nvidia.com/gpu": 2}}
    )
    assert {"name": "DMLC_NUM_WORKER", "value": "6"} in container["env"]
    container, _ = await node_container(V2_3, rt, numNodes=3, resourcesPerNode={"requests": {"cpu": 2}})
    assert {"name": "DMLC_NUM_WORKER", "value": "3"} in container["env"]


async def test_xgboost_forbids_each_reserved_env_by_its_index() -> None:
    env = [
        {"name": "DMLC_TRACKER_URI", "value": "x"},
        {"name": "FOO", "value": "bar"},
        {"name": "DMLC_TASK_ID", "value": "0"},
    ]
    assert await validate(V2_3, runtime("xgboost"), env=env) == [
        "spec.trainer.env[0]: Forbidden: DMLC_TRACKER_URI is reserved for the XGBoost runtime",
        "spec.trainer.env[2]: Forbidden: DMLC_TASK_ID is reserved for the XGBoost runtime",
    ]
    assert await validate(V2_3, runtime("xgboost"), env=[{"name": "DMLC_NUM_WORKER", "value": "1"}]) == [
        "spec.trainer.env[0]: Forbidden: DMLC_NUM_WORKER is reserved for the XGBoost runtime",
    ]
    assert await validate(V2_3, runtime("xgboost"), env=[{"name": "FOO", "value": "bar"}]) == []


async def test_the_reserved_names_are_only_the_xgboost_runtimes() -> None:
    env = [{"name": "DMLC_TRACKER_PORT", "value": "1"}]
    assert await validate(V2_3, runtime("jax"), env=env) == []
    assert (
        await validate(V2_3, training_runtime(rjobs=[rjob("node", "trainer", [{"name": "node"}])]), env=env)
        == []
    )


# -- level v2.1: neither plugin ----------------------------------------------------------------


@pytest.mark.parametrize("policy", ["jax", "xgboost"])
async def test_at_v2_1_a_jax_or_xgboost_policy_is_plainmls(policy: str) -> None:
    # v2.1.0 knows neither policy (its CRD would prune them): PlainML sets the count and env only
    container, parallelism = await node_container(
        V2_1, runtime(policy), numNodes=2, env=[{"name": "DMLC_TASK_ID", "value": "7"}]
    )
    assert parallelism == 2
    assert container["env"] == [{"name": "DMLC_TASK_ID", "value": "7"}]
    assert "ports" not in container
    assert await validate(V2_1, runtime(policy), env=[{"name": "DMLC_TASK_ID", "value": "7"}]) == []
