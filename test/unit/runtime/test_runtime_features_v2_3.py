"""Level v2.3's runtime features (Trainer v2.3.0; docs/behaviour/trainer.md §12.14): torch
``envInjection``, ``resourcesPerNode`` merged per resource name, ``SyncParallelCount`` and the
endpoints of every replica.

The expected objects of ``testdata/features_go_v2_3_0.json`` are what upstream's own runtime
(``core.New(...).NewObjects`` of trainer v2.3.0, ``testdata/features_go``) built for the same
runtime and TrainJob; the cases follow upstream's ``torch_test.go``, ``jobset_test.go`` and
``trainingruntime_test.go``. Level v2.1 keeps v2.1.0's behaviour for the same inputs.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from runtime_fixtures import FakeReader, RecordingIndexer, sort_objects

from trainer.runtime.errors import RuntimeFailure
from trainer.runtime.levels import RuntimeLevel
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.levels.v2_3 import V2_3
from trainer.runtime.levels.v2_3_build import merge_resource_requirements
from trainer.runtime.registry import new_runtimes

Json = dict[str, Any]

GO: dict[str, Json] = json.loads((Path(__file__).parent / "testdata" / "features_go_v2_3_0.json").read_text())
INDEX = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}


def masked(objects: list[Json]) -> list[Json]:
    objects = sort_objects(copy.deepcopy(objects))
    for obj in objects:
        if obj.get("kind") == "Secret":
            obj["data"] = dict.fromkeys(obj.get("data", {}), "<key>")
    return objects


async def build(case: str, level: RuntimeLevel = V2_3) -> list[Json] | Json:
    """Our objects for ``case`` at ``level`` (or ``{"error": ...}``), masked as the fixture is."""
    runtime, trainjob = GO[case]["runtime"], GO[case]["trainjob"]
    runtimes = await new_runtimes(FakeReader([copy.deepcopy(runtime)]), RecordingIndexer(), level=level)
    key = f"{trainjob['spec']['runtimeRef']['kind']}.trainer.kubeflow.org"
    try:
        return masked(await runtimes[key].new_objects(copy.deepcopy(trainjob)))
    except RuntimeFailure as failure:
        return {"error": failure.message}


def go(case: str) -> list[Json] | Json:
    out = GO[case]["go"]
    return masked(out) if isinstance(out, list) else out


def jobset(objects: Any) -> Json:
    (found,) = [o for o in objects if o["kind"] == "JobSet"]
    return found  # type: ignore[no-any-return]


def pod_spec(objects: Any, job: str) -> Json:
    (rjob,) = [r for r in jobset(objects)["spec"]["replicatedJobs"] if r["name"] == job]
    return rjob["template"]["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def env_names(container: Json) -> list[str]:
    return [e["name"] for e in container.get("env") or ()]


DELIBERATE = {"volume_claim_policies"}
"""Cases where ours differs on purpose, compared by their own tests: the default retention policy
(docs/divergences.md T-16, ``test_runtime_volume_claims_v2_3.py``)."""


@pytest.mark.parametrize("case", sorted(set(GO) - DELIBERATE))
async def test_what_upstream_v2_3_0_builds(case: str) -> None:
    assert await build(case) == go(case)


# -- torch envInjection ------------------------------------------------------------------------


async def test_env_injection_puts_the_pet_env_and_master_into_every_target() -> None:
    objects = await build("env_injection_targets")
    node = pod_spec(objects, "node")
    pet = [
        {"name": "PET_NNODES", "value": "2"},
        {"name": "PET_NPROC_PER_NODE", "value": "4"},
        {"name": "PET_NODE_RANK", "valueFrom": INDEX},
        {"name": "PET_MASTER_ADDR", "value": "test-job-node-0-0.test-job"},
        {"name": "PET_MASTER_PORT", "value": "29500"},
    ]
    # the init container's own PET_NNODES is replaced in place
    assert node["initContainers"][0]["env"] == pet
    assert node["containers"][1]["env"] == pet
    assert pod_spec(objects, "aux")["containers"][0]["env"] == pet
    # the trainer's env (and only its) leads with the TrainJob's; targets get no port
    assert env_names(node["containers"][0]) == ["RUNTIME_ENV", "FOO", *[e["name"] for e in pet]]
    assert "ports" not in node["containers"][1]


async def test_env_injection_runs_without_a_trainer_in_the_trainjob() -> None:
    objects = await build("env_injection_without_trainer")
    assert pod_spec(objects, "aux")["containers"][0]["env"][0] == {"name": "PET_NNODES", "value": "3"}
    assert env_names(pod_spec(objects, "node")["containers"][0]) == ["RUNTIME_ENV"]


async def test_a_missing_target_fails_the_build_with_upstreams_words() -> None:
    assert await build("env_injection_missing_target") == {
        "error": 'envInjection target podSet "node" container "missing" not found in runtime template'
    }


async def test_level_v2_1_injects_nothing_into_the_targets() -> None:
    objects = await build("env_injection_targets", V2_1)
    assert env_names(pod_spec(objects, "aux")["containers"][0]) == []
    assert "env" not in pod_spec(objects, "node")["containers"][1]


# -- resourcesPerNode --------------------------------------------------------------------------


async def test_resources_per_node_is_merged_per_resource_name() -> None:
    objects = await build("resources_merged_per_key")
    assert pod_spec(objects, "node")["containers"][0]["resources"] == {
        "limits": {"cpu": "6", "memory": "32Gi", "nvidia.com/gpu": "2"},
        "requests": {"cpu": "4", "memory": "20Gi", "nvidia.com/gpu": "2"},
    }
    (group,) = [o for o in objects if o["kind"] == "PodGroup"]
    # the PodGroup counts the merged requests of the two nodes
    assert group["spec"]["minResources"] == {"cpu": "8", "memory": "40Gi", "nvidia.com/gpu": "4"}


async def test_level_v2_1_replaces_the_resources_whole() -> None:
    objects = await build("resources_merged_per_key", V2_1)
    assert pod_spec(objects, "node")["containers"][0]["resources"] == {
        "limits": {"cpu": "6", "nvidia.com/gpu": "2"},
        "requests": {"memory": "20Gi", "nvidia.com/gpu": "2"},
    }


async def test_claims_are_dropped_and_a_runtime_without_ml_policy_keeps_its_resources() -> None:
    claims = await build("resources_claims_dropped")
    assert pod_spec(claims, "node")["containers"][0]["resources"] == {"limits": {"cpu": "2", "memory": "1Gi"}}
    ignored = await build("resources_no_ml_policy_ignored")
    assert "nvidia.com/gpu" not in pod_spec(ignored, "node")["containers"][0]["resources"]["limits"]


def test_merge_resource_requirements_follows_upstreams_cases() -> None:
    # trainingruntime_test.go TestMergeResourceRequirements
    assert merge_resource_requirements(
        {"limits": {"cpu": "8", "memory": "32Gi"}}, {"limits": {"nvidia.com/gpu": "4"}}
    ) == {"limits": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4"}}
    assert merge_resource_requirements({"limits": {"cpu": "8"}}, {"limits": {"cpu": "4"}}) == {
        "limits": {"cpu": "4"}
    }
    assert merge_resource_requirements({}, {"requests": {"cpu": 2}}) == {"requests": {"cpu": "2"}}
    assert merge_resource_requirements({"limits": {}}, {}) == {}


# -- endpoints and SyncParallelCount -----------------------------------------------------------


def hostfile(objects: Any) -> str:
    (config,) = [o for o in objects if o["kind"] == "ConfigMap"]
    return config["data"]["hostfile"]  # type: ignore[no-any-return]


async def test_the_hostfile_names_the_pods_of_every_replica() -> None:
    objects = await build("mpi_replicas_endpoints_and_resources")
    assert hostfile(objects) == "".join(
        f"test-job-node-{r}-{k}.test-job slots=2\n" for r in range(2) for k in range(2)
    )
    # the builder still runs one replica of the trainer job
    (node,) = [r for r in jobset(objects)["spec"]["replicatedJobs"] if r["name"] == "node"]
    assert node["replicas"] == 1
    v2_1 = await build("mpi_replicas_endpoints_and_resources", V2_1)
    assert hostfile(v2_1) == "test-job-node-0-0.test-job slots=2\ntest-job-node-0-1.test-job slots=2\n"


async def test_parallelism_and_completions_follow_the_pod_sets_by_name() -> None:
    objects = await build("parallel_count_by_name")
    specs = {r["name"]: r["template"]["spec"] for r in jobset(objects)["spec"]["replicatedJobs"]}
    assert (specs["aux"]["parallelism"], specs["aux"]["completions"]) == (3, 3)
    assert (specs["node"]["parallelism"], specs["node"]["completions"]) == (6, 6)
    assert await build("parallel_count_by_name", V2_1) == objects
