"""Regenerate ../features_go_v2_3_0.json: what Trainer v2.3.0's own runtime builds (main.go here:
``core.New(...).NewObjects`` on a fake client) for the cases below -- torch ``envInjection``,
``resourcesPerNode`` merged per key, ``SyncParallelCount``, the endpoints of every replica and the
JobSet's ``volumeClaimPolicies``.

Run from this directory: ``python generate.py`` (Go >= 1.26 and the module proxy, or a module
cache that has trainer v2.3.0's dependencies). The MPI SSH key Secret's data is masked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from runtime_fixtures import rjob, training_runtime, trainjob  # noqa: E402

Json = dict[str, Any]

TORCH_NODE = {"name": "node", "image": "img", "env": [{"name": "RUNTIME_ENV", "value": "1"}]}


def _torch_targets_runtime(targets: list[Json], **policy: Any) -> Json:
    """A torch runtime whose ``node`` job has an init container, the trainer and a sidecar, and a
    second job ``aux`` with one container."""
    return training_runtime(
        rjobs=[
            rjob(
                "node",
                "trainer",
                [dict(TORCH_NODE), {"name": "monitor", "image": "mon"}],
                init_containers=[
                    {"name": "preflight", "image": "pre", "env": [{"name": "PET_NNODES", "value": "old"}]}
                ],
            ),
            rjob("aux", None, [{"name": "helper", "image": "help"}]),
        ],
        ml_policy={"numNodes": 1, "torch": {"envInjection": {"targets": targets}}, **policy},
    )


def cases() -> dict[str, tuple[Json, Json]]:
    out: dict[str, tuple[Json, Json]] = {}
    targets = [
        {"jobName": "node", "containerNames": ["preflight", "monitor"]},
        {"jobName": "aux", "containerNames": ["helper"]},
    ]
    out["env_injection_targets"] = (
        _torch_targets_runtime(targets),
        trainjob(trainer={"numNodes": 2, "numProcPerNode": 4, "env": [{"name": "FOO", "value": "bar"}]}),
    )
    out["env_injection_without_trainer"] = (_torch_targets_runtime(targets, numNodes=3), trainjob())
    out["env_injection_trainer_container_targeted"] = (
        _torch_targets_runtime([{"jobName": "node", "containerNames": ["node"]}]),
        trainjob(trainer={"numNodes": 2, "env": [{"name": "FOO", "value": "bar"}]}),
    )
    out["env_injection_cpu_auto"] = (
        _torch_targets_runtime([{"jobName": "aux", "containerNames": ["helper"]}]),
        trainjob(trainer={"resourcesPerNode": {"requests": {"cpu": "3"}}}),
    )
    tune = training_runtime(
        "torchtune-llama3.2-1b",
        rjobs=[
            rjob(
                "node",
                "trainer",
                [{"name": "node", "image": "ghcr.io/kubeflow/trainer/torchtune-trainer"}],
                init_containers=[{"name": "preflight-check", "image": "pre"}],
            )
        ],
        ml_policy={
            "numNodes": 1,
            "torch": {
                "envInjection": {"targets": [{"jobName": "node", "containerNames": ["preflight-check"]}]}
            },
        },
    )
    out["env_injection_torchtune"] = (
        tune,
        trainjob(
            runtime="torchtune-llama3.2-1b",
            trainer={
                "numNodes": 2,
                "command": ["tune", "run"],
                "args": ["dtype=fp16"],
                "resourcesPerNode": {"limits": {"cpu": "8", "example.com/gpu": "4"}},
            },
        ),
    )
    out["env_injection_missing_target"] = (
        _torch_targets_runtime([{"jobName": "node", "containerNames": ["monitor", "missing"]}]),
        trainjob(trainer={"numNodes": 2}),
    )
    out["env_injection_missing_job"] = (
        _torch_targets_runtime([{"jobName": "nope", "containerNames": ["helper"]}]),
        trainjob(trainer={"numNodes": 2}),
    )

    node_res = {
        "name": "node",
        "image": "img",
        "resources": {
            "limits": {"cpu": "8", "memory": "32Gi"},
            "requests": {"cpu": "4", "memory": "16Gi"},
        },
    }
    gang = {"coscheduling": {"scheduleTimeoutSeconds": 60}}
    out["resources_merged_per_key"] = (
        training_runtime(
            rjobs=[rjob("node", "trainer", [node_res, {"name": "sidecar", "image": "s"}])],
            ml_policy={"numNodes": 1, "torch": {}},
            pod_group_policy=gang,
        ),
        trainjob(
            trainer={
                "numNodes": 2,
                "resourcesPerNode": {
                    "limits": {"nvidia.com/gpu": "2", "cpu": "6"},
                    "requests": {"memory": "20Gi", "nvidia.com/gpu": 2},
                },
            }
        ),
    )
    out["resources_runtime_without_resources"] = (
        training_runtime(
            rjobs=[rjob("node", "trainer", [{"name": "node", "image": "img"}])], ml_policy={"torch": {}}
        ),
        trainjob(trainer={"resourcesPerNode": {"requests": {"cpu": "500m"}}}),
    )
    out["resources_empty_trainjob_resources"] = (
        training_runtime(rjobs=[rjob("node", "trainer", [dict(node_res)])], ml_policy={"torch": {}}),
        trainjob(trainer={"resourcesPerNode": {}}),
    )
    out["resources_claims_dropped"] = (
        training_runtime(
            rjobs=[
                rjob(
                    "node",
                    "trainer",
                    [
                        {
                            "name": "node",
                            "image": "img",
                            "resources": {"limits": {"cpu": "2"}, "claims": [{"name": "gpu-claim"}]},
                        }
                    ],
                    pod_extra={"resourceClaims": [{"name": "gpu-claim", "resourceClaimName": "c"}]},
                )
            ],
            ml_policy={"torch": {}},
        ),
        trainjob(trainer={"resourcesPerNode": {"limits": {"memory": "1Gi"}, "claims": [{"name": "other"}]}}),
    )
    out["resources_no_ml_policy_ignored"] = (
        training_runtime(rjobs=[rjob("node", "trainer", [dict(node_res)])]),
        trainjob(trainer={"resourcesPerNode": {"limits": {"nvidia.com/gpu": "1"}}}),
    )
    out["resources_plainml_merged"] = (
        training_runtime(
            rjobs=[rjob("node", "trainer", [dict(node_res)])],
            ml_policy={"numNodes": 2},
            pod_group_policy=gang,
        ),
        trainjob(trainer={"resourcesPerNode": {"requests": {"cpu": "1"}}}),
    )

    mpi_node = {"name": "node", "image": "img", "resources": {"limits": {"cpu": "2", "memory": "4Gi"}}}
    mpi_rjobs = [
        rjob("launcher", None, [{"name": "node", "image": "img"}]),
        rjob("node", "trainer", [dict(mpi_node)]),
    ]
    mpi_rjobs[1]["replicas"] = 2
    out["mpi_replicas_endpoints_and_resources"] = (
        training_runtime(
            rjobs=mpi_rjobs,
            ml_policy={
                "numNodes": 1,
                "mpi": {
                    "mpiImplementation": "OpenMPI",
                    "numProcPerNode": 2,
                    "sshAuthMountPath": "/root/.ssh",
                },
            },
        ),
        trainjob(trainer={"numNodes": 2, "resourcesPerNode": {"limits": {"cpu": "3"}}}),
    )
    launcher_rjobs = [
        rjob("launcher", None, [{"name": "node", "image": "img"}]),
        rjob("node", "trainer", [dict(mpi_node)]),
    ]
    launcher_rjobs[0]["replicas"] = 3
    out["mpi_launcher_as_node_replicas"] = (
        training_runtime(
            rjobs=launcher_rjobs,
            ml_policy={
                "numNodes": 2,
                "mpi": {
                    "mpiImplementation": "OpenMPI",
                    "numProcPerNode": 1,
                    "sshAuthMountPath": "/root/.ssh",
                    "runLauncherAsNode": True,
                },
            },
        ),
        trainjob(trainer={"resourcesPerNode": {"requests": {"memory": "2Gi"}}}),
    )

    aux = rjob("aux", None, [{"name": "helper", "image": "help"}], parallelism=3)
    aux["replicas"] = 2
    out["parallel_count_by_name"] = (
        training_runtime(
            rjobs=[aux, rjob("node", "trainer", [{"name": "node", "image": "img"}], parallelism=5)],
            ml_policy={"numNodes": 4, "torch": {}},
            pod_group_policy=gang,
        ),
        trainjob(trainer={"numNodes": 6}),
    )
    out["parallel_count_no_policy"] = (
        training_runtime(rjobs=[rjob("node", "trainer", [{"name": "node", "image": "img"}], parallelism=5)]),
        trainjob(trainer={"numNodes": 2}),
    )

    # JobSet volumeClaimPolicies as the shipped torchtune runtimes have them, one with its own
    # retention policy (docs/behaviour/trainer.md §12.16)
    mounted = {
        "name": "node",
        "image": "img",
        "volumeMounts": [{"name": "initializer", "mountPath": "/workspace"}],
    }
    claims = training_runtime(
        rjobs=[rjob("node", "trainer", [mounted])], ml_policy={"numNodes": 1, "torch": {}}
    )
    claims["spec"]["template"]["spec"]["volumeClaimPolicies"] = [
        {
            "templates": [
                {
                    "metadata": {"name": "initializer"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "20Gi"}},
                    },
                }
            ]
        },
        {
            "templates": [
                {"metadata": {"name": "kept"}, "spec": {"resources": {"requests": {"storage": "1024Mi"}}}}
            ],
            "retentionPolicy": {"whenDeleted": "Retain"},
        },
    ]
    out["volume_claim_policies"] = (claims, trainjob(trainer={"numNodes": 1}))
    return out


def masked(objects: Any) -> Any:
    if not isinstance(objects, list):
        return objects
    for obj in objects:
        if obj.get("kind") == "Secret":
            obj["data"] = dict.fromkeys(obj.get("data", {}), "<key>")
    return objects


def main() -> None:
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    all_cases = cases()
    stdin = "".join(json.dumps({"runtime": r, "trainjob": t}) + "\n" for r, t in all_cases.values())
    binary = os.environ.get("FEATURES_GO_BINARY")
    command = [binary] if binary else ["go", "run", "."]
    lines = subprocess.run(
        command, cwd=HERE, env=env, input=stdin, text=True, check=True, capture_output=True
    ).stdout.splitlines()
    fixtures = {}
    for (name, (runtime, job)), line in zip(all_cases.items(), lines, strict=True):
        fixtures[name] = {"runtime": runtime, "trainjob": job, "go": masked(json.loads(line))}
    target = HERE.parent / "features_go_v2_3_0.json"
    target.write_text(json.dumps(fixtures, indent=1, sort_keys=True) + "\n")
    print(f"{len(fixtures)} cases written to {target}")


if __name__ == "__main__":
    main()
