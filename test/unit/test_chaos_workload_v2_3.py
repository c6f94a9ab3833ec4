"""The chaos suite's end-state checks at API level v2.3 (test/chaos/workload_v2_3.py): a converged
v2.3 run passes them, and each thing the v2.3 run must show fails them when it is not so -- a
JobSet left after its TrainJob's deadline or made twice, a wrong deadline reason, a missing or
foreign runtime snapshot, a runtime patch not on the Jobs or pods, a PVC orphaned, missing or made
twice, a TTL JobSet that stayed or was never seen Completed, a final condition set again."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "chaos"))

from workload import Item, JobHistory, Snapshot, build, history_problems, problems, settled_problems
from workload_v2_1 import V2_1
from workload_v2_3 import PHASE, V2_3

Json = dict[str, Any]
CONDITION = {"Complete": "Complete", "Failed": "Failed", "Suspended": "Suspended"}


def _true(kind: str, reason: str = "", at: str = "2026-12-01T00:00:00Z") -> Json:
    cond = {"type": kind, "status": "True", "lastTransitionTime": at}
    return cond | ({"reason": reason} if reason else {})


def _owned(kind: str, uid: str) -> Json:
    return {"ownerReferences": [{"kind": kind, "uid": uid, "controller": True}]}


def _items() -> list[Item]:
    return build("ns", 20, 5, 0, V2_3, deadline_seconds=30)


def _jobset(name: str, uid: str, rjs: dict[str, int], owner: Json | None, spec: Json | None = None) -> Json:
    meta: Json = {"name": name, "uid": uid} | (owner or {})
    return {
        "metadata": meta,
        "spec": {"replicatedJobs": [{"name": k, "replicas": v} for k, v in rjs.items()]} | (spec or {}),
        "status": {"conditions": [_true("Completed")]},
    }


def _converged(items: list[Item]) -> Snapshot:
    """The end state of ``items`` (TrainJobs and plain JobSets of level v2.3), built by hand."""
    snap = Snapshot({}, {}, {}, {}, [], [], [], [], [])
    for i, item in enumerate(items):
        uid = f"uid-{i}"
        obj = item.objects[-1]
        if item.kind == "JobSet":
            if item.expected == "Deleted":
                continue
            js = _jobset(
                item.name, uid, {rj["name"]: rj["replicas"] for rj in obj["spec"]["replicatedJobs"]}, None
            )
            js["spec"] = copy.deepcopy(obj["spec"])
            if item.expected == "Failed":
                js["status"]["conditions"] = [_true("Failed")]
            snap.jobsets[item.name] = js
            for rj in obj["spec"]["replicatedJobs"]:
                for idx in range(rj["replicas"]):
                    job = f"{item.name}-{rj['name']}-{idx}"
                    snap.jobs[job] = {
                        "metadata": {"name": job, "uid": f"job-{job}"} | _owned("JobSet", uid),
                        "status": {"conditions": [_true("Complete")]},
                    }
            for policy in obj["spec"].get("volumeClaimPolicies") or []:
                for template in policy["templates"]:
                    pvc = f"{template['metadata']['name']}-{item.name}"
                    snap.pvcs.append({"metadata": {"name": pvc, "uid": f"pvc-{pvc}"} | _owned("JobSet", uid)})
            continue
        spec = item.spec
        snap.trainjobs[item.name] = {
            "metadata": {"name": item.name, "uid": uid},
            "spec": obj["spec"],
            "status": {"conditions": [_true(CONDITION[item.expected], spec.reason)]},
        }
        ref = obj["spec"]["runtimeRef"]
        runtime = {"kind": ref.get("kind", "ClusterTrainingRuntime"), "metadata": {"name": ref["name"]}}
        snap.configmaps.append(
            {
                "metadata": {"name": f"{item.name}-runtime-snapshot"} | _owned("TrainJob", uid),
                "data": {"runtime": yaml.safe_dump(runtime)},
            }
        )
        if spec.mpi:
            snap.secrets.append({"metadata": {"name": f"{item.name}-mpi-ssh-auth"} | _owned("TrainJob", uid)})
            snap.configmaps.append(
                {"metadata": {"name": f"{item.name}-mpi-hostfile"} | _owned("TrainJob", uid)}
            )
        if spec.podgroup:
            snap.podgroups[item.name] = {"metadata": {"name": item.name} | _owned("TrainJob", uid)}
        if not spec.keeps_jobset:
            continue
        js = _jobset(item.name, f"js-{uid}", dict(spec.jobs), _owned("TrainJob", uid))
        js["metadata"]["labels"] = dict(spec.jobset_labels)
        js["spec"]["suspend"] = not spec.runs_pods
        js["status"]["conditions"] = [] if not spec.runs_pods else js["status"]["conditions"]
        snap.jobsets[item.name] = js
        for rj in spec.jobs:
            job = f"{item.name}-{rj}-0"
            snap.jobs[job] = {
                "metadata": {"name": job, "uid": f"job-{job}"} | _owned("JobSet", f"js-{uid}"),
                "spec": {"template": {"metadata": {"labels": dict(spec.pod_labels)}}},
                "status": {"conditions": [_true("Complete")] if spec.runs_pods else []},
            }
            if spec.runs_pods:
                snap.pods.append(
                    {
                        "metadata": {"name": f"{job}-pod", "labels": dict(spec.pod_labels)}
                        | _owned("Job", f"job-{job}")
                    }
                )
    return snap


def _one(items: list[Item], flavour: str) -> str:
    return next(i.name for i in items if i.flavour == flavour)


def test_a_converged_v2_3_run_passes_and_has_every_v2_3_flavour() -> None:
    items = _items()
    assert {i.flavour for i in items} >= {
        "torch-patched",
        "jax",
        "xgboost",
        "expiring",
        "resumed",
        "jobset-claims",
        "jobset-claims-ttl",
    }
    assert problems(items, _converged(items), runtime_snapshots=True) == []


def test_the_expiring_trainjob_must_fail_on_its_deadline_and_lose_its_jobset() -> None:
    items = _items()
    name = _one(items, "expiring")
    assert next(i for i in items if i.name == name).objects[0]["spec"]["activeDeadlineSeconds"] == 30

    kept = _converged(items)
    tj_uid = kept.trainjobs[name]["metadata"]["uid"]
    kept.jobsets[name] = _jobset(name, "js-again", {"node": 1}, _owned("TrainJob", tj_uid))
    assert f"TrainJob {name} (expiring) has JobSets [{name!r}], must have exactly []" in problems(
        items, kept, runtime_snapshots=True
    )

    other = _converged(items)
    other.trainjobs[name]["status"]["conditions"] = [_true("Failed", "FailedJobs")]
    assert any("with reason 'FailedJobs', must be 'DeadlineExceeded'" in p for p in problems(items, other))

    twice = _converged(items)
    twice.trainjobs[name]["status"]["conditions"].append(_true("Failed", "DeadlineExceeded"))
    assert f"TrainJob {name} has the condition types ['Failed'] more than once" in problems(
        items, twice, runtime_snapshots=True
    )


def test_each_trainjob_has_exactly_one_snapshot_of_its_own_runtime() -> None:
    items = _items()
    name = _one(items, "jax")

    missing = _converged(items)
    missing.configmaps = [
        c for c in missing.configmaps if c["metadata"]["name"] != f"{name}-runtime-snapshot"
    ]
    assert f"TrainJob {name} has 0 runtime snapshot ConfigMaps, must have 1" in problems(
        items, missing, runtime_snapshots=True
    )

    wrong = _converged(items)
    cm = next(c for c in wrong.configmaps if c["metadata"]["name"] == f"{name}-runtime-snapshot")
    cm["data"]["runtime"] = yaml.safe_dump(
        {"kind": "ClusterTrainingRuntime", "metadata": {"name": "torch-distributed"}}
    )
    assert any(
        p.startswith(f"runtime snapshot of TrainJob {name} holds")
        for p in problems(items, wrong, runtime_snapshots=True)
    )

    orphan = _converged(items)
    orphan.configmaps.append(
        {"metadata": {"name": "gone-runtime-snapshot"} | _owned("TrainJob", "uid-gone"), "data": {}}
    )
    assert "orphan runtime snapshot gone-runtime-snapshot (TrainJob uid uid-gone gone)" in problems(
        items, orphan, runtime_snapshots=True
    )

    # an expiring TrainJob whose first pass came after its deadline was never built (T-17)
    unbuilt = _converged(items)
    expiring = _one(items, "expiring")
    unbuilt.configmaps = [
        c for c in unbuilt.configmaps if c["metadata"]["name"] != f"{expiring}-runtime-snapshot"
    ]
    assert problems(items, unbuilt, runtime_snapshots=True) == []

    # level v2.1 makes none: one there is a problem
    assert any("must have 0" in p for p in problems(items, _converged(items), runtime_snapshots=False))


def test_runtime_patches_must_reach_the_jobset_the_jobs_and_the_pods() -> None:
    items = _items()
    resumed = _one(items, "resumed")
    stale = _converged(items)
    # the patch as it was before the change made while suspended
    stale.jobs[f"{resumed}-node-0"]["spec"]["template"]["metadata"]["labels"] = {PHASE: "suspended"}
    pod = next(p for p in stale.pods if p["metadata"]["name"] == f"{resumed}-node-0-pod")
    pod["metadata"]["labels"] = {PHASE: "suspended"}
    found = problems(items, stale, runtime_snapshots=True)
    assert (
        f"Job {resumed}-node-0 pod template lacks the labels {{'{PHASE}': 'resumed'}} of its TrainJob's runtime patches"
        in found
    )
    assert any(p.startswith(f"Pod {resumed}-node-0-pod lacks the labels") for p in found)

    patched = _one(items, "torch-patched")
    unlabelled = _converged(items)
    unlabelled.jobsets[patched]["metadata"]["labels"] = {}
    assert any(
        p.startswith(f"JobSet {patched} lacks the labels")
        for p in problems(items, unlabelled, runtime_snapshots=True)
    )


def test_claims_are_owned_by_a_live_jobset_and_a_ttl_jobset_goes() -> None:
    items = _items()
    kept = _one(items, "jobset-claims")
    ttl = _one(items, "jobset-claims-ttl")

    missing = _converged(items)
    missing.pvcs = []
    assert f"missing PVC data-{kept} of JobSet {kept}" in problems(items, missing, runtime_snapshots=True)

    orphan = _converged(items)
    orphan.pvcs.append({"metadata": {"name": f"data-{ttl}", "uid": "p"} | _owned("JobSet", "js-gone")})
    assert f"orphan PVC data-{ttl} (JobSet uid js-gone gone)" in problems(
        items, orphan, runtime_snapshots=True
    )

    stayed = _converged(items)
    stayed.jobsets[ttl] = _jobset(ttl, "ttl-uid", {"workers": 1}, None)
    assert f"JobSet {ttl} (jobset-claims-ttl) still there, must be deleted by its TTL" in problems(
        items, stayed, runtime_snapshots=True
    )


def _observed(history: JobHistory, name: str, uid: str, *conds: str, t: float) -> None:
    history.observe(
        [{"metadata": {"name": name, "uid": uid}, "status": {"conditions": [_true(c) for c in conds]}}], t
    )


def test_history_shows_jobsets_and_pvcs_made_once_and_the_ttl_jobset_completed() -> None:
    items = _items()
    expiring, ttl = _one(items, "expiring"), _one(items, "jobset-claims-ttl")
    jobsets, pvcs = JobHistory(), JobHistory()
    _observed(jobsets, ttl, "u-ttl", "Completed", t=1.0)
    _observed(pvcs, f"data-{ttl}", "p1", t=1.0)
    jobsets.observe([], 2.0)
    pvcs.observe([], 2.0)
    assert history_problems(items, jobsets, pvcs) == []

    # the expiring TrainJob's JobSet made again after its deadline deleted it; a claim made twice
    _observed(jobsets, expiring, "u1", t=3.0)
    jobsets.observe([], 4.0)
    _observed(jobsets, expiring, "u2", t=5.0)
    _observed(pvcs, f"data-{ttl}", "p2", t=5.0)
    found = history_problems(items, jobsets, pvcs)
    assert any(p.startswith(f"JobSet {expiring} created 2 times") for p in found)
    assert any(p.startswith(f"PVC data-{ttl} created 2 times") for p in found)

    never = JobHistory()
    _observed(never, ttl, "u-ttl", t=1.0)
    assert any(
        p.startswith(f"JobSet {ttl} (jobset-claims-ttl) never seen Completed")
        for p in history_problems(items, never, JobHistory())
    )


@pytest.mark.parametrize("kind", ["TrainJob", "JobSet"])
def test_a_final_condition_set_again_after_converging_is_a_problem(kind: str) -> None:
    items = _items()
    before = _converged(items)
    after = copy.deepcopy(before)
    assert settled_problems(items, before, after) == []
    if kind == "TrainJob":
        name = _one(items, "expiring")
        after.trainjobs[name]["status"]["conditions"] = [
            _true("Failed", "DeadlineExceeded", at="2026-12-01T00:00:09Z")
        ]
    else:
        name = _one(items, "jobset-claims")
        after.jobsets[name]["status"]["conditions"] = [_true("Completed", at="2026-12-01T00:00:09Z")]
    assert [p.split(":")[0] for p in settled_problems(items, before, after)] == [f"{kind} {name}"]


def test_the_v2_1_workload_is_unchanged_by_the_levels() -> None:
    items = build("ns", 20, 5, 2, V2_1)
    assert [i.flavour for i in items if i.kind == "TrainJob"] == (
        ["torch"] * 6 + ["deepspeed"] * 3 + ["mpi"] * 3 + ["gang"] * 3 + ["deadline"] * 2 + ["suspended"] * 3
    )
    assert [i.flavour for i in items if i.kind == "JobSet"] == ["jobset"] * 4 + ["jobset-deadline"]
    assert all(not i.updates for i in items)
    resumed = [i for i in _items() if i.flavour == "resumed"]
    assert [len(i.updates) for i in resumed] == [2] * len(resumed)
