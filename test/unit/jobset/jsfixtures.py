"""Builders for JobSet unit tests, shaped like upstream's testing wrappers (pkg/util/testing)."""

from __future__ import annotations

import datetime
import hashlib
from typing import Any

from manager.client.errors import NotFound
from manager.meta.gvk import JOB as JOB_GVK
from manager.meta.gvk import POD as POD_GVK
from manager.testing.fake import FakeClient
from trainer.api import jobset_constants as c
from trainer.controllers.jobset.metrics import JobSetMetrics
from trainer.controllers.jobset.reconciler import JOB_OWNER_KEY, JOBSET_GVK, JobSetReconciler, job_owner_index

Object = dict[str, Any]
NOW = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
NS = "default"
JS_NAME = "test-jobset"


def ts(when: datetime.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def rjob(
    name: str,
    replicas: int = 1,
    *,
    group: str = "default",
    parallelism: int | None = None,
    completions: int | None = None,
    completion_mode: str | None = None,
    depends_on: list[Object] | None = None,
    job_labels: dict[str, str] | None = None,
    job_annotations: dict[str, str] | None = None,
    pod_labels: dict[str, str] | None = None,
    pod_annotations: dict[str, str] | None = None,
) -> Object:
    job_spec: Object = {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    if parallelism is not None:
        job_spec["parallelism"] = parallelism
    if completions is not None:
        job_spec["completions"] = completions
    if completion_mode is not None:
        job_spec["completionMode"] = completion_mode
    pod_meta: Object = {}
    if pod_labels:
        pod_meta["labels"] = dict(pod_labels)
    if pod_annotations:
        pod_meta["annotations"] = dict(pod_annotations)
    if pod_meta:
        job_spec["template"]["metadata"] = pod_meta
    template: Object = {"spec": job_spec}
    tmeta: Object = {}
    if job_labels:
        tmeta["labels"] = dict(job_labels)
    if job_annotations:
        tmeta["annotations"] = dict(job_annotations)
    if tmeta:
        template["metadata"] = tmeta
    out: Object = {"name": name, "groupName": group, "replicas": replicas, "template": template}
    if depends_on is not None:
        out["dependsOn"] = depends_on
    return out


def jobset(*rjobs: Object, name: str = JS_NAME, uid: str = "", **spec: Any) -> Object:
    body: Object = {"replicatedJobs": list(rjobs), **spec}
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": name, "namespace": NS, "uid": uid},
        "spec": body,
    }


def job(
    name: str,
    rjob_name: str,
    *,
    restarts: int = 0,
    js_name: str = JS_NAME,
    conditions: list[Object] | None = None,
    parallelism: int | None = 1,
    completions: int | None = None,
    suspend: bool | None = None,
    status: Object | None = None,
    deleting: bool = False,
) -> Object:
    spec: Object = {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    if suspend is not None:
        spec["suspend"] = suspend
    meta: Object = {
        "name": name,
        "namespace": NS,
        "labels": {c.ReplicatedJobNameKey: rjob_name, c.RestartsKey: str(restarts), c.JobSetNameKey: js_name},
        "ownerReferences": [
            {"apiVersion": c.API_VERSION, "kind": c.KIND, "name": js_name, "uid": "", "controller": True}
        ],
    }
    if deleting:
        meta["deletionTimestamp"] = ts(NOW)
        meta["finalizers"] = ["foregroundDeletion"]
    body: Object = dict(status or {})
    if conditions is not None:
        body["conditions"] = conditions
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec, "status": body}


def cond(
    type_: str, status: str = "True", *, reason: str = "", message: str = "", when: datetime.datetime = NOW
) -> Object:
    out: Object = {"type": type_, "status": status, "lastTransitionTime": ts(when)}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def failed(reason: str = "", message: str = "", when: datetime.datetime = NOW) -> list[Object]:
    return [
        cond("FailureTarget", reason=reason, message=message, when=when),
        cond("Failed", reason=reason, message=message, when=when),
    ]


def complete(when: datetime.datetime = NOW) -> list[Object]:
    return [cond("SuccessCriteriaMet", when=when), cond("Complete", when=when)]


class RecordingClient(FakeClient):
    """The framework's FakeClient, also remembering each delete's propagation policy."""

    def __init__(self, *objects: Any) -> None:
        super().__init__(objects, status_subresource=[JOBSET_GVK, JOB_GVK, POD_GVK])
        self.add_index(JOB_GVK, JOB_OWNER_KEY, job_owner_index)
        self.deletes: list[tuple[str, str, str | None]] = []
        self.created: list[Object] = []

    async def create(self, obj: Any, **kwargs: Any) -> Any:
        result = await super().create(obj, **kwargs)
        self.created.append(result)
        return result

    async def delete(self, obj: Any, *, propagation_policy: Any = None, **kwargs: Any) -> None:
        data = obj if isinstance(obj, dict) else {}
        self.deletes.append((data.get("kind", ""), data["metadata"]["name"], propagation_policy))
        await super().delete(obj, propagation_policy=propagation_policy, **kwargs)

    def stored(self, kind: str, name: str) -> Object | None:
        for (gvk, _ns, obj_name), obj in self._objects.items():
            if gvk.kind == kind and obj_name == name:
                return obj
        return None

    def names(self, kind: str) -> list[str]:
        return sorted(name for (gvk, _ns, name) in self._objects if gvk.kind == kind)


class Events:
    """A recorder that keeps events as (type, reason, message)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, str]] = []

    async def event(self, obj: Any, event_type: str, reason: str, message: str) -> None:
        self.items.append((event_type, reason, message))

    def emit(self, obj: Any, event_type: str, reason: str, message: str) -> None:
        self.items.append((event_type, reason, message))


def reconciler(
    client: Any, *, now: datetime.datetime = NOW
) -> tuple[JobSetReconciler, Events, JobSetMetrics]:
    from prometheus_client import CollectorRegistry

    events = Events()
    metrics = JobSetMetrics(CollectorRegistry())
    return JobSetReconciler(client, events, now=lambda: now, metrics=metrics), events, metrics


async def get_jobset(client: RecordingClient, name: str = JS_NAME) -> Object:
    try:
        result: Object = await client.get(JOBSET_GVK, name, NS)
    except NotFound:
        return {}
    return result
