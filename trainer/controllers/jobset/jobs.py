"""Child Jobs: classification of the owned Jobs and construction of the missing ones (docs/behaviour/jobset.md
§2.3, §2.9, §2.10).

Everything here is pure: a JobSet dict and Job dicts in, Job dicts out. Objects are the plain
JSON the API server returns, so what we send is exactly what upstream's Go structs would
serialize for the fields we set, and anything a newer Kubernetes adds to a template survives.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from manager.meta.object import Json as Object
from manager.meta.object import annotations_of, labels_of, name_of
from manager.meta.object import meta_of as meta
from trainer.api import jobset_constants as c
from trainer.jobset.levels.controller import ControllerSteps
from trainer.jobset.levels.v0_10_controller import STEPS as V0_10_STEPS
from trainer.jobset.objects import owner_reference as owner_reference

JOB_API_VERSION = "batch/v1"
JOB_KIND = "Job"


class RestartAttemptError(ValueError):
    """A child Job whose ``restart-attempt`` label is not an integer: the reconcile aborts (2.3)."""


@dataclass
class ChildJobs:
    """The JobSet's Jobs sorted by state; ``previous`` are from earlier restart attempts."""

    active: list[Object] = field(default_factory=list)
    successful: list[Object] = field(default_factory=list)
    failed: list[Object] = field(default_factory=list)
    previous: list[Object] = field(default_factory=list)

    def names(self) -> set[str]:
        return {name_of(j) for j in (*self.active, *self.successful, *self.failed, *self.previous)}


# -- small accessors ---------------------------------------------------------------------------


def spec_of(js: Object) -> Object:
    result: Object = js.get("spec") or {}
    return result


def replicated_jobs(js: Object) -> list[Object]:
    return list(spec_of(js).get("replicatedJobs") or [])


def replicas_of(rjob: Object) -> int:
    """``replicas``; the CRD defaults it to 1, so an absent value (unit tests) means 1."""
    value = rjob.get("replicas")
    return 1 if value is None else int(value)


def group_name_of(rjob: Object) -> str:
    """``groupName``; the CRD defaults it to ``default``."""
    value = rjob.get("groupName")
    return "default" if value is None else str(value)


def job_suspended(job: Object) -> bool:
    return bool((job.get("spec") or {}).get("suspend"))


def jobset_suspended(js: Object) -> bool:
    return bool(spec_of(js).get("suspend"))


def dns_hostnames_enabled(js: Object) -> bool:
    """Nil network means disabled (port note, docs/behaviour/jobset.md §2.15: Go would panic on a nil
    network)."""
    network = spec_of(js).get("network") or {}
    return network.get("enableDNSHostnames") is True


def subdomain_of(js: Object) -> str:
    """``network.subdomain`` if set, else the JobSet name (resolved here, never stored)."""
    network = spec_of(js).get("network") or {}
    return str(network.get("subdomain") or name_of(js))


def gen_job_name(js_name: str, rjob_name: str, job_index: int) -> str:
    return f"{js_name}-{rjob_name}-{job_index}"


def job_hash_key(namespace: str, job_name: str) -> str:
    """The ``job-key`` value: SHA1 (not SHA256, whatever upstream's comment says) of ``ns/name``."""
    return hashlib.sha1(f"{namespace}/{job_name}".encode()).hexdigest()


def namespaced_job_name(namespace: str, job_name: str) -> str:
    return f"{namespace}_{job_name}"


def coordinator_endpoint(js: Object) -> str:
    coord = spec_of(js).get("coordinator") or {}
    return (
        f"{name_of(js)}-{coord.get('replicatedJob', '')}-{int(coord.get('jobIndex') or 0)}-"
        f"{int(coord.get('podIndex') or 0)}.{subdomain_of(js)}"
    )


# -- classification (2.3) -------------------------------------------------------------------------


def job_finished(job: Object) -> tuple[bool, str]:
    """The first ``Complete``/``Failed`` condition with status True decides; others never count."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return True, str(cond["type"])
    return False, ""


def restart_attempt(job: Object) -> int:
    raw = labels_of(job).get(c.RestartsKey)
    try:
        return int(str(raw))
    except ValueError:
        raise RestartAttemptError(f'strconv.Atoi: parsing "{raw or ""}": invalid syntax') from None


def classify_jobs(
    jobs: Iterable[Object], restarts: int, previous_attempt: Callable[[Object], bool] = lambda job: False
) -> ChildJobs:
    """Sort the Jobs: those of an earlier JobSet restart, or of an earlier attempt of their own
    (``previous_attempt``: the release's RestartJob step), are ``previous``; the others by state."""
    owned = ChildJobs()
    for job in jobs:
        if restart_attempt(job) < restarts or previous_attempt(job):
            owned.previous.append(job)
            continue
        finished, kind = job_finished(job)
        if not finished:
            owned.active.append(job)
        elif kind == "Failed":
            owned.failed.append(job)
        else:
            owned.successful.append(job)
    return owned


# -- index helpers (6.F) ---------------------------------------------------------------------------


def global_job_index(js: Object, rjob_name: str, job_index: int) -> str:
    """Replicas of the rjobs before ``rjob_name`` plus ``job_index``; "" for an unknown rjob."""
    total = 0
    for rjob in replicated_jobs(js):
        if rjob.get("name") == rjob_name:
            return str(total + job_index)
        total += replicas_of(rjob)
    return ""


def global_replicas(js: Object) -> str:
    return str(sum(replicas_of(r) for r in replicated_jobs(js)))


def group_job_index(js: Object, group_name: str, rjob_name: str, job_index: int) -> str:
    """Like the global index but counting only rjobs of ``group_name``; "" if not found there."""
    total = 0
    for rjob in replicated_jobs(js):
        if group_name_of(rjob) != group_name:
            continue
        if rjob.get("name") == rjob_name:
            return str(total + job_index)
        total += replicas_of(rjob)
    return ""


def group_replicas(js: Object, group_name: str) -> str:
    return str(sum(replicas_of(r) for r in replicated_jobs(js) if group_name_of(r) == group_name))


# -- construction (2.9) ----------------------------------------------------------------------------


def standard_keys(
    js: Object, rjob: Object, job_index: int, steps: ControllerSteps = V0_10_STEPS
) -> dict[str, str]:
    """The labels (and identical annotations) every child Job and its pod template carry; the
    release may add its own (``job_restart_keys``: v0.12.0's ``job-restart-attempt``)."""
    js_name, namespace = name_of(js), str(meta(js).get("namespace") or "")
    rjob_name = str(rjob.get("name") or "")
    job_name = gen_job_name(js_name, rjob_name, job_index)
    group = group_name_of(rjob)
    keys = {
        c.JobSetNameKey: js_name,
        c.JobSetUIDKey: str(meta(js).get("uid") or ""),
        c.ReplicatedJobNameKey: rjob_name,
        c.GroupNameKey: group,
        c.ReplicatedJobReplicas: str(replicas_of(rjob)),
        c.JobIndexKey: str(job_index),
        c.RestartsKey: str(int((js.get("status") or {}).get("restarts") or 0)),
        c.JobKey: job_hash_key(namespace, job_name),
        c.JobGlobalIndexKey: global_job_index(js, rjob_name, job_index),
        c.GlobalReplicasKey: global_replicas(js),
        c.JobGroupIndexKey: group_job_index(js, group, rjob_name, job_index),
        c.GroupReplicasKey: group_replicas(js, group),
    }
    keys.update(steps.job_restart_keys(js, rjob_name, job_index))
    if spec_of(js).get("coordinator") is not None:
        keys[c.CoordinatorKey] = coordinator_endpoint(js)
    return keys


def exclusive_annotations(js: Object, rjob: Object) -> dict[str, str]:
    """Exclusive-placement annotations: the JobSet's first, the rjob template's override them."""
    out: dict[str, str] = {}
    for source in (
        annotations_of(js),
        dict(((rjob.get("template") or {}).get("metadata") or {}).get("annotations") or {}),
    ):
        if c.ExclusiveKey in source:
            out[c.ExclusiveKey] = source[c.ExclusiveKey]
            if c.NodeSelectorStrategyKey in source:
                out[c.NodeSelectorStrategyKey] = source[c.NodeSelectorStrategyKey]
    return out


def _label_and_annotate(target: Object, keys: dict[str, str], extra_annotations: dict[str, str]) -> None:
    target_meta = target.setdefault("metadata", {})
    target_meta["labels"] = {**(target_meta.get("labels") or {}), **keys}
    target_meta["annotations"] = {**(target_meta.get("annotations") or {}), **keys, **extra_annotations}


def construct_job(js: Object, rjob: Object, job_index: int, steps: ControllerSteps = V0_10_STEPS) -> Object:
    """One child Job, field for field as upstream's constructJob builds it."""
    template = rjob.get("template") or {}
    template_meta = template.get("metadata") or {}
    job_name = gen_job_name(name_of(js), str(rjob.get("name") or ""), job_index)
    job_meta: Object = {"name": job_name, "namespace": str(meta(js).get("namespace") or "")}
    if template_meta.get("labels") is not None:
        job_meta["labels"] = dict(template_meta["labels"])
    if template_meta.get("annotations") is not None:
        job_meta["annotations"] = dict(template_meta["annotations"])
    job: Object = {
        "apiVersion": JOB_API_VERSION,
        "kind": JOB_KIND,
        "metadata": job_meta,
        "spec": copy.deepcopy(template.get("spec") or {}),
    }
    keys = standard_keys(js, rjob, job_index, steps)
    extra = exclusive_annotations(js, rjob)
    _label_and_annotate(job, keys, extra)
    pod_template = job["spec"].setdefault("template", {})
    _label_and_annotate(pod_template, keys, extra)
    pod_spec = pod_template.setdefault("spec", {})
    if dns_hostnames_enabled(js):
        pod_spec["subdomain"] = subdomain_of(js)
    annotations = job["metadata"]["annotations"]
    if c.ExclusiveKey in annotations and c.NodeSelectorStrategyKey in annotations:
        selector = pod_spec.get("nodeSelector") or {}
        selector[c.NamespacedJobKey] = namespaced_job_name(job_meta["namespace"], job_name)
        pod_spec["nodeSelector"] = selector
        pod_spec["tolerations"] = [
            *(pod_spec.get("tolerations") or []),
            {"key": c.NoScheduleTaintKey, "operator": "Exists", "effect": "NoSchedule"},
        ]
    job["spec"]["suspend"] = jobset_suspended(js)
    steps.add_volumes(job, js)
    job_meta["ownerReferences"] = [owner_reference(js)]
    return job


def blocking_recreate(js: Object) -> bool:
    policy = spec_of(js).get("failurePolicy") or {}
    return policy.get("restartStrategy") == c.BlockingRecreate


def jobs_to_create(
    js: Object, rjob: Object, owned: ChildJobs, steps: ControllerSteps = V0_10_STEPS
) -> Iterator[Object]:
    """The rjob's Jobs whose names are not taken by any owned Job (2.10), each built when it is
    taken from the iterator: upstream builds the whole list first, so a JobSet of a million
    replicas (which its webhook and CRD admit) holds a million Jobs in memory before the first
    create; here the creates draw them one by one (found by reconcile fuzzing: ``replicas:
    1000000`` blocked the manager's event loop for minutes, its webhooks timing out).

    BlockingRecreate creates nothing while any previous-attempt Job still exists.
    """
    if blocking_recreate(js) and owned.previous:
        return
    taken = owned.names()
    for index in range(replicas_of(rjob)):
        if gen_job_name(name_of(js), str(rjob.get("name") or ""), index) not in taken:
            yield construct_job(js, rjob, index, steps)
