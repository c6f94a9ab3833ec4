"""Cross-check of ValidateObjects: the same TrainJobs validated by upstream v2.1.0 and by ours.

Each error is compared as its rendered text (``<path>: <Type>: <value>: <detail>``); upstream
aggregates plugins in Go map order, so both lists are compared sorted. Cases where we diverge on
purpose (docs/behaviour/trainer.md §9 quirk 7) are marked and skipped. Usage as in ``compare.py``:

    .venv/bin/python test/unit/runtime/testdata/upstream_check/compare_validation.py /tmp/trainer-upstream
"""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from runtime_fixtures import FakeReader, RecordingIndexer, rjob, training_runtime, trainjob  # noqa: E402

from trainer.runtime.registry import new_runtimes  # noqa: E402

Json = dict[str, Any]
TUNE_NODE = rjob("node", "trainer", [{"name": "node", "command": ["tune", "run", "output_dir=/o"]}])


def tr_without_container(job: int) -> Json:
    runtime = training_runtime()
    runtime["spec"]["template"]["spec"]["replicatedJobs"][job]["template"]["spec"]["template"]["spec"][
        "containers"
    ] = []
    return runtime


def tune_case(runtime_name: str, **trainer: Any) -> tuple[Json, Json]:
    runtime = training_runtime(runtime_name, rjobs=[TUNE_NODE], ml_policy={"torch": {}})
    return runtime, trainjob(runtime=runtime_name, trainer={"command": ["tune", "run"], **trainer})


def jobset(actives: dict[str, int]) -> Json:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "test-job", "namespace": "default"},
        "spec": {"replicatedJobs": []},
        "status": {
            "replicatedJobsStatus": [
                {"name": n, "ready": 0, "succeeded": 0, "failed": 0, "active": a, "suspended": 0}
                for n, a in actives.items()
            ]
        },
    }


def sa(name: str) -> list[Json]:
    return [{"targetJobs": [{"name": "node"}], "spec": {"serviceAccountName": name}}]


QLORA = ["model.lora_attn_modules=[q_proj, v_proj, output_proj]", "model.quantize_base=True"]


def cases() -> list[tuple[str, Json | None, Json, Json | None, list[Json]]]:
    ctr = training_runtime(cluster=True)
    deprecated = training_runtime(
        cluster=True, meta={"labels": {"trainer.kubeflow.org/support": "deprecated"}}
    )
    out: list[tuple[str, Json | None, Json, Json | None, list[Json]]] = [
        ("B1", ctr, trainjob(kind="ClusterTrainingRuntime"), None, []),
        ("B2", None, trainjob(runtime="unsupported-runtime", kind="ClusterTrainingRuntime"), None, []),
        ("B3", deprecated, trainjob(kind="ClusterTrainingRuntime"), None, []),
        ("B5", None, trainjob(runtime="invalid"), None, []),
        ("B7", tr_without_container(1), trainjob(initializer={"model": {"storageUri": "hf://m"}}), None, []),
        ("B8", tr_without_container(0), trainjob(initializer={"dataset": {}}), None, []),
        (
            "F63",
            training_runtime(rjobs=[rjob("random", None, [])]),
            trainjob(initializer={"dataset": {}}),
            None,
            [],
        ),
        (
            "B10",
            training_runtime(ml_policy={"mpi": {}}),
            trainjob(trainer={"numProcPerNode": "invalid"}),
            None,
            [],
        ),
        (
            "B11+B13",
            training_runtime(ml_policy={"torch": {}}),
            trainjob(trainer={"numProcPerNode": "npu", "env": [{"name": "PET_NODE_RANK", "value": "1"}]}),
            None,
            [],
        ),
        (
            "F53",
            training_runtime(
                rjobs=[rjob("node", "trainer", [{"name": "node"}])],
                ml_policy={"mpi": {"runLauncherAsNode": True}},
            ),
            trainjob(trainer={"numNodes": 2}),
            None,
            [],
        ),
        ("F34", *tune_case("torchtune-llama3.1-70b", numNodes=1, numProcPerNode="auto"), None, []),
        ("F35", *tune_case("torchtune-llama3.2-3b", numNodes=2, numProcPerNode="auto"), None, []),
        (
            "F36",
            *tune_case("torchtune-qwen2.5-1.5b", numNodes=1, numProcPerNode="auto", args=QLORA),
            None,
            [],
        ),
        (
            "F37",
            *tune_case(
                "torchtune-llama3.2-1b",
                numNodes=1,
                numProcPerNode="auto",
                args=QLORA,
                resourcesPerNode={"requests": {"example.com/gpu": "2"}},
            ),
            None,
            [],
        ),
        (
            "F68-F71",
            training_runtime(),
            trainjob(
                podTemplateOverrides=[
                    {"targetJobs": [{"name": "invalid"}], "spec": {"containers": [{"name": "x"}]}},
                    {
                        "targetJobs": [{"name": "node"}],
                        "spec": {
                            "initContainers": [{"name": "nope"}],
                            "containers": [{"name": "node", "env": [{"name": "E", "value": "v"}]}],
                        },
                    },
                ]
            ),
            None,
            [],
        ),
        (
            "F74",
            training_runtime(),
            trainjob(podTemplateOverrides=sa("b")),
            trainjob(podTemplateOverrides=sa("a")),
            [],
        ),
        (
            "F78",
            training_runtime(),
            trainjob(suspend=True, podTemplateOverrides=sa("b")),
            trainjob(suspend=True, podTemplateOverrides=sa("a")),
            [jobset({"dataset-initializer": 1, "node": 2})],
        ),
        (
            "F97",
            training_runtime(
                template_meta={"annotations": {"scheduling.volcano.sh/queue-name": ""}},
                pod_group_policy={"volcano": {}},
            ),
            trainjob(),
            None,
            [],
        ),
        (
            "F98",
            training_runtime(
                rjobs=[
                    rjob("node", None, [{"name": "node"}], pod_extra={"priorityClassName": "non-existent"})
                ],
                pod_group_policy={"volcano": {}},
            ),
            trainjob(),
            None,
            [],
        ),
    ]
    return out


async def ours(runtime: Json | None, new: Json, old: Json | None, existing: list[Json]) -> Json:
    objects = [runtime] if runtime else []
    runtimes = await new_runtimes(FakeReader([*objects, *existing]), RecordingIndexer())
    key = f"{new['spec']['runtimeRef']['kind']}.trainer.kubeflow.org"
    warnings, errors = await runtimes[key].validate_objects(old, new)
    return {"warnings": warnings, "errors": sorted(str(e) for e in errors)}


def main(binary: str) -> int:
    items = cases()
    stdin = "".join(
        json.dumps({"mode": "validate", "runtime": r, "trainjob": n, "old": o, "existing": e}) + "\n"
        for _, r, n, o, e in items
    )
    lines = subprocess.run(
        [binary], input=stdin, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    failed = 0
    for (name, runtime, new, old, existing), line in zip(items, lines, strict=True):
        upstream = json.loads(line)
        upstream = {
            "warnings": upstream.get("warnings") or [],
            "errors": sorted(upstream.get("errors") or []),
        }
        mine = asyncio.run(ours(copy.deepcopy(runtime), new, old, existing))
        same = mine == upstream
        failed += not same
        print(("SAME " if same else "DIFF ") + name)
        if not same:
            print("    ours:    ", json.dumps(mine))
            print("    upstream:", json.dumps(upstream))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
