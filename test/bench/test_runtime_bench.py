"""Micro-benchmark: build the objects of a 1,000-node TrainJob (``make bench``).

Why: NewObjects runs on every reconcile of every TrainJob; at 1,000 nodes the hostfile has
1,000 lines and the PodGroup sums 1,000 pods, so the build must stay far below a reconcile's
budget. Prints objects per second and milliseconds per build for three shapes of runtime.
"""

from __future__ import annotations

import asyncio
import copy
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "runtime"))

from runtime_fixtures import FakeReader, RecordingIndexer, trainjob

from trainer.runtime.registry import CLUSTER_TRAINING_RUNTIME_KEY, new_runtimes

Json = dict[str, Any]
NODES = 1000
RUNTIMES = Path(__file__).resolve().parents[2] / "config" / "runtimes"
# A reconcile should stay well under this; the build is a small part of it.
BUDGET_SECONDS = 0.25

pytestmark = pytest.mark.bench


def shipped(name: str) -> Json:
    runtime = yaml.safe_load((RUNTIMES / f"{name}.yaml").read_text())
    for item in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        item.setdefault("groupName", "default")
        item.setdefault("replicas", 1)
    return runtime


def gang(runtime: Json) -> Json:
    runtime = copy.deepcopy(runtime)
    runtime["spec"]["podGroupPolicy"] = {"coscheduling": {"scheduleTimeoutSeconds": 60}}
    return runtime


def big_trainjob(runtime: str) -> Json:
    return trainjob(
        name="big",
        runtime=runtime,
        kind="ClusterTrainingRuntime",
        suspend=True,
        trainer={
            "numNodes": NODES,
            "command": ["torchrun", "train.py"],
            "resourcesPerNode": {
                "requests": {"cpu": "8", "memory": "32Gi"},
                "limits": {"nvidia.com/gpu": "8"},
            },
        },
    )


def measure(label: str, runtime: Json, existing: list[Json], rounds: int) -> float:
    reader = FakeReader([runtime, *existing])
    tj = big_trainjob(runtime["metadata"]["name"])

    async def run() -> tuple[int, float]:
        ctr = (await new_runtimes(reader, RecordingIndexer()))[CLUSTER_TRAINING_RUNTIME_KEY]
        await ctr.new_objects(tj)  # warm-up
        objects = 0
        start = time.perf_counter()
        for _ in range(rounds):
            objects += len(await ctr.new_objects(tj))
        return objects, time.perf_counter() - start

    objects, elapsed = asyncio.run(run())
    per_build = elapsed / rounds
    print(
        f"\n{label}: {NODES} nodes, {objects // rounds} objects/build, "
        f"{per_build * 1000:.2f} ms/build, {objects / elapsed:,.0f} objects/s"
    )
    return per_build


def test_bench_torch_with_coscheduling() -> None:
    assert (
        measure("torch-distributed + PodGroup", gang(shipped("torch-distributed")), [], 200) < BUDGET_SECONDS
    )


def test_bench_deepspeed_steady_state() -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "big-mpi-ssh-auth", "namespace": "default"},
    }
    per_build = measure(
        "deepspeed-distributed (Secret exists)", shipped("deepspeed-distributed"), [secret], 200
    )
    assert per_build < BUDGET_SECONDS


def test_bench_deepspeed_first_build_with_key_generation() -> None:
    assert (
        measure("deepspeed-distributed (new SSH key)", shipped("deepspeed-distributed"), [], 20)
        < BUDGET_SECONDS
    )
