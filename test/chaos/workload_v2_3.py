"""The chaos workload at API level v2.3 (Trainer v2.3.0, JobSet v0.12.0): the flavours both levels
share on Trainer v2.3.0's shipped runtimes (``config/overlays/v2.3/runtimes``), plus what only
v2.3 has (docs/behaviour/trainer.md §12, jobset-v0.12.md §1.4):

- ``torch-patched``: ``torch-distributed`` with the runtime patches of two managers (JobSet and pod
  labels; a Job annotation, a pod label and a toleration) and an ``activeDeadlineSeconds`` it
  never reaches: Complete, the JobSet, every Job pod template and every pod carry the labels;
- ``jax``, ``xgboost``: the shipped ``jax-distributed`` and ``xgboost-distributed``, 2 nodes:
  Complete;
- ``expiring``: ``activeDeadlineSeconds`` (``Params.deadline_seconds``, so it expires while the
  faults run) on a runtime whose JobSet has a ``volumeClaimPolicies`` claim no volume serves
  (its pods stay Pending): Failed with reason ``DeadlineExceeded``, its JobSet deleted (and with
  it the PVC, ``whenDeleted: Delete``), the JobSet made once and never again (none at all, and
  no runtime snapshot, when the faults delayed its first pass past the deadline: T-17);
- ``resumed``: created suspended with a runtime patch, the patch changed while suspended, then
  resumed (two merge patches a few seconds apart during the run): Complete, its Jobs and pods
  carry the changed patch's label;
- plain JobSets with ``volumeClaimPolicies`` (a PersistentVolume pre-bound to each claim, so the
  pods run): ``jobset-claims`` Completed with its PVC, ``jobset-claims-ttl``
  (``ttlSecondsAfterFinished``) Completed, then deleted by JobSet's TTL with its PVC;
- every TrainJob: exactly one runtime snapshot ConfigMap, owned by it, of its runtime.

Mix (per 20 TrainJobs): 2 torch, 2 torch-patched, 2 jax, 2 xgboost, 2 deepspeed, 2 MPI, 2 gang,
1 deadline, 2 expiring, 1 suspended, 2 resumed; plain JobSets (per 5): 2 plain, 1 with claims,
1 with claims and a TTL, 1 with the Job deadline (Failed).
"""

from __future__ import annotations

import copy

from workload import (
    FLAVOURS,
    JOBSET_API,
    ROOT,
    Flavour,
    Json,
    LevelWorkload,
    common_jobset,
    common_runtimes,
    common_trainjob,
    namespaced,
    pod_template,
    shipped_runtime_docs,
)

RUNTIMES = ROOT / "config" / "overlays" / "v2.3" / "runtimes"
SHIPPED = tuple(RUNTIMES / f"{name}-distributed.yaml" for name in ("torch", "deepspeed", "jax", "xgboost"))

TEAM = "chaos.kubeflow.org/team"
PLACEMENT = "chaos.kubeflow.org/placement"
PHASE = "chaos.kubeflow.org/phase"
NEVER_DEADLINE = 3600
"""The ``activeDeadlineSeconds`` of TrainJobs that must complete long before it."""
CLAIM_TTL_SECONDS = 5
CLAIM = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}

FLAVOURS.update(
    {
        "torch-patched": Flavour(
            "TrainJob",
            "Complete",
            {"node": 1},
            pod_labels={TEAM: "vision", PLACEMENT: "anywhere"},
            jobset_labels={TEAM: "vision"},
        ),
        "jax": Flavour("TrainJob", "Complete", {"node": 1}),
        "xgboost": Flavour("TrainJob", "Complete", {"node": 1}),
        "expiring": Flavour(
            "TrainJob", "Failed", keeps_jobset=False, reason="DeadlineExceeded", may_be_unbuilt=True
        ),
        "resumed": Flavour("TrainJob", "Complete", {"node": 1}, pod_labels={PHASE: "resumed"}),
        "jobset-claims": Flavour("JobSet", "Complete"),
        "jobset-claims-ttl": Flavour("JobSet", "Deleted"),
    }
)


def _node_patch(
    manager: str, job: Json | None = None, pod: Json | None = None, jobset: Json | None = None
) -> Json:
    """One manager's runtime patch of the ``node`` replicated job (and the JobSet's metadata)."""
    template: Json = {}
    if job:
        template["metadata"] = job
    if pod:
        template["spec"] = {"template": pod}
    spec: Json = {"replicatedJobs": [{"name": "node", "template": template}]}
    jobset_patch: Json = {"spec": spec}
    if jobset:
        jobset_patch["metadata"] = jobset
    return {"manager": manager, "trainingRuntimeSpec": {"template": jobset_patch}}


def _phase_patch(phase: str) -> Json:
    return _node_patch("chaos.kubeflow.org/scheduler", pod={"metadata": {"labels": {PHASE: phase}}})


def _trainjob(name: str, namespace: str, flavour: str, deadline_seconds: float) -> Json:
    if flavour in ("torch", "deepspeed", "mpi", "gang", "deadline", "suspended"):
        return common_trainjob(name, namespace, flavour)
    spec: Json
    if flavour == "torch-patched":
        spec = {
            "runtimeRef": {"name": "torch-distributed"},
            "activeDeadlineSeconds": NEVER_DEADLINE,
            "runtimePatches": [
                _node_patch(
                    "chaos.kubeflow.org/team",
                    pod={"metadata": {"labels": {TEAM: "vision"}}},
                    jobset={"labels": {TEAM: "vision"}},
                ),
                _node_patch(
                    "chaos.kubeflow.org/placement",
                    job={"annotations": {PLACEMENT: "anywhere"}},
                    pod={
                        "metadata": {"labels": {PLACEMENT: "anywhere"}},
                        "spec": {
                            "tolerations": [{"key": PLACEMENT, "operator": "Exists", "effect": "NoSchedule"}]
                        },
                    },
                ),
            ],
        }
    elif flavour in ("jax", "xgboost"):
        spec = {"runtimeRef": {"name": f"{flavour}-distributed"}, "trainer": {"numNodes": 2}}
    elif flavour == "expiring":
        spec = {
            "runtimeRef": {"name": "chaos-claims", "kind": "TrainingRuntime"},
            "activeDeadlineSeconds": max(1, round(deadline_seconds)),
        }
    elif flavour == "resumed":
        spec = {
            "runtimeRef": {"name": "torch-distributed"},
            "suspend": True,
            "activeDeadlineSeconds": NEVER_DEADLINE,
            "runtimePatches": [_phase_patch("suspended")],
        }
    else:
        raise ValueError(f"no TrainJob flavour {flavour!r} at level v2.3")
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _updates(_name: str, flavour: str) -> tuple[Json, ...]:
    """``resumed``: the runtime patch changed while suspended (the webhook allows it then, and the
    defaulter stamps a new ``time``), then the resume."""
    if flavour != "resumed":
        return ()
    return ({"spec": {"runtimePatches": [_phase_patch("resumed")]}}, {"spec": {"suspend": False}})


def _claims_jobset(name: str, namespace: str, ttl: bool) -> tuple[Json, Json]:
    """A JobSet with one ``data`` claim its pods mount, and the PersistentVolume pre-bound to that
    claim (``data-<name>``), so the scheduler places the pods and KWOK runs them."""
    job: Json = {
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "template": pod_template(mounts=[{"name": "data", "mountPath": "/data"}]),
        }
    }
    spec: Json = {
        "volumeClaimPolicies": [
            {
                "templates": [{"metadata": {"name": "data"}, "spec": copy.deepcopy(CLAIM)}],
                "retentionPolicy": {"whenDeleted": "Delete"},
            }
        ],
        "replicatedJobs": [{"name": "workers", "replicas": 1, "template": job}],
    }
    if ttl:
        spec["ttlSecondsAfterFinished"] = CLAIM_TTL_SECONDS
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{namespace}-data-{name}"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": f"/tmp/chaos/{name}"},
            "claimRef": {"namespace": namespace, "name": f"data-{name}"},
        },
    }
    jobset = {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    return pv, jobset


def _jobset(name: str, namespace: str, flavour: str) -> tuple[Json, ...]:
    if flavour in ("jobset-claims", "jobset-claims-ttl"):
        return _claims_jobset(name, namespace, ttl=flavour == "jobset-claims-ttl")
    return common_jobset(name, namespace, flavour)


def _runtimes(namespace: str) -> list[Json]:
    """The namespaced runtimes both levels have, and chaos-claims: torch whose JobSet claims a
    ``scratch`` PVC the ``node`` container mounts. No PersistentVolume serves it, so its pods stay
    Pending and only the TrainJob's deadline ends it."""
    docs = shipped_runtime_docs(SHIPPED)
    claims = namespaced(docs, "torch-distributed", "chaos-claims", namespace)
    jobset = claims["spec"]["template"]["spec"]
    jobset["volumeClaimPolicies"] = [
        {"templates": [{"metadata": {"name": "scratch"}, "spec": copy.deepcopy(CLAIM)}]}
    ]
    for rj in jobset["replicatedJobs"]:
        for container in rj["template"]["spec"]["template"]["spec"]["containers"]:
            if container["name"] == "node":
                container["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    return [*common_runtimes(docs, namespace), claims]


V2_3 = LevelWorkload(
    name="v2.3",
    mix=(
        ("torch",) * 2
        + ("torch-patched",) * 2
        + ("jax",) * 2
        + ("xgboost",) * 2
        + ("deepspeed",) * 2
        + ("mpi",) * 2
        + ("gang",) * 2
        + ("deadline",)
        + ("expiring",) * 2
        + ("suspended",)
        + ("resumed",) * 2
    ),
    jobset_mix=("jobset", "jobset-claims", "jobset-claims-ttl", "jobset", "jobset-deadline"),
    trainjob=_trainjob,
    trainjob_updates=_updates,
    jobset=_jobset,
    shipped_runtimes=SHIPPED,
    namespaced_runtimes=_runtimes,
    runtime_snapshots=True,
)
