"""The chaos suite's workload: TrainJobs on mixed runtimes, plain JobSets and plain PodGroups,
each with the end state it must reach, and the checks that every object reached it with no
orphan and no duplicate left behind.

Mix (per 20 TrainJobs): 6 torch (shipped ``torch-distributed``), 3 deepspeed (shipped MPI
runtime, 2 nodes), 3 MPI (a namespaced OpenMPI TrainingRuntime, launcher + 2 nodes), 3 gang
(a namespaced torch TrainingRuntime with coscheduling: the Trainer makes a PodGroup), 2 deadline
(a runtime whose Job has ``activeDeadlineSeconds: 1`` while KWOK runs pods for seconds: the Job
fails, so must the JobSet and the TrainJob) and 3 suspended (``spec.suspend: true``: Suspended,
JobSet suspended, no pod). Plain JobSets (every 5th with the deadline: Failed) and plain
PodGroups (minMember 2, a Job of 2 pods on the gang scheduler: Finished).
"""

from __future__ import annotations

import copy
from collections import Counter, defaultdict
from dataclasses import dataclass
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
MIX = ["torch"] * 6 + ["deepspeed"] * 3 + ["mpi"] * 3 + ["gang"] * 3 + ["deadline"] * 2 + ["suspended"] * 3
SHIPPED = ("torch-distributed.yaml", "deepspeed-distributed.yaml")


@dataclass(frozen=True)
class Item:
    kind: str  # TrainJob | JobSet | PodGroup
    name: str
    flavour: str  # torch, deepspeed, mpi, gang, deadline, suspended, jobset, jobset-deadline, podgroup
    objects: tuple[Json, ...]

    @property
    def expected(self) -> str:
        if self.flavour in ("deadline", "jobset-deadline"):
            return "Failed"
        if self.flavour == "suspended":
            return "Suspended"
        return "Finished" if self.kind == "PodGroup" else "Complete"


def shipped_runtimes() -> list[Path]:
    return [ROOT / "config" / "runtimes" / name for name in SHIPPED]


def namespaced_runtimes(namespace: str) -> list[Json]:
    """chaos-mpi (OpenMPI, launcher apart from 2 nodes), chaos-gang (torch + coscheduling) and
    chaos-deadline (torch whose Job may run for 1 s)."""
    docs = {
        d["metadata"]["name"]: d for p in shipped_runtimes() for d in yaml.safe_load_all(p.read_text()) if d
    }

    def namespaced(source: str, name: str) -> Json:
        doc = copy.deepcopy(docs[source])
        doc["kind"] = "TrainingRuntime"
        doc["metadata"] = {"name": name, "namespace": namespace}
        return doc

    mpi = namespaced("deepspeed-distributed", "chaos-mpi")
    mpi["spec"]["mlPolicy"]["numNodes"] = 2
    mpi["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = False
    gang = namespaced("torch-distributed", "chaos-gang")
    gang["spec"]["podGroupPolicy"] = {"coscheduling": {"scheduleTimeoutSeconds": 120}}
    deadline = namespaced("torch-distributed", "chaos-deadline")
    for rj in deadline["spec"]["template"]["spec"]["replicatedJobs"]:
        rj["template"]["spec"]["activeDeadlineSeconds"] = 1
    return [mpi, gang, deadline]


def _trainjob(name: str, namespace: str, flavour: str) -> Json:
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


def _pod_template(labels: Json | None = None, scheduler: str | None = None) -> Json:
    spec: Json = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox", "command": ["true"]}],
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"metadata": {"labels": labels or {}}, "spec": spec}


def _jobset(name: str, namespace: str, deadline: bool) -> Json:
    def job(replicas: int) -> Json:
        spec: Json = {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": _pod_template()}
        if deadline:
            spec["activeDeadlineSeconds"] = 1
        return {"spec": spec}

    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicatedJobs": [
                {"name": "leader", "replicas": 1, "template": job(1)},
                {"name": "workers", "replicas": 2, "template": job(2)},
            ]
        },
    }


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
            "template": _pod_template({PG_LABEL: name}, GANG_SCHEDULER),
        },
    }
    return pg, job


def build(namespace: str, trainjobs: int, jobsets: int, podgroups: int) -> list[Item]:
    """The workload, interleaved so every kind is in flight at every point of the run."""
    tjs = [
        Item(
            "TrainJob",
            f"tj-{i:04d}",
            MIX[i % len(MIX)],
            (_trainjob(f"tj-{i:04d}", namespace, MIX[i % len(MIX)]),),
        )
        for i in range(trainjobs)
    ]
    jss = [
        Item(
            "JobSet",
            f"js-{i:04d}",
            "jobset-deadline" if i % 5 == 4 else "jobset",
            (_jobset(f"js-{i:04d}", namespace, i % 5 == 4),),
        )
        for i in range(jobsets)
    ]
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


def _cond(obj: Json, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def _owner_uid(obj: Json, kind: str) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == kind and ref.get("controller"):
            return str(ref["uid"])
    return None


def _finished(js: Json) -> bool:
    return _cond(js, "Completed") or _cond(js, "Failed")


def _job_finished(job: Json) -> bool:
    return _cond(job, "Complete") or _cond(job, "Failed")


def _success_targets(js: Json) -> set[str]:
    """The replicated jobs a JobSet's success policy counts (all of them when it names none)."""
    policy = js["spec"].get("successPolicy") or {}
    return set(policy.get("targetReplicatedJobs") or [rj["name"] for rj in js["spec"]["replicatedJobs"]])


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


TRAINJOB_JOBS = {
    "torch": {"node": 1},
    "suspended": {"node": 1},
    "deadline": {"node": 1},
    "gang": {"node": 1},
    "deepspeed": {"launcher": 1, "node": 1},
    "mpi": {"launcher": 1, "node": 1},
}


def problems(items: list[Item], snap: Snapshot) -> list[str]:
    """Everything that differs from the end state the workload must reach (empty: converged)."""
    out: list[str] = []
    want_tj = {i.name: i for i in items if i.kind == "TrainJob"}
    want_js_plain = {i.name: i for i in items if i.kind == "JobSet"}
    want_pg_plain = {i.name: i for i in items if i.kind == "PodGroup"}

    # no lost TrainJob, each in the state it must be in
    for name, item in want_tj.items():
        tj = snap.trainjobs.get(name)
        if tj is None:
            out.append(f"TrainJob {name} lost")
            continue
        if not _cond(tj, item.expected):
            conds = [(c["type"], c["status"]) for c in (tj.get("status") or {}).get("conditions") or []]
            out.append(f"TrainJob {name} ({item.flavour}) not {item.expected}: {conds}")
        for other in ("Complete", "Failed"):
            if other != item.expected and _cond(tj, other):
                out.append(f"TrainJob {name} ({item.flavour}) is {other}, must be {item.expected}")
    for name in snap.trainjobs.keys() - want_tj.keys():
        out.append(f"unexpected TrainJob {name}")

    # exactly one JobSet per TrainJob, owned by it; plain JobSets as designed; no other
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
        if jobsets != [name]:
            out.append(f"TrainJob {name} has JobSets {jobsets}, must have exactly [{name}]")
            continue
        js = snap.jobsets[name]
        rjs = {rj["name"]: rj.get("replicas", 1) for rj in js["spec"]["replicatedJobs"]}
        if rjs != TRAINJOB_JOBS[item.flavour]:
            out.append(f"JobSet {name} replicatedJobs {rjs}, must be {TRAINJOB_JOBS[item.flavour]}")
        if item.flavour == "suspended" and js["spec"].get("suspend") is not True:
            out.append(f"JobSet {name} of a suspended TrainJob is not suspended")
    for name, item in want_js_plain.items():
        js = snap.jobsets.get(name)
        if js is None:
            out.append(f"JobSet {name} lost")
        elif not _cond(js, "Completed" if item.expected == "Complete" else "Failed"):
            conds = [(c["type"], c["status"]) for c in (js.get("status") or {}).get("conditions") or []]
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
        if (item.flavour == "gang") != (n == 1) or n > 1:
            out.append(f"TrainJob {name} ({item.flavour}) has {n} PodGroups")
    for name in want_pg_plain:
        pg = snap.podgroups.get(name)
        phase = ((pg or {}).get("status") or {}).get("phase")
        if phase != "Finished":
            out.append(f"PodGroup {name} phase {phase}, must be Finished")

    # MPI: exactly one SSH Secret and one hostfile ConfigMap per MPI TrainJob, none orphaned
    for label, objs in (("Secret", snap.secrets), ("ConfigMap", snap.configmaps)):
        per: Counter[str] = Counter()
        for obj in objs:
            owner = _owner_uid(obj, "TrainJob")
            if owner is None:
                continue
            if owner not in tj_uids:
                out.append(f"orphan {label} {obj['metadata']['name']}")
            else:
                per[tj_uids[owner]] += 1
        for name, item in want_tj.items():
            want = 1 if item.flavour in ("deepspeed", "mpi") else 0
            if name in snap.trainjobs and per.get(name, 0) != want:
                out.append(
                    f"TrainJob {name} ({item.flavour}) has {per.get(name, 0)} {label}s, must have {want}"
                )

    # pods: every one owned by a live Job; suspended TrainJobs run none
    job_uids = {job["metadata"]["uid"]: name for name, job in snap.jobs.items()}
    for pod in snap.pods:
        owner = _owner_uid(pod, "Job")
        if owner is None or owner not in job_uids:
            out.append(f"orphan Pod {pod['metadata']['name']}")
        elif job_uids[owner].rsplit("-", 2)[0] in {n for n, i in want_tj.items() if i.flavour == "suspended"}:
            out.append(f"Pod {pod['metadata']['name']} runs for a suspended TrainJob")
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


# -- what happened to each Job (diagnosis of a run that does not converge) --------------------


@dataclass
class JobSighting:
    """One incarnation (uid) of a Job as the harness's polls saw it."""

    uid: str
    first_seen: float
    last_seen: float
    gone_at: float | None = None
    conditions: tuple[str, ...] = ()
    deleting: bool = False
    restart_attempt: str = ""
    finished_at: float | None = None  # first poll that saw it Complete or Failed
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
    """The Jobs of the namespace, polled from the API server during the run: when each appeared,
    the last state it was seen in and when it vanished. A Job missing at the end is then either
    "never seen" (never created, or created and deleted between two polls) or "created, then
    deleted while ..." -- which tells a lost trigger from a deletion."""

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
            if current.finished_at is None and {"Complete", "Failed"} & set(current.conditions):
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
