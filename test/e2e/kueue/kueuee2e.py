"""Kueue e2e helpers: the stack (a full local cluster, this manager at one API level, the Kueue
release of that level), where Kueue writes into a TrainJob at each level (``WRITES``), and the
objects the tests create, read through the Environment's admin client (``env.request``).

Module name unique among the test directories (they are all on ``sys.path``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import pytest

from manager.envtest import Environment
from manager.envtest.process import Process
from manager.testing import eventually
from trainer.conformance import kueue as kq
from trainer.levels import ApiLevel

Json = dict[str, Any]
ROOT = Path(__file__).resolve().parents[3]

full_only = pytest.mark.kueue_full
"""The tests only the whole suite runs: ``make test`` deselects them (``-m "... and not
kueue_full"``), ``make test-kueue`` and a plain ``pytest test/e2e/kueue`` run them."""

LEVELS_ENV = "KUEUE_E2E_LEVELS"
"""The API levels the suite runs at, comma-separated (default: every level of
``kueue.KUEUE_VERSIONS``); ``-k v2_3`` selects one as well."""
KUEUE_LEVELS = [n for n in os.environ.get(LEVELS_ENV, ",".join(kq.KUEUE_VERSIONS)).split(",") if n]

MANAGERS_ENV = "KUEUE_E2E_MANAGERS"
"""``go``: the suite against the Go trainer and jobset managers of the level (v2.1.0 and v0.10.1,
v2.3.0 and v0.12.0) instead of this one (``KUEUE_E2E_MANAGERS=go make test-kueue``), for
comparison."""
GO_MANAGERS = os.environ.get(MANAGERS_ENV, "ours") == "go"

POOL_LABEL = "kueue-e2e/pool"
POOL = "reserved"
"""The KWOK nodes only Kueue's flavor leads to: labelled ``POOL_LABEL=POOL`` and tainted
``POOL_LABEL=POOL:NoSchedule``, so a pod lands there only with the flavor's node selector and
toleration (the cluster's untainted node takes every other pod)."""
POOL_TOLERATION = {"key": POOL_LABEL, "operator": "Equal", "value": POOL, "effect": "NoSchedule"}

TJ_API = "/apis/trainer.kubeflow.org/v1alpha1"
JS_API = "/apis/jobset.x-k8s.io/v1alpha2"
KQ_API = f"/apis/{kq.API_VERSION}"
WAIT = 60.0
"""Deadline of one wait (admission, preemption, pods): seconds on an idle machine."""
PODS_READY_TIMEOUT = 90.0
"""Kueue's ``waitForPodsReady.timeout`` in the stack (conftest ``WAIT_FOR_PODS_READY``)."""


PODSET_LABEL = "kueue.x-k8s.io/podset"
KUEUE_PATCH_MANAGER = "kueue.x-k8s.io/manager"
"""The ``runtimePatches[].manager`` of Kueue v0.17's entry (``runtimePatchManagerName``)."""


class KueueWrites(Protocol):
    """Where Kueue writes its admission into a TrainJob at one API level, and how a user writes
    a pod template change of the ``node`` job there."""

    field: str
    """The TrainJob ``spec`` field (``podTemplateOverrides``, ``runtimePatches``)."""

    def entries(self, tj: Json) -> list[Json]:
        """The field's entries as the user and Kueue wrote them (server-stamped ``time`` dropped)."""
        ...

    def kueue_templates(self, tj: Json) -> list[Json]:
        """Kueue's admission: one pod template patch (``metadata``, ``spec``) per pod set."""
        ...

    def kueue_entries_left(self, tj: Json) -> list[Json]:
        """What stays of Kueue's entries once it removed its admission (v2.3: the entry itself)."""
        ...

    def user_entry(
        self,
        *,
        labels: dict[str, str] | None = None,
        node_selector: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> Json:
        """A user's entry for the ``node`` job: pod labels, annotations and/or a node selector."""
        ...


def _pod_metadata(labels: dict[str, str] | None, annotations: dict[str, str] | None) -> Json:
    metadata: Json = {}
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    return metadata


class PodTemplateOverrides:
    """Level v2.1, Kueue v0.15: one ``podTemplateOverrides`` entry per pod set, appended on
    admission (its pod metadata carries ``kueue.x-k8s.io/podset``), cut off again on stop."""

    field = "podTemplateOverrides"

    def entries(self, tj: Json) -> list[Json]:
        return list(tj["spec"].get(self.field) or [])

    def kueue_templates(self, tj: Json) -> list[Json]:
        return [
            o for o in self.entries(tj) if PODSET_LABEL in ((o.get("metadata") or {}).get("labels") or {})
        ]

    def kueue_entries_left(self, tj: Json) -> list[Json]:
        return self.kueue_templates(tj)

    def user_entry(
        self,
        *,
        labels: dict[str, str] | None = None,
        node_selector: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> Json:
        entry: Json = {"targetJobs": [{"name": "node"}]}
        if metadata := _pod_metadata(labels, annotations):
            entry["metadata"] = metadata
        if node_selector:
            entry["spec"] = {"nodeSelector": node_selector}
        return entry


class RuntimePatches:
    """Level v2.3, Kueue v0.17: Kueue's webhook appends one ``runtimePatches`` entry of manager
    ``kueue.x-k8s.io/manager`` to every TrainJob it creates (the queue label as JobSet metadata
    when it suspends it); admission writes the entry's ``template.spec.replicatedJobs`` (per pod
    set: pod labels and annotations, nodeSelector, tolerations, schedulingGates) while the
    TrainJob is suspended, stop sets them to nil again, leaving the entry."""

    field = "runtimePatches"

    def entries(self, tj: Json) -> list[Json]:
        return [{k: v for k, v in e.items() if k != "time"} for e in tj["spec"].get(self.field) or []]

    def kueue_entries_left(self, tj: Json) -> list[Json]:
        return [e for e in self.entries(tj) if e.get("manager") == KUEUE_PATCH_MANAGER]

    def kueue_templates(self, tj: Json) -> list[Json]:
        out = []
        for entry in self.kueue_entries_left(tj):
            spec = (((entry.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec")) or {}
            for rjob in spec.get("replicatedJobs") or []:
                out.append(rjob["template"]["spec"]["template"])
        return out

    def user_entry(
        self,
        *,
        labels: dict[str, str] | None = None,
        node_selector: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> Json:
        template: Json = {}
        if metadata := _pod_metadata(labels, annotations):
            template["metadata"] = metadata
        if node_selector:
            template["spec"] = {"nodeSelector": node_selector}
        node = {"name": "node", "template": {"spec": {"template": template}}}
        return {
            "manager": "example.com/user",
            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [node]}}},
        }


WRITES: dict[str, KueueWrites] = {"v2.1": PodTemplateOverrides(), "v2.3": RuntimePatches()}
"""Where the Kueue release of each API level (``kueue.KUEUE_VERSIONS``) writes into a TrainJob."""


@dataclass
class Stack:
    env: Environment
    manager: Process
    kueue: kq.KueueProcess
    level: ApiLevel
    writes: KueueWrites


@dataclass
class MultiKueue:
    """A management stack whose MultiKueue admission check dispatches to ``worker``."""

    management: Stack
    worker: Stack


class Api:
    """Admin requests against the stack's API server, failing loudly on unexpected answers."""

    def __init__(self, env: Environment, namespace: str, writes: KueueWrites) -> None:
        self.env = env
        self.ns = namespace
        self.writes = writes
        """Where the stack's Kueue writes into TrainJobs (its level's ``WRITES``)."""

    async def create(self, path: str, body: Json) -> Json:
        status, answer = await self.env.request("POST", path, body)
        assert status == 201, f"create at {path} answered {status}: {answer}"
        return dict(answer)

    async def get(self, path: str) -> Json | None:
        status, answer = await self.env.request("GET", path)
        if status == 404:
            return None
        assert status == 200, f"GET {path} answered {status}: {answer}"
        return dict(answer)

    async def must_get(self, path: str) -> Json:
        obj = await self.get(path)
        assert obj is not None, f"{path} does not exist"
        return obj

    async def items(self, path: str, selector: str | None = None) -> list[Json]:
        query = f"?labelSelector={selector}" if selector else ""
        status, answer = await self.env.request("GET", path + query)
        assert status == 200, f"LIST {path} answered {status}: {answer}"
        return list(answer.get("items") or [])

    async def delete(self, path: str) -> None:
        status, answer = await self.env.request("DELETE", path)
        assert status in (200, 202, 404), f"DELETE {path} answered {status}: {answer}"

    async def patch(self, path: str, patch: Json) -> Json:
        status, answer = await self.env.request(
            "PATCH", path, patch, content_type="application/merge-patch+json"
        )
        assert status == 200, f"PATCH {path} answered {status}: {answer}"
        return dict(answer)

    # -- paths ---------------------------------------------------------------------------------

    def trainjob(self, name: str = "") -> str:
        return f"{TJ_API}/namespaces/{self.ns}/trainjobs" + (f"/{name}" if name else "")

    def jobset(self, name: str = "") -> str:
        return f"{JS_API}/namespaces/{self.ns}/jobsets" + (f"/{name}" if name else "")

    def workloads(self) -> str:
        return f"{KQ_API}/namespaces/{self.ns}/workloads"

    def pods(self) -> str:
        return f"/api/v1/namespaces/{self.ns}/pods"

    async def workload_of(self, kind: str, name: str) -> Json:
        """The Workload Kueue made for the ``kind`` object ``name`` (owner reference)."""
        for wl in await self.items(self.workloads()):
            for ref in wl["metadata"].get("ownerReferences") or []:
                if ref["kind"] == kind and ref["name"] == name:
                    return wl
        raise AssertionError(f"no Workload owned by {kind} {name} yet")

    async def jobset_pods(self, jobset: str) -> list[Json]:
        return await self.items(self.pods(), f"jobset.sigs.k8s.io/jobset-name={jobset}")


@dataclass
class MultiKueueApi:
    """The same namespace on the management and the worker cluster."""

    management: Api
    worker: Api


WORKER = "worker"
"""The worker's MultiKueueCluster name: the Workload's ``status.clusterName`` once it runs there."""
MULTIKUEUE_CHECK = "multikueue"
"""The AdmissionCheck of controller ``kueue.x-k8s.io/multikueue`` on the management cluster."""


async def connect_worker(management: Environment, worker: Environment) -> None:
    """The MultiKueue objects on ``management`` (``kueue.multikueue_objects``: the worker's admin
    kubeconfig in a Secret, its MultiKueueCluster, a MultiKueueConfig, the AdmissionCheck), until
    Kueue reports the cluster connected and the check active."""
    for obj in kq.multikueue_objects({WORKER: worker.kubeconfig.read_bytes()}, check=MULTIKUEUE_CHECK):
        if obj["kind"] == "Secret":
            path = f"/api/v1/namespaces/{kq.NAMESPACE}/secrets"
        else:
            path = f"{KQ_API}/{obj['kind'].lower()}s"
        status, body = await management.request("POST", path, obj)
        assert status == 201, f"create {obj['kind']} answered {status}: {body}"

    async def active() -> None:
        for path in (f"{KQ_API}/multikueueclusters/{WORKER}", f"{KQ_API}/admissionchecks/{MULTIKUEUE_CHECK}"):
            status, obj = await management.request("GET", path)
            assert status == 200 and is_true(obj, "Active"), (path, status, obj.get("status"))

    await eventually(active, timeout=WAIT, message="MultiKueue never connected the worker cluster")


async def management_queue_objects(api: Api, name: str, *, quota_cpu: str = "4") -> dict[str, str]:
    """On the management cluster: a ResourceFlavor of no node labels, a ClusterQueue of
    ``quota_cpu`` CPUs whose admission check is MultiKueue's and a LocalQueue ``lq`` (the name of
    the worker's, ``queue_objects``). Returns the names (``delete_queue_objects`` removes them)."""
    names = {"flavor": f"mk-rf-{name}", "cq": f"mk-cq-{name}", "lq": "lq"}
    check = {"admissionChecks": [{"name": MULTIKUEUE_CHECK}]}
    await _create_queues(
        api,
        names,
        kq.resource_flavor(names["flavor"]),
        kq.cluster_queue(names["cq"], names["flavor"], quota_cpu, admissionChecksStrategy=check),
        what="the management ClusterQueue and LocalQueue",
    )
    return names


async def _create_queues(
    api: Api, names: dict[str, str], flavor: Json, cluster_queue: Json, *, what: str
) -> None:
    """``flavor``, ``cluster_queue`` and LocalQueue ``names["lq"]`` feeding it, until both queues are Active."""
    await api.create(f"{KQ_API}/resourceflavors", flavor)
    await api.create(f"{KQ_API}/clusterqueues", cluster_queue)
    await api.create(
        f"{KQ_API}/namespaces/{api.ns}/localqueues", kq.local_queue(names["lq"], api.ns, names["cq"])
    )

    async def queue_active() -> None:
        cq = await api.must_get(f"{KQ_API}/clusterqueues/{names['cq']}")
        lq = await api.must_get(f"{KQ_API}/namespaces/{api.ns}/localqueues/{names['lq']}")
        assert is_true(cq, "Active") and is_true(lq, "Active"), (cq.get("status"), lq.get("status"))

    await eventually(queue_active, timeout=WAIT, message=f"{what} never became Active")


def node_pod_spec(js: Json) -> Json:
    """The pod spec of a TrainJob's JobSet's replicated job ``node``."""
    for rjob in js["spec"]["replicatedJobs"]:
        if rjob["name"] == "node":
            spec: Json = rjob["template"]["spec"]["template"]["spec"]
            return spec
    raise AssertionError(f"JobSet {js['metadata']['name']} has no replicated job 'node'")


def has_pool_placement(pod_spec: Json) -> bool:
    """The pool flavor's node selector and toleration (``queue_objects``) are in ``pod_spec``."""
    return (pod_spec.get("nodeSelector") or {}).get(POOL_LABEL) == POOL and POOL_TOLERATION in (
        pod_spec.get("tolerations") or []
    )


def condition(obj: Json, kind: str) -> Json | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return dict(c)
    return None


def is_true(obj: Json, kind: str) -> bool:
    c = condition(obj, kind)
    return bool(c and c["status"] == "True")


async def queue_objects(api: Api, name: str, *, quota_cpu: str = "4") -> dict[str, str]:
    """A ResourceFlavor (pool node label and toleration), a ClusterQueue of ``quota_cpu`` CPUs
    preempting lower priorities within it, a LocalQueue ``lq`` in the namespace and a
    WorkloadPriorityClass ``high``; cluster-scoped names carry ``name``. Returns the names."""
    names = {"flavor": f"rf-{name}", "cq": f"cq-{name}", "lq": "lq", "high": f"high-{name}"}
    await api.create(
        f"{KQ_API}/workloadpriorityclasses",
        {
            "apiVersion": kq.API_VERSION,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": names["high"]},
            "value": 1000,
        },
    )
    await _create_queues(
        api,
        names,
        kq.resource_flavor(names["flavor"], nodeLabels={POOL_LABEL: POOL}, tolerations=[POOL_TOLERATION]),
        kq.cluster_queue(
            names["cq"], names["flavor"], quota_cpu, preemption={"withinClusterQueue": "LowerPriority"}
        ),
        what="the ClusterQueue and LocalQueue",
    )
    return names


async def delete_queue_objects(api: Api, names: dict[str, str]) -> None:
    await api.delete(f"{KQ_API}/clusterqueues/{names['cq']}")
    await api.delete(f"{KQ_API}/resourceflavors/{names['flavor']}")
    if "high" in names:
        await api.delete(f"{KQ_API}/workloadpriorityclasses/{names['high']}")


def trainjob(name: str, namespace: str, *, nodes: int, cpu: str, priority: str | None = None) -> Json:
    labels = {kq.QUEUE_LABEL: "lq"}
    if priority:
        labels[kq.PRIORITY_LABEL] = priority
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": nodes, "resourcesPerNode": {"requests": {"cpu": cpu}}},
        },
    }


async def server_clock_past(api: Api, timestamp: str) -> None:
    """Until the API server's clock (a dry-run create's creationTimestamp, whole seconds) is past
    ``timestamp``: Kueue orders equal priorities by creation time, to the second."""
    probe = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "clock-"}}

    async def past() -> None:
        status, answer = await api.env.request(
            "POST", f"/api/v1/namespaces/{api.ns}/configmaps?dryRun=All", probe
        )
        assert status == 201, answer
        assert answer["metadata"]["creationTimestamp"] > timestamp, (answer["metadata"], timestamp)

    await eventually(
        past, timeout=5, interval=0.2, message=f"the API server's clock never passed {timestamp}"
    )


def reconciler_errors(log: Path, namespace: str, since: int = 0) -> list[Json]:
    """The manager's ``Reconciler error`` lines (JSON log) about objects of ``namespace``,
    from byte offset ``since`` on."""
    with log.open("rb") as f:
        f.seek(since)
        text = f.read().decode(errors="replace")
    found = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if entry.get("msg") == "Reconciler error" and entry.get("namespace") == namespace:
            found.append(entry)
    return found


def _kueue_owner_lag(entry: Json) -> bool:
    """Kueue's own JobSet defaulter (``mjobset.kb.io``, ``FindAncestorJobManagedByKueue``) walks
    a new JobSet's owners through Kueue's cached client: on a MultiKueue worker the TrainJob that
    MultiKueue has just created may not be in Kueue's cache yet when this manager (or Go's)
    creates its JobSet, and Kueue denies the create with the owner's NotFound (its
    ``ErrWorkloadOwnerNotFound`` joined with the read's error). The TrainJob is reconciled again
    and its JobSet made; the tests assert that it runs. Only that denial, of the TrainJob itself,
    is Kueue's lag and not this manager's error."""
    name = entry.get("name")
    error = str(entry.get("error") or "")
    return entry.get("kind") == "TrainJob" and error.startswith(
        f'admission webhook "mjobset.kb.io" denied the request: TrainJob.trainer.kubeflow.org "{name}" not found'
    )


def assert_no_reconciler_errors(stack: Stack, namespace: str, since: int) -> None:
    """This manager logged no ``Reconciler error`` about the namespace since byte ``since``
    (not checked against the Go managers, which log routine conflicts and not-founds so), but
    for Kueue's webhook not having seen a TrainJob yet (``_kueue_owner_lag``)."""
    if GO_MANAGERS:
        return
    errors = [e for e in reconciler_errors(stack.manager.log, namespace, since) if not _kueue_owner_lag(e)]
    assert errors == [], errors


def log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def timed(label: str) -> Callable[[], None]:
    """Print how long a phase took (``-s`` shows it)."""
    started = time.monotonic()

    def done() -> None:
        print(f"kueue-e2e: {label} after {time.monotonic() - started:.1f}s")

    return done


class Watch:
    """Every version of the objects at a collection ``path`` from ``resource_version`` on, as the
    API server sends them (a watch in a background task): what a poll could miss in between."""

    def __init__(self, env: Environment, path: str, resource_version: str) -> None:
        self.env = env
        self.url = f"{env.url}{path}?watch=true&resourceVersion={resource_version}&allowWatchBookmarks=false"
        self.events: list[tuple[str, Json]] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Watch:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        connector = aiohttp.TCPConnector(ssl=self.env.ssl_context())
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.get(self.url, timeout=aiohttp.ClientTimeout(total=None)) as response,
        ):
            assert response.status == 200, await response.text()
            async for line in response.content:
                if line.strip():
                    event = json.loads(line)
                    self.events.append((event["type"], event["object"]))
