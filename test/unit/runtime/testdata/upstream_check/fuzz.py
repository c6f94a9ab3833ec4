"""Randomised cross-check of NewObjects against upstream v2.1.0 (see ``compare.py`` for setup).

Draws runtimes (plain, torch, MPI with and without launcher-as-node; coscheduling, volcano)
and TrainJobs (numNodes, numProcPerNode words and ints, resources, env, initializers,
overrides, torchtune commands) and reports every scenario whose objects differ.

    .venv/bin/python test/unit/runtime/testdata/upstream_check/fuzz.py /tmp/trainer-upstream [count] [seed]
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

from compare import differences, masked, ours  # noqa: E402
from runtime_fixtures import rjob, training_runtime, trainjob, wrapper_rjobs  # noqa: E402

Json = dict[str, Any]


def maybe(rng: random.Random, value: Any, p: float = 0.5) -> Any:
    return value if rng.random() < p else None


def resources(rng: random.Random) -> Json | None:
    choice = rng.choice(
        [
            None,
            {"requests": {"cpu": rng.choice(["1", "2500m", "0.7", "3.7", "4"])}},
            {"limits": {"nvidia.com/gpu": rng.choice([1, 2, "4"])}},
            {
                "requests": {"cpu": "8", "memory": "16Gi"},
                "limits": {"example.com/gpu": rng.choice(["1", "2"])},
            },
            {"requests": {"cpu": "500m", "memory": "1.5Gi"}},
        ]
    )
    return choice


def decorate(rng: random.Random, rjobs: list[Json]) -> None:
    """Sidecars, init containers, pod overhead, priority classes and ports on some pod templates."""
    for item in rjobs:
        pod = item["template"]["spec"]["template"]["spec"]
        if rng.random() < 0.3:
            pod["initContainers"] = [
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "250m"}}},
                {"name": "prep", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
            ]
        if rng.random() < 0.2:
            pod["overhead"] = {"cpu": "100m"}
        if rng.random() < 0.2:
            pod["priorityClassName"] = rng.choice(["high", "system-node-critical"])
        if rng.random() < 0.2:
            pod["containers"][0]["ports"] = [{"containerPort": 8080}]
        if rng.random() < 0.2:
            pod["containers"][0]["env"] = [{"name": "A", "value": "runtime"}, {"name": "R", "value": "r"}]


def runtime(rng: random.Random) -> Json:
    kind = rng.choice(["plain", "torch", "mpi", "mpi-launcher", "tune"])
    extra = {"image": "img"}
    res = resources(rng)
    if res:
        extra["resources"] = res
    pgp = rng.choice(
        [
            None,
            {"coscheduling": {"scheduleTimeoutSeconds": 30}},
            {"volcano": {}},
            {"volcano": {"networkTopology": {"mode": "soft", "highestTierAllowed": 2}}},
        ]
    )
    if kind in ("plain", "torch"):
        rjobs = wrapper_rjobs(extra=extra, depends_on=rng.random() < 0.5)
        decorate(rng, rjobs)
        policy = {"numNodes": rng.choice([1, 3])} if rng.random() < 0.8 else None
        if kind == "torch":
            policy = {**(policy or {}), "torch": {"numProcPerNode": rng.choice(["auto", "cpu", "gpu", 2])}}
        spec_extra = {"network": {"subdomain": "custom"}} if rng.random() < 0.2 else None
        return training_runtime(rjobs=rjobs, ml_policy=policy, pod_group_policy=pgp, spec_extra=spec_extra)
    if kind == "tune":
        name = rng.choice(["torchtune-llama3.2-1b", "torchtune-qwen2.5-1.5b", "torchtune-llama3.3-70b"])
        command = [
            "tune",
            "run",
            "full_finetune_distributed",
            "dataset=x",
            "output_dir=/o",
            "tokenizer.path=/t",
        ]
        node = rjob("node", "trainer", [{"name": "node", "command": command, **extra}])
        return training_runtime(
            name, rjobs=[node], ml_policy={"numNodes": 1, "torch": {}}, pod_group_policy=pgp
        )
    launcher_as_node = kind == "mpi-launcher"
    launcher = rjob(
        "launcher",
        "trainer" if launcher_as_node else None,
        [{"name": "node", "command": ["mpirun"], **extra}],
    )
    node = rjob(
        "node",
        None if launcher_as_node else "trainer",
        [{"name": "node", **extra}],
        parallelism=rng.choice([None, 2]),
    )
    # CRD defaults are written out: upstream dereferences them without the API server's defaulting.
    mpi = {
        "numProcPerNode": rng.choice([1, 4]),
        "mpiImplementation": "OpenMPI",
        "sshAuthMountPath": "/home/u/.ssh",
        "runLauncherAsNode": launcher_as_node,
    }
    return training_runtime(
        rjobs=[launcher, node], ml_policy={"numNodes": 1, "mpi": mpi}, pod_group_policy=pgp
    )


def train_job(rng: random.Random, runtime_name: str) -> Json:
    spec: Json = {"suspend": rng.random() < 0.5}
    trainer: Json = {}
    if rng.random() < 0.7:
        trainer["numNodes"] = rng.choice([1, 2, 5])
    if rng.random() < 0.5:
        trainer["numProcPerNode"] = rng.choice(["auto", "cpu", "gpu", 1, 3, 8])
    res = resources(rng)
    if res:
        trainer["resourcesPerNode"] = res
    if rng.random() < 0.4:
        trainer["env"] = [{"name": "A", "value": "1"}, {"name": "PET_NNODES", "value": "9"}][
            : rng.randint(1, 2)
        ]
    if rng.random() < 0.3:
        trainer["image"] = "tj-img"
    if runtime_name.startswith("torchtune") and rng.random() < 0.8:
        trainer["command"] = ["tune", "run"]
        trainer["args"] = rng.sample(
            ["model.lora_attn_modules=[q]", "model.quantize_base=True", "model.use_dora=True", "epochs=1"],
            rng.randint(0, 3),
        )
    elif rng.random() < 0.3:
        trainer["command"] = ["python", "train.py"]
    if trainer or rng.random() < 0.5:
        spec["trainer"] = trainer
    if rng.random() < 0.3:
        spec["initializer"] = {
            "dataset": {"storageUri": "hf://d", "secretRef": {"name": "s"}},
            "model": {"env": [{"name": "M", "value": "m"}]},
        }
    if rng.random() < 0.3:
        spec["labels"] = {"l": "v"}
        spec["annotations"] = {"scheduling.volcano.sh/queue-name": "q"}
    if rng.random() < 0.3:
        spec["podTemplateOverrides"] = [
            {
                "targetJobs": [{"name": "node"}],
                "metadata": {"labels": {"o": "1"}},
                "spec": {
                    "nodeSelector": {"n": "1"},
                    "tolerations": [{"key": "k", "operator": "Exists"}],
                    "volumes": [{"name": "extra", "emptyDir": {}}],
                    "containers": [{"name": "node", "volumeMounts": [{"name": "extra", "mountPath": "/x"}]}],
                },
            }
        ]
    return trainjob(runtime=runtime_name, **spec)


def update_of(rng: random.Random, tj: Json) -> tuple[Json | None, list[Json]]:
    """Half the validations are updates: an older TrainJob with other overrides, maybe a live JobSet."""
    if rng.random() < 0.5:
        return None, []
    old = json.loads(json.dumps(tj))
    if rng.random() < 0.7:
        old["spec"]["podTemplateOverrides"] = [
            {"targetJobs": [{"name": "node"}], "spec": {"serviceAccountName": "x"}}
        ]
    existing = []
    if rng.random() < 0.6:
        existing.append(
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": {"name": "test-job", "namespace": "default"},
                "spec": {"replicatedJobs": []},
                "status": {
                    "replicatedJobsStatus": [
                        {
                            "name": n,
                            "ready": 0,
                            "succeeded": 0,
                            "failed": 0,
                            "active": rng.choice([0, 1]),
                            "suspended": 0,
                        }
                        for n in ("dataset-initializer", "node")
                    ]
                },
            }
        )
    return old, existing


def validation_differences(cases: list[tuple[Json, Json]], binary: str) -> int:
    """Compare ValidateObjects on the same scenarios; upstream panics (docs/behaviour/trainer.md §9 quirk 7) are skipped."""
    import asyncio

    from compare_validation import ours as validate_ours

    rng = random.Random(len(cases))
    updates = [update_of(rng, t) for _, t in cases]
    stdin = "".join(
        json.dumps({"mode": "validate", "runtime": r, "trainjob": t, "old": old, "existing": ex}) + "\n"
        for (r, t), (old, ex) in zip(cases, updates, strict=True)
    )
    lines = subprocess.run(
        [binary], input=stdin, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    failed = skipped = 0
    for (rt, tj), (old, ex), line in zip(cases, updates, lines, strict=True):
        upstream = json.loads(line)
        if "panic" in upstream.get("error", ""):
            skipped += 1
            continue
        theirs = {"warnings": upstream.get("warnings") or [], "errors": sorted(upstream.get("errors") or [])}
        mine = asyncio.run(validate_ours(rt, tj, old, ex))
        if mine != theirs:
            failed += 1
            if failed <= 5:
                print(f"VALIDATION DIFF trainjob={json.dumps(tj)}\n  ours={mine}\n  upstream={theirs}")
    print(f"{len(cases)} random validations, {failed} differ, {skipped} skipped (upstream panics)")
    return failed


def existing_objects(rng: random.Random) -> list[Json]:
    """Objects a previous reconcile may have left: a JobSet (running or suspended), PodGroups, the Secret."""
    meta = {"name": "test-job", "namespace": "default"}
    out: list[Json] = []
    if rng.random() < 0.3:
        out.append(
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": meta,
                "spec": {"suspend": rng.random() < 0.5, "replicatedJobs": []},
            }
        )
    if rng.random() < 0.3:
        out.append(
            {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": meta, "spec": {}}
        )
    if rng.random() < 0.3:
        out.append(
            {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": meta, "spec": {}}
        )
    if rng.random() < 0.3:
        secret_meta = {"name": "test-job-mpi-ssh-auth", "namespace": "default"}
        out.append({"apiVersion": "v1", "kind": "Secret", "metadata": secret_meta, "data": {}})
    return out


def main(binary: str, count: int, seed: int) -> int:
    rng = random.Random(seed)
    cases = []
    existing: list[list[Json]] = []
    for _ in range(count):
        rt = runtime(rng)
        cases.append((rt, train_job(rng, rt["metadata"]["name"])))
        existing.append(existing_objects(rng))
    stdin = "".join(
        json.dumps({"runtime": r, "trainjob": t, "existing": e}) + "\n"
        for (r, t), e in zip(cases, existing, strict=True)
    )
    lines = subprocess.run(
        [binary], input=stdin, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    failed = 0
    for index, ((rt, tj), line) in enumerate(zip(cases, lines, strict=True)):
        diff = differences(ours(rt, tj, existing[index]), masked(json.loads(line)))
        if diff:
            failed += 1
            if failed <= 5:
                print(f"DIFF case {index}: runtime={json.dumps(rt)[:400]}\n  trainjob={json.dumps(tj)}")
                for item in diff[:8]:
                    print("   ", item)
    print(f"{count} random scenarios, {failed} differ")
    failed += validation_differences(cases, binary)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(
        main(
            sys.argv[1],
            int(sys.argv[2]) if len(sys.argv) > 2 else 300,
            int(sys.argv[3]) if len(sys.argv) > 3 else 1,
        )
    )
