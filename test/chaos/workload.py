"""The chaos suite's workload: TrainJobs on mixed runtimes, plain JobSets and plain PodGroups,
each with the end state it must reach, and the checks that every object reached it with no
orphan and no duplicate left behind.

What each object must end as is its **flavour** (``FLAVOURS``): the state, the replicated jobs of
its JobSet, the PodGroup, MPI objects, pod labels and claims it must have. Which flavours a run
creates, and how, is the API level's (``LevelWorkload``: ``workload_v2_1.py``,
``workload_v2_3.py``). The flavours both levels share:

- ``torch`` (shipped ``torch-distributed``), ``deepspeed`` (shipped MPI runtime, 2 nodes), ``mpi``
  (a namespaced OpenMPI TrainingRuntime, launcher + 2 nodes), ``gang`` (a namespaced torch
  TrainingRuntime with coscheduling: the Trainer makes a PodGroup): Complete;
- ``deadline`` (a runtime whose Job has ``activeDeadlineSeconds: 1`` while KWOK runs pods for
  seconds: the Job fails, so must the JobSet and the TrainJob): Failed;
- ``suspended`` (``spec.suspend: true``): Suspended, JobSet suspended, no pod;
- plain JobSets (``jobset``: Completed; ``jobset-deadline``: Failed) and plain PodGroups
  (``podgroup``: minMember 2, a Job of 2 pods on the gang scheduler: Finished).
"""

from __future__ import annotations

import copy
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
Json = dict[str, Any]
TRAINER = "trainer.kubeflow.org/v1alpha1"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
PG_API = "scheduling.x-k8s.io/v1alpha1"
PG_LABEL = "scheduling.x-k8s.io/pod-group"
GANG_SCHEDULER = "scheduler-plugins-scheduler"
SNAPSHOT_SUFFIX = "-runtime-snapshot"
"""Level v2.3: ConfigMap ``<trainjob>-runtime-snapshot`` (docs/behaviour/trainer.md §12.10)."""


@dataclass(frozen=True)
class Flavour:
    """What an object of one flavour must end as (and have) once the run converged."""

    kind: str  # TrainJob | JobSet | PodGroup
    expected: str  # Complete | Failed | Suspended | Finished | Deleted (a JobSet its TTL removed)
    jobs: Mapping[str, int] = field(default_factory=dict)
    """A TrainJob's JobSet: its replicated jobs and their replicas."""
    keeps_jobset: bool = True
    """A TrainJob that keeps its JobSet (False: deleted at its ``activeDeadlineSeconds``)."""
    reason: str = ""
    """The reason its ``expected`` condition must have ("": any)."""
    podgroup: bool = False
    mpi: bool = False
    """An MPI TrainJob: one SSH Secret and one hostfile ConfigMap."""
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    """Labels every Job pod template of its JobSet, and every pod, must carry (runtime patches)."""
    jobset_labels: Mapping[str, str] = field(default_factory=dict)
    """Labels its JobSet must carry (a runtime patch's JobSet metadata)."""
    runs_pods: bool = True
    """False: no pod may exist for it (a suspended TrainJob)."""
    may_be_unbuilt: bool = False
    """Level v2.3: its deadline may pass before a pass builds it (the faults delay it), and then
    nothing is built: no runtime snapshot either (docs/divergences.md T-17)."""


FLAVOURS: dict[str, Flavour] = {
    "torch": Flavour("TrainJob", "Complete", {"node": 1}),
    "deepspeed": Flavour("TrainJob", "Complete", {"launcher": 1, "node": 1}, mpi=True),
    "mpi": Flavour("TrainJob", "Complete", {"launcher": 1, "node": 1}, mpi=True),
    "gang": Flavour("TrainJob", "Complete", {"node": 1}, podgroup=True),
    "deadline": Flavour("TrainJob", "Failed", {"node": 1}),
    "suspended": Flavour("TrainJob", "Suspended", {"node": 1}, runs_pods=False),
    "jobset": Flavour("JobSet", "Complete"),
    "jobset-deadline": Flavour("JobSet", "Failed"),
    "podgroup": Flavour("PodGroup", "Finished"),
}
"""Every flavour of every level (a level's module adds its own, ``workload_v2_3.py``)."""


@dataclass(frozen=True)
class Item:
    kind: str  # TrainJob | JobSet | PodGroup
    name: str
    flavour: str
    objects: tuple[Json, ...]
    """Created in order (a plain JobSet's PersistentVolume before it, a PodGroup before its Job)."""
    updates: tuple[Json, ...] = ()
    """JSON merge patches of the item's object (``objects[-1]``), applied in order a few seconds
    apart once it is created (level v2.3: a runtime patch changed while suspended, then resume)."""

    @property
    def spec(self) -> Flavour:
        return FLAVOURS[self.flavour]

    @property
    def expected(self) -> str:
        return self.spec.expected


@dataclass(frozen=True)
class LevelWorkload:
    """What a run at one API level creates: the flavours (cycled) and how each is built."""

    name: str
    mix: tuple[str, ...]
    """TrainJob flavours, cycled (per 20 TrainJobs)."""
    jobset_mix: tuple[str, ...]
    """Plain JobSet flavours, cycled."""
    trainjob: Callable[[str, str, str, float], Json]
    """(name, namespace, flavour, deadline seconds) -> the TrainJob."""
    trainjob_updates: Callable[[str, str], tuple[Json, ...]]
    """(name, flavour) -> the merge patches applied to the TrainJob after its creation."""
    jobset: Callable[[str, str, str], tuple[Json, ...]]
    """(name, namespace, flavour) -> the objects of a plain JobSet (the JobSet last)."""
    shipped_runtimes: tuple[Path, ...]
    """The level's shipped ClusterTrainingRuntimes the TrainJobs use."""
    namespaced_runtimes: Callable[[str], list[Json]]
    """(namespace) -> the TrainingRuntimes of the namespaced flavours."""
    runtime_snapshots: bool
    """Every TrainJob has exactly one runtime snapshot ConfigMap (level v2.3)."""


# -- objects both levels create --------------------------------------------------------------


def shipped_runtime_docs(paths: tuple[Path, ...]) -> dict[str, Json]:
    return {d["metadata"]["name"]: d for p in paths for d in yaml.safe_load_all(p.read_text()) if d}


def namespaced(docs: Mapping[str, Json], source: str, name: str, namespace: str) -> Json:
    """A TrainingRuntime copied from the shipped ClusterTrainingRuntime ``source``."""
    doc = copy.deepcopy(docs[source])
    doc["kind"] = "TrainingRuntime"
    doc["metadata"] = {"name": name, "namespace": namespace}
    return doc


def common_runtimes(docs: Mapping[str, Json], namespace: str) -> list[Json]:
    """chaos-mpi (OpenMPI, launcher apart from 2 nodes), chaos-gang (torch + coscheduling) and
    chaos-deadline (torch whose Job may run for 1 s), from the level's shipped runtimes."""
    mpi = namespaced(docs, "deepspeed-distributed", "chaos-mpi", namespace)
    mpi["spec"]["mlPolicy"]["numNodes"] = 2
    mpi["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = False
    gang = namespaced(docs, "torch-distributed", "chaos-gang", namespace)
    gang["spec"]["podGroupPolicy"] = {"coscheduling": {"scheduleTimeoutSeconds": 120}}
    deadline = namespaced(docs, "torch-distributed", "chaos-deadline", namespace)
    for rj in deadline["spec"]["template"]["spec"]["replicatedJobs"]:
        rj["template"]["spec"]["activeDeadlineSeconds"] = 1
    return [mpi, gang, deadline]


def common_trainjob(name: str, namespace: str, flavour: str) -> Json:
    """A TrainJob of a flavour both levels share (the same document at both)."""
    spec: Json
    if flavour in ("torch", "suspended"):
        spec = {"runtimeRef": {"name": "torch-distributed"}}
    elif flavour == "deepspeed":
        spec = {"runtimeRef": {"name": "deepspeed-distributed"}, "trainer": {"numNodes": 2}}
    else:
        spec = {"runtimeRef": {"name": f"chaos-{flavour}", "kind": "TrainingRuntime"}}
    if flavour == "suspended":
        spec["suspend"] = True
    return {
        "apiVersion": TRAINER,
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def pod_template(
    labels: Json | None = None, scheduler: str | None = None, mounts: list[Json] | None = None
) -> Json:
    container: Json = {"name": "main", "image": "busybox", "command": ["true"]}
    if mounts:
        container["volumeMounts"] = mounts
    spec: Json = {"restartPolicy": "Never", "containers": [container]}
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"metadata": {"labels": labels or {}}, "spec": spec}


def plain_jobset(name: str, namespace: str, deadline: bool) -> Json:
    def job() -> Json:
        spec: Json = {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": pod_template()}
        if deadline:
            spec["activeDeadlineSeconds"] = 1
        return {"spec": spec}

    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicatedJobs": [
                {"name": "leader", "replicas": 1, "template": job()},
                {"name": "workers", "replicas": 2, "template": job()},
            ]
        },
    }


def common_jobset(name: str, namespace: str, flavour: str) -> tuple[Json, ...]:
    return (plain_jobset(name, namespace, flavour == "jobset-deadline"),)


def _podgroup(name: str, namespace: str) -> tuple[Json, Json]:
    pg = {
        "apiVersion": PG_API,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": 2, "scheduleTimeoutSeconds": 120},
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{name}-gang", "namespace": namespace},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "backoffLimit": 0,
            "template": pod_template({PG_LABEL: name}, GANG_SCHEDULER),
        },
    }
    return pg, job


def build(
    namespace: str,
    trainjobs: int,
    jobsets: int,
    podgroups: int,
    level: LevelWorkload,
    *,
    deadline_seconds: float = 60.0,
) -> list[Item]:
    """The workload, interleaved so every kind is in flight at every point of the run."""
    tjs = []
    for i in range(trainjobs):
        name, flavour = f"tj-{i:04d}", level.mix[i % len(level.mix)]
        obj = level.trainjob(name, namespace, flavour, deadline_seconds)
        tjs.append(Item("TrainJob", name, flavour, (obj,), level.trainjob_updates(name, flavour)))
    jss = []
    for i in range(jobsets):
        name, flavour = f"js-{i:04d}", level.jobset_mix[i % len(level.jobset_mix)]
        jss.append(Item("JobSet", name, flavour, level.jobset(name, namespace, flavour)))
    pgs = [
        Item("PodGroup", f"pg-{i:04d}", "podgroup", _podgroup(f"pg-{i:04d}", namespace))
        for i in range(podgroups)
    ]
    items: list[Item] = []
    extras = jss + pgs
    step = max(1, len(tjs) // max(1, len(extras)))
    for i, tj in enumerate(tjs):
        items.append(tj)
        if i % step == step - 1 and extras:
            items.append(extras.pop(0))
    return items + extras


# -- the end state ---------------------------------------------------------------------------


def _conds(obj: Json) -> list[Json]:
    return list((obj.get("status") or {}).get("conditions") or [])


def _cond(obj: Json, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in _conds(obj))


def _condition(obj: Json, kind: str) -> Json | None:
    return next((c for c in _conds(obj) if c.get("type") == kind), None)


def _owner_uid(obj: Json, kind: str) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == kind and ref.get("controller"):
            return str(ref["uid"])
    return None


def _orphan_pod(pod: Json, snap: Snapshot) -> str:
    """An orphan Pod's problem line with what tells its cause: the Job it names and whether a Job
    of that name exists now (another uid: the Job was made again), its deletion state and
    finalizers (a finalizer nobody removed), its phase and node."""
    meta = pod["metadata"]
    refs = [r for r in meta.get("ownerReferences") or [] if r.get("kind") == "Job"]
    job = f"Job {refs[0]['name']} uid {refs[0]['uid'][:8]}" if refs else "no Job owner"
    now = snap.jobs.get(refs[0]["name"]) if refs else None
    now_text = f"that name now uid {now['metadata']['uid'][:8]}" if now else "no Job of that name"
    return (
        f"orphan Pod {meta['name']} ({job}, {now_text}; created {meta.get('creationTimestamp')}, "
        f"deleted {meta.get('deletionTimestamp')}, finalizers {meta.get('finalizers') or []}, "
        f"phase {(pod.get('status') or {}).get('phase')}, node {(pod.get('spec') or {}).get('nodeName')})"
    )


def _finished(js: Json) -> bool:
    return _cond(js, "Completed") or _cond(js, "Failed")


def _job_finished(job: Json) -> bool:
    return _cond(job, "Complete") or _cond(job, "Failed")


def _labels(obj: Json) -> Json:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _success_targets(js: Json) -> set[str]:
    """The replicated jobs a JobSet's success policy counts (all of them when it names none)."""
    policy = js["spec"].get("successPolicy") or {}
    return set(policy.get("targetReplicatedJobs") or [rj["name"] for rj in js["spec"]["replicatedJobs"]])


def claim_names(js: Json) -> list[str]:
    """The PVCs a JobSet's ``volumeClaimPolicies`` make: ``<claim>-<jobset>`` (JobSet v0.12.0)."""
    name = js["metadata"]["name"]
    return [
        f"{template['metadata']['name']}-{name}"
        for policy in js["spec"].get("volumeClaimPolicies") or []
        for template in policy.get("templates") or []
    ]


def finished_path_absent(snap: Snapshot) -> list[str]:
    """Jobs a Completed JobSet may lack by design: those of replicated jobs its success policy does
    not count (an MPI TrainJob's ``node``, whose success policy names only the ``launcher``).

    JobSet's finished path (docs/behaviour/jobset.md 2.2 d, 2.7; upstream v0.10.1
    ``jobSetFinished`` -> ``deleteJobs(ownedJobs.active)``) deletes every Job still active when
    the JobSet completes, and a completed JobSet creates no Job: so a ``node`` Job whose pod
    outlived the launcher's is deleted, and one whose create had not succeeded yet is never
    made. Upstream's own DeepSpeed e2e (trainer v2.1.0 test/e2e/e2e_test.go) wants exactly this
    end state: the node Job neither succeeded nor active. KWOK runs every pod for a random
    time, so which of the two finishes first is a coin toss, faults or not.
    """
    out = []
    for name, js in snap.jobsets.items():
        if not _cond(js, "Completed"):
            continue
        targets = _success_targets(js)
        for rj in js["spec"]["replicatedJobs"]:
            if rj["name"] in targets:
                continue
            for idx in range(rj.get("replicas", 1)):
                job = f"{name}-{rj['name']}-{idx}"
                if job not in snap.jobs:
                    out.append(job)
    return sorted(out)


@dataclass
class Snapshot:
    trainjobs: dict[str, Json]
    jobsets: dict[str, Json]
    jobs: dict[str, Json]
    podgroups: dict[str, Json]
    pods: list[Json]
    secrets: list[Json]
    configmaps: list[Json]
    events: list[Json]
    pvcs: list[Json] = field(default_factory=list)


def problems(items: list[Item], snap: Snapshot, *, runtime_snapshots: bool = False) -> list[str]:
    """Everything that differs from the end state the workload must reach (empty: converged).
    ``runtime_snapshots``: every TrainJob must have its runtime snapshot ConfigMap (level v2.3)."""
    out: list[str] = []
    want_tj = {i.name: i for i in items if i.kind == "TrainJob"}
    want_js_plain = {i.name: i for i in items if i.kind == "JobSet"}
    want_pg_plain = {i.name: i for i in items if i.kind == "PodGroup"}

    # no lost TrainJob, each in the state it must be in, each condition type once
    for name, item in want_tj.items():
        tj = snap.trainjobs.get(name)
        if tj is None:
            out.append(f"TrainJob {name} lost")
            continue
        if not _cond(tj, item.expected):
            conds = [(c["type"], c["status"]) for c in _conds(tj)]
            out.append(f"TrainJob {name} ({item.flavour}) not {item.expected}: {conds}")
        elif item.spec.reason:
            cond = _condition(tj, item.expected) or {}
            if cond.get("reason") != item.spec.reason:
                out.append(
                    f"TrainJob {name} ({item.flavour}) {item.expected} with reason {cond.get('reason')!r}, "
                    f"must be {item.spec.reason!r}: {cond.get('message')!r}"
                )
        for other in ("Complete", "Failed"):
            if other != item.expected and _cond(tj, other):
                out.append(f"TrainJob {name} ({item.flavour}) is {other}, must be {item.expected}")
    for name in snap.trainjobs.keys() - want_tj.keys():
        out.append(f"unexpected TrainJob {name}")
    for kind, objs in (("TrainJob", snap.trainjobs), ("JobSet", snap.jobsets)):
        for name, obj in objs.items():
            types = Counter(c.get("type") for c in _conds(obj))
            if dups := sorted(str(t) for t, n in types.items() if n > 1):
                out.append(f"{kind} {name} has the condition types {dups} more than once")

    # exactly one JobSet per TrainJob that keeps one, owned by it; plain JobSets as designed
    tj_uids = {tj["metadata"]["uid"]: name for name, tj in snap.trainjobs.items()}
    owned: dict[str, list[str]] = defaultdict(list)
    for name, js in snap.jobsets.items():
        owner = _owner_uid(js, "TrainJob")
        if owner is not None:
            if owner not in tj_uids:
                out.append(f"orphan JobSet {name} (TrainJob uid {owner} gone)")
            else:
                owned[tj_uids[owner]].append(name)
        elif name not in want_js_plain:
            out.append(f"unexpected JobSet {name}")
    for name, item in want_tj.items():
        if name not in snap.trainjobs:
            continue
        jobsets = owned.get(name, [])
        want = [name] if item.spec.keeps_jobset else []
        if jobsets != want:
            out.append(f"TrainJob {name} ({item.flavour}) has JobSets {jobsets}, must have exactly {want}")
            continue
        if not want:
            continue
        js = snap.jobsets[name]
        rjs = {rj["name"]: rj.get("replicas", 1) for rj in js["spec"]["replicatedJobs"]}
        if rjs != dict(item.spec.jobs):
            out.append(f"JobSet {name} replicatedJobs {rjs}, must be {dict(item.spec.jobs)}")
        if not item.spec.runs_pods and js["spec"].get("suspend") is not True:
            out.append(f"JobSet {name} of a suspended TrainJob is not suspended")
        if missing := {k: v for k, v in item.spec.jobset_labels.items() if _labels(js).get(k) != v}:
            out.append(f"JobSet {name} lacks the labels {missing} of its TrainJob's runtime patches")
    for name, item in want_js_plain.items():
        js = snap.jobsets.get(name)
        if item.expected == "Deleted":
            if js is not None:
                out.append(f"JobSet {name} ({item.flavour}) still there, must be deleted by its TTL")
        elif js is None:
            out.append(f"JobSet {name} lost")
        elif not _cond(js, "Completed" if item.expected == "Complete" else "Failed"):
            conds = [(c["type"], c["status"]) for c in _conds(js)]
            out.append(f"JobSet {name} not {item.expected}: {conds}")

    # the right Jobs: one per replicated job replica, owned by the live JobSet, no extra
    js_uids = {js["metadata"]["uid"]: name for name, js in snap.jobsets.items()}
    expected_jobs: set[str] = set()
    for name, js in snap.jobsets.items():
        for rj in js["spec"]["replicatedJobs"]:
            for idx in range(rj.get("replicas", 1)):
                expected_jobs.add(f"{name}-{rj['name']}-{idx}")
    plain_pg_jobs = {f"{n}-gang" for n in want_pg_plain}
    for name, job in snap.jobs.items():
        owner = _owner_uid(job, "JobSet")
        if name in plain_pg_jobs:
            continue
        if owner is None or owner not in js_uids:
            out.append(f"orphan Job {name}")
        elif name not in expected_jobs:
            out.append(f"unexpected Job {name} of JobSet {js_uids[owner]}")
    excused = set(finished_path_absent(snap))
    for name in expected_jobs - snap.jobs.keys() - excused:
        js_name = name.rsplit("-", 2)[0]
        if js_name in snap.jobsets and not _cond(snap.jobsets[js_name], "Failed"):
            out.append(f"missing Job {name}")
    # a finished JobSet keeps no active Job: its finished path deletes them (foreground)
    for name, job in snap.jobs.items():
        owner = _owner_uid(job, "JobSet")
        js = snap.jobsets.get(js_uids.get(owner or "", ""))
        if (
            js is not None
            and _finished(js)
            and not _job_finished(job)
            and not job["metadata"].get("deletionTimestamp")
        ):
            out.append(f"active Job {name} of finished JobSet {js['metadata']['name']}")
    # runtime patches reach the pods: every Job's pod template carries the patches' labels
    for name, job in snap.jobs.items():
        item = want_tj.get(name.rsplit("-", 2)[0])
        template = ((job.get("spec") or {}).get("template")) or {}
        if item is not None and (
            missing := {k: v for k, v in item.spec.pod_labels.items() if _labels(template).get(k) != v}
        ):
            out.append(
                f"Job {name} pod template lacks the labels {missing} of its TrainJob's runtime patches"
            )

    # PVCs (JobSet v0.12.0 volumeClaimPolicies, whenDeleted: Delete): each claim of a live JobSet
    # exists, owned by it; none of a JobSet that is gone
    claims = {claim: name for name, js in snap.jobsets.items() for claim in claim_names(js)}
    pvc_names = set()
    for pvc in snap.pvcs:
        pvc_name = pvc["metadata"]["name"]
        pvc_names.add(pvc_name)
        owner = _owner_uid(pvc, "JobSet")
        if owner is None or owner not in js_uids:
            out.append(f"orphan PVC {pvc_name} (JobSet uid {owner} gone)")
        elif claims.get(pvc_name) != js_uids[owner]:
            out.append(f"unexpected PVC {pvc_name} of JobSet {js_uids[owner]}")
    for claim, js_name in claims.items():
        if claim not in pvc_names and not snap.jobsets[js_name]["metadata"].get("deletionTimestamp"):
            out.append(f"missing PVC {claim} of JobSet {js_name}")

    # PodGroups: one per gang TrainJob, owned by it; the plain ones Finished
    pg_owned: Counter[str] = Counter()
    for name, pg in snap.podgroups.items():
        owner = _owner_uid(pg, "TrainJob")
        if owner is not None:
            if owner not in tj_uids:
                out.append(f"orphan PodGroup {name}")
            else:
                pg_owned[tj_uids[owner]] += 1
        elif name not in want_pg_plain:
            out.append(f"unexpected PodGroup {name}")
    for name, item in want_tj.items():
        n = pg_owned.get(name, 0)
        if item.spec.podgroup != (n == 1) or n > 1:
            out.append(f"TrainJob {name} ({item.flavour}) has {n} PodGroups")
    for name in want_pg_plain:
        pg = snap.podgroups.get(name)
        phase = ((pg or {}).get("status") or {}).get("phase")
        if phase != "Finished":
            out.append(f"PodGroup {name} phase {phase}, must be Finished")

    # MPI: exactly one SSH Secret and one hostfile ConfigMap per MPI TrainJob; at level v2.3 one
    # runtime snapshot ConfigMap per TrainJob, of its runtime; none orphaned
    out += _owned_by_trainjobs(want_tj, snap, tj_uids, runtime_snapshots)

    # pods: every one owned by a live Job; suspended TrainJobs run none; runtime patches' labels
    job_uids = {job["metadata"]["uid"]: name for name, job in snap.jobs.items()}
    for pod in snap.pods:
        owner = _owner_uid(pod, "Job")
        if owner is None or owner not in job_uids:
            out.append(_orphan_pod(pod, snap))
            continue
        item = want_tj.get(job_uids[owner].rsplit("-", 2)[0])
        if item is None:
            continue
        if not item.spec.runs_pods:
            out.append(f"Pod {pod['metadata']['name']} runs for a suspended TrainJob")
        if missing := {k: v for k, v in item.spec.pod_labels.items() if _labels(pod).get(k) != v}:
            out.append(
                f"Pod {pod['metadata']['name']} lacks the labels {missing} of its TrainJob's runtime patches"
            )
    return out


def _owned_by_trainjobs(
    want_tj: Mapping[str, Item], snap: Snapshot, tj_uids: Mapping[str, str], runtime_snapshots: bool
) -> list[str]:
    out: list[str] = []
    for label, objs in (("Secret", snap.secrets), ("ConfigMap", snap.configmaps)):
        per: Counter[str] = Counter()
        snapshots: dict[str, list[Json]] = defaultdict(list)
        for obj in objs:
            owner = _owner_uid(obj, "TrainJob")
            name = obj["metadata"]["name"]
            if label == "ConfigMap" and name.endswith(SNAPSHOT_SUFFIX):
                owner_name = tj_uids.get(owner or "")
                if owner_name is None:
                    out.append(f"orphan runtime snapshot {name} (TrainJob uid {owner} gone)")
                elif name != owner_name + SNAPSHOT_SUFFIX:
                    out.append(f"runtime snapshot {name} owned by TrainJob {owner_name}")
                else:
                    snapshots[owner_name].append(obj)
                continue
            if owner is None:
                continue
            if owner not in tj_uids:
                out.append(f"orphan {label} {name}")
            else:
                per[tj_uids[owner]] += 1
        for name, item in want_tj.items():
            if name not in snap.trainjobs:
                continue
            want = 1 if item.spec.mpi else 0
            if per.get(name, 0) != want:
                out.append(
                    f"TrainJob {name} ({item.flavour}) has {per.get(name, 0)} {label}s, must have {want}"
                )
            if label == "ConfigMap":
                found = snapshots.get(name, [])
                if not (item.spec.may_be_unbuilt and not found):
                    out += _snapshot_problems(snap.trainjobs[name], found, runtime_snapshots)
    return out


def _snapshot_problems(tj: Json, found: list[Json], wanted: bool) -> list[str]:
    """Level v2.3: exactly one ``<trainjob>-runtime-snapshot``, of the TrainJob's runtime."""
    name = tj["metadata"]["name"]
    if len(found) != (1 if wanted else 0):
        return [f"TrainJob {name} has {len(found)} runtime snapshot ConfigMaps, must have {int(wanted)}"]
    if not found:
        return []
    ref = tj["spec"]["runtimeRef"]
    try:
        runtime = yaml.safe_load((found[0].get("data") or {}).get("runtime") or "")
    except yaml.YAMLError as err:
        return [f"runtime snapshot of TrainJob {name} does not decode: {err}"]
    kind = ref.get("kind") or "ClusterTrainingRuntime"
    got = (runtime or {}).get("kind"), ((runtime or {}).get("metadata") or {}).get("name")
    if got != (kind, ref["name"]):
        return [f"runtime snapshot of TrainJob {name} holds {got}, must hold {(kind, ref['name'])}"]
    return []


def settled_problems(items: list[Item], before: Snapshot, after: Snapshot) -> list[str]:
    """What changed in the 10 s after the run converged: a finished TrainJob's or JobSet's final
    condition must keep its transition time (set once: a deadline's Failed condition is not set
    again by a late reconcile)."""
    out = []
    for item in items:
        kind, objs_before, objs_after = (
            ("TrainJob", before.trainjobs, after.trainjobs)
            if item.kind == "TrainJob"
            else ("JobSet", before.jobsets, after.jobsets)
        )
        if item.kind == "PodGroup" or item.name not in objs_before or item.name not in objs_after:
            continue
        for cond_type in ("Complete", "Completed", "Failed"):
            old, new = (
                _condition(objs_before[item.name], cond_type),
                _condition(objs_after[item.name], cond_type),
            )
            if old is not None and old.get("status") == "True" and old != new:
                out.append(
                    f"{kind} {item.name}: condition {cond_type} changed after converging: {old} -> {new}"
                )
    return out


def history_problems(items: list[Item], jobsets: JobHistory, pvcs: JobHistory) -> list[str]:
    """What the polls saw during the run: every JobSet and every PVC created once (a JobSet
    deleted at its deadline is not made again; a claim is not made twice); a JobSet its TTL
    removed was seen Completed first."""
    out = []
    for kind, history in (("JobSet", jobsets), ("PVC", pvcs)):
        for name, sightings in history.jobs.items():
            if len(sightings) > 1:
                out.append(f"{kind} {name} created {len(sightings)} times: {history.explain(name)}")
    for item in items:
        if item.kind == "JobSet" and item.expected == "Deleted":
            seen = jobsets.jobs.get(item.name) or []
            if not any(s.finished_at is not None and "Failed" not in s.conditions for s in seen):
                out.append(
                    f"JobSet {item.name} ({item.flavour}) never seen Completed: {jobsets.explain(item.name)}"
                )
    return out


def events_per_object(events: list[Json], components: frozenset[str] | None = None) -> Counter[str]:
    """How many times ``components`` (None: anyone) reported an event about each object (the
    de-duplicated count summed), keyed ``Kind/name``."""
    per: Counter[str] = Counter()
    for ev in events:
        source = (ev.get("source") or {}).get("component") or ev.get("reportingComponent") or ""
        if components is not None and source not in components:
            continue
        inv = ev.get("involvedObject") or {}
        count = int(ev.get("count") or (ev.get("series") or {}).get("count") or 1)
        per[f"{inv.get('kind')}/{inv.get('name')}"] += count
    return per


# -- what happened to each Job, JobSet and PVC (polled during the run) ----------------------


@dataclass
class JobSighting:
    """One incarnation (uid) of a Job (JobSet, PVC) as the harness's polls saw it."""

    uid: str
    first_seen: float
    last_seen: float
    gone_at: float | None = None
    conditions: tuple[str, ...] = ()
    deleting: bool = False
    restart_attempt: str = ""
    finished_at: float | None = None  # first poll that saw it Complete(d) or Failed
    deleting_at: float | None = None  # first poll that saw its deletionTimestamp

    def describe(self) -> str:
        state = ", ".join(self.conditions) or "active"
        if self.finished_at is not None:
            state += f" since {self.finished_at:.1f} s"
        end = (
            f"gone at {self.gone_at:.1f} s (last seen {state}"
            f"{f', terminating since {self.deleting_at:.1f} s' if self.deleting_at is not None else ''})"
            if self.gone_at is not None
            else f"still there ({state})"
        )
        return (
            f"uid {self.uid[:8]} attempt {self.restart_attempt or '?'} seen at {self.first_seen:.1f} s, {end}"
        )


class JobHistory:
    """The Jobs (or JobSets, PVCs) of the namespace, polled from the API server during the run:
    when each appeared, the last state it was seen in and when it vanished. A Job missing at the
    end is then either "never seen" (never created, or created and deleted between two polls) or
    "created, then deleted while ..." -- which tells a lost trigger from a deletion; a name seen
    with two uids was created twice."""

    def __init__(self) -> None:
        self.jobs: dict[str, list[JobSighting]] = defaultdict(list)

    def observe(self, jobs: list[Json], t: float) -> None:
        live = {}
        for job in jobs:
            meta = job["metadata"]
            live[(meta["name"], meta["uid"])] = job
        for name, sightings in self.jobs.items():
            for s in sightings:
                if s.gone_at is None and (name, s.uid) not in live:
                    s.gone_at = t
        for (name, uid), job in live.items():
            sightings = self.jobs[name]
            current = next((s for s in sightings if s.uid == uid), None)
            if current is None:
                current = JobSighting(uid, t, t)
                sightings.append(current)
            current.last_seen = t
            current.conditions = tuple(
                c["type"]
                for c in (job.get("status") or {}).get("conditions") or []
                if c.get("status") == "True"
            )
            current.deleting = bool(job["metadata"].get("deletionTimestamp"))
            if current.finished_at is None and {"Complete", "Completed", "Failed"} & set(current.conditions):
                current.finished_at = t
            if current.deleting_at is None and current.deleting:
                current.deleting_at = t
            current.restart_attempt = str(
                (job["metadata"].get("labels") or {}).get("jobset.sigs.k8s.io/restart-attempt", "")
            )

    def explain(self, name: str) -> str:
        sightings = self.jobs.get(name)
        if not sightings:
            return f"{name}: never seen"
        return f"{name}: " + "; ".join(s.describe() for s in sightings)

    def to_json(self) -> Json:
        return {name: [vars(s) for s in sightings] for name, sightings in sorted(self.jobs.items())}


def jobset_state(js: Json) -> str:
    """A JobSet's true conditions and restarts, for a problem report."""
    status = js.get("status") or {}
    conds = [
        f"{c['type']}@{c.get('lastTransitionTime', '?')}"
        for c in status.get("conditions") or []
        if c.get("status") == "True"
    ]
    return f"conditions {conds or 'none'}, restarts {status.get('restarts', 0)}"
