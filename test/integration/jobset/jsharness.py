"""JobSet integration harness (helpers): a real Manager running ``setup()`` on the session control plane.

The controller suite mirrors upstream's: no webhooks, no kube-controller-manager (no Job
controller, no garbage collector), so tests write Job status themselves and clear the
``foregroundDeletion`` finalizers that foreground deletes leave. The webhook fixture adds a
webhook server and installs ``config/webhook/jobset.yaml`` scoped to the test's namespace.
``run_manager`` records the JobSet controller's reconciles (``JobSetReconciles``), so a check that
something did *not* happen waits for the controller to have settled (``Harness.settled``).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from manager import Manager, Options
from manager.cache.cache import CacheOptions
from manager.client.errors import Conflict, NotFound
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.controller.reconcile import Request
from manager.envtest import Environment
from manager.meta.gvk import JOB as JOB_GVK
from manager.meta.gvk import SERVICE as SERVICE_GVK
from manager.testing import eventually
from manager.webhook import WebhookServer
from trainer.api import jobset_constants as c
from trainer.components import component
from trainer.controllers import podcache
from trainer.controllers.jobset.reconciler import JOB_OWNER_KEY, JOBSET_GVK, JobSetReconciler
from trainer.runtime.context import SetupContext

ROOT = Path(__file__).resolve().parents[3]
WEBHOOK_MANIFEST = ROOT / "config" / "webhook" / "jobset.yaml"
Object = dict[str, Any]


def rjob(name: str, replicas: int, *, indexed: bool = False, **extra: Any) -> Object:
    job_spec: Object = {
        "parallelism": 1,
        "completions": 1,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "100"]}],
            }
        },
    }
    if indexed:
        job_spec["completionMode"] = "Indexed"
    return {"name": name, "replicas": replicas, "template": {"spec": job_spec}, **extra}


def make_jobset(namespace: str, name: str = "test-js", **spec: Any) -> Object:
    """Upstream's ``testJobSet``: rjob a x1 and rjob b x3 (Indexed), All policy, DNS hostnames."""
    body: Object = {
        "successPolicy": {"operator": "All", "targetReplicatedJobs": []},
        "network": {"enableDNSHostnames": True},
        "replicatedJobs": [rjob("replicated-job-a", 1), rjob("replicated-job-b", 3, indexed=True)],
    }
    body.update(spec)
    meta: Object = {"namespace": namespace}
    if name.endswith("-"):
        meta["generateName"] = name
    else:
        meta["name"] = name
    return {"apiVersion": c.API_VERSION, "kind": c.KIND, "metadata": meta, "spec": body}


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Observed:
    """A JobSet and its Jobs by resourceVersion (JobSet None: absent)."""

    jobset: int | None
    jobs: frozenset[tuple[str, int]]


class JobSetReconciles:
    """The JobSet controller's reconciles that returned without raising, each with what the
    manager's cache held when it started (the reconciler reads the cache right after)."""

    def __init__(self) -> None:
        self.finished: list[tuple[Request, Observed]] = []

    def install(self) -> Callable[[], None]:
        """Wrap ``JobSetReconciler.reconcile`` (before the controller is built: it keeps the
        method); returns the undo."""
        original = JobSetReconciler.reconcile

        async def spy(reconciler: JobSetReconciler, req: Request) -> Any:
            try:
                js = await reconciler.client.get(JOBSET_GVK, req.name, req.namespace)
            except NotFound:
                js = None
            # the JobSet's Jobs as its release lists them (v0.10.1: by name, v0.12.0: by uid)
            owner_key = reconciler.steps.job_owner_key(js) if js is not None else req.name
            jobs = await reconciler.client.list(
                JOB_GVK, namespace=req.namespace, field_selector={JOB_OWNER_KEY: owner_key}
            )
            observed = Observed(
                int(js["metadata"]["resourceVersion"]) if js is not None else None,
                frozenset((j["metadata"]["name"], int(j["metadata"]["resourceVersion"])) for j in jobs),
            )
            result = await original(reconciler, req)
            self.finished.append((req, observed))
            return result

        JobSetReconciler.reconcile = spy  # type: ignore[method-assign]

        def undo() -> None:
            JobSetReconciler.reconcile = original  # type: ignore[method-assign]

        return undo


@dataclass
class Harness:
    """Live reads and writes for one test namespace (the controller's cache is not used here)."""

    api: Any
    namespace: str
    # The webhook server's address and CA, when the suite runs with webhooks (direct POSTs).
    webhook_url: str = ""
    webhook_ca: bytes = b""
    reconciles: JobSetReconciles = field(default_factory=JobSetReconciles)
    flush_events: Callable[[], Awaitable[None]] | None = None

    async def create(self, obj: Object) -> Object:
        result: Object = await self.api.create(obj)
        return result

    async def jobset(self, name: str = "test-js") -> Object:
        result: Object = await self.api.get(JOBSET_GVK, name, self.namespace)
        return result

    async def jobs(self, name: str = "test-js") -> list[Object]:
        items = await self.api.list(JOB_GVK, namespace=self.namespace)
        return [j for j in items if (j["metadata"].get("labels") or {}).get(c.JobSetNameKey) == name]

    async def services(self) -> list[Object]:
        result: list[Object] = await self.api.list(SERVICE_GVK, namespace=self.namespace)
        return result

    async def wait_jobs(self, count: int, name: str = "test-js", timeout: float = 20) -> list[Object]:
        async def check() -> list[Object]:
            jobs = await self.jobs(name)
            assert len(jobs) == count, f"{len(jobs)} jobs: {[j['metadata']['name'] for j in jobs]}"
            return jobs

        return await eventually(check, timeout=timeout)

    async def update_js(self, name: str, mutate: Any) -> Object:
        while True:
            js = await self.jobset(name)
            mutate(js)
            try:
                result: Object = await self.api.update(js)
                return result
            except Conflict:
                continue

    async def set_job_status(self, job_name: str, status: Object) -> None:
        while True:
            job = await self.api.get(JOB_GVK, job_name, self.namespace)
            job["status"] = copy.deepcopy(status)
            try:
                await self.api.status.update(job)
                return
            except Conflict:
                continue

    async def complete_job(self, job: Object) -> None:
        now = _now()
        parallelism = job["spec"].get("parallelism") or 1
        status: Object = {
            "conditions": [
                {
                    "type": "SuccessCriteriaMet",
                    "status": "True",
                    "lastTransitionTime": now,
                    "lastProbeTime": now,
                },
                {"type": "Complete", "status": "True", "lastTransitionTime": now, "lastProbeTime": now},
            ],
            "succeeded": parallelism,
            "startTime": now,
            "completionTime": now,
        }
        if job["spec"].get("completionMode") == "Indexed":
            status["completedIndexes"] = "0" if parallelism == 1 else f"0-{parallelism - 1}"
        await self.set_job_status(job["metadata"]["name"], status)

    async def fail_job(self, job: Object, reason: str = "", message: str = "") -> None:
        now = _now()
        conditions = []
        for kind in ("FailureTarget", "Failed"):
            cond: Object = {"type": kind, "status": "True", "lastTransitionTime": now, "lastProbeTime": now}
            if reason:
                cond["reason"] = reason
            if message:
                cond["message"] = message
            conditions.append(cond)
        await self.set_job_status(job["metadata"]["name"], {"conditions": conditions, "startTime": now})

    async def ready_job(self, job: Object) -> None:
        p = job["spec"].get("parallelism") or 1
        await self.set_job_status(job["metadata"]["name"], {"active": p, "ready": p})

    async def active_job(self, job: Object) -> None:
        p = job["spec"].get("parallelism") or 1
        await self.set_job_status(job["metadata"]["name"], {"active": p})

    async def remove_finalizers(self, expect: int | None = None, name: str = "test-js") -> int:
        """Clear foregroundDeletion from terminating Jobs (what the garbage collector would do)."""
        removed = 0
        for job in await self.jobs(name):
            terminating = job["metadata"].get("deletionTimestamp") and job["metadata"].get("finalizers")
            if terminating and await self.clear_finalizers(job["metadata"]["name"]):
                removed += 1
        if expect is not None:
            assert removed == expect, f"removed {removed} finalizers, expected {expect}"
        return removed

    async def clear_finalizers(self, job_name: str) -> bool:
        """Empty one Job's finalizers, re-reading on conflicts; False if it is already gone."""
        while True:
            try:
                job = await self.api.get(JOB_GVK, job_name, self.namespace)
                job["metadata"]["finalizers"] = []
                await self.api.update(job)
                return True
            except NotFound:
                return False
            except Conflict:
                continue

    async def wait_terminating(self, count: int, name: str = "test-js") -> None:
        async def check() -> None:
            jobs = await self.jobs(name)
            assert sum(1 for j in jobs if j["metadata"].get("deletionTimestamp")) == count

        await eventually(check, timeout=20)

    async def condition(self, type_: str, name: str = "test-js") -> Object | None:
        js = await self.jobset(name)
        for cond in (js.get("status") or {}).get("conditions") or []:
            if cond["type"] == type_:
                result: Object = cond
                return result
        return None

    async def wait_condition(
        self, type_: str, status: str = "True", name: str = "test-js", timeout: float = 20
    ) -> Object:
        async def check() -> Object:
            cond = await self.condition(type_, name)
            assert cond is not None and cond["status"] == status, f"{type_}: {cond}"
            return cond

        return await eventually(check, timeout=timeout)

    async def rjob_status(self, name: str = "test-js") -> dict[str, Object]:
        js = await self.jobset(name)
        return {s["name"]: s for s in (js.get("status") or {}).get("replicatedJobsStatus") or []}

    async def wait_rjob_status(
        self, expected: dict[str, Object], name: str = "test-js", timeout: float = 20
    ) -> None:
        async def check() -> None:
            statuses = await self.rjob_status(name)
            for rname, counts in expected.items():
                zero = {"ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
                got = {k: statuses.get(rname, {}).get(k) for k in zero}
                assert got == {**zero, **counts}, f"{rname}: {got} != {counts}"

        await eventually(check, timeout=timeout)

    async def settled(self, name: str = "test-js", timeout: float = 20) -> None:
        """Until the controller is at a fixed point for JobSet ``name``: a reconcile that started
        with the cache holding what the API server holds now (the JobSet and its Jobs, by
        resourceVersion) has finished and changed none of it; then the Events it emitted in the
        background are written. The positive proof that the controller has processed every
        change so far, for a check that something did *not* happen (instead of looking again
        for a while, as upstream's ``Consistently``)."""
        request = Request(self.namespace, name)

        async def fixed_point() -> None:
            js = await self.jobset(name)
            jobs = await self.jobs(name)
            now = Observed(
                int(js["metadata"]["resourceVersion"]),
                frozenset((j["metadata"]["name"], int(j["metadata"]["resourceVersion"])) for j in jobs),
            )
            seen = [o for r, o in self.reconciles.finished if r == request]
            assert now in seen, f"API {now}; last reconciles started from {seen[-3:]}"

        await eventually(fixed_point, timeout=timeout, message=f"the JobSet controller settled {name}")
        if self.flush_events is not None:
            await self.flush_events()

    async def js_stays_active(self, name: str = "test-js") -> None:
        """Upstream's ``Consistently(JobSetActive)``: once the controller has settled, no
        Failed/Completed/Suspended=True."""
        await self.settled(name)
        js = await self.jobset(name)
        bad = [
            x["type"]
            for x in (js.get("status") or {}).get("conditions") or []
            if x["type"] in ("Failed", "Completed", "Suspended") and x["status"] == "True"
        ]
        assert not bad, f"JobSet not active: {bad}"


async def run_manager(
    control_plane: Environment, server: WebhookServer | None, namespace: str, reconciles: JobSetReconciles
) -> AsyncIterator[tuple[Manager, Cluster]]:
    """A manager whose cache watches only the test's namespace: JobSets left in namespaces of
    earlier tests (never finalized: there is no namespace controller) stay out of this test.
    Its JobSet controller's reconciles are recorded in ``reconciles``."""
    config = await load_kubeconfig(control_plane.kubeconfig)
    options = CacheOptions(default_namespaces=[namespace])
    async with Cluster(config, field_owner="jobset-test", cache_options=options) as cluster:
        mgr = Manager(cluster, Options(metrics_bind_address="0"))
        # the product's default Pod cache (docs/scale.md): Pods with the jobset-name label only
        assert await podcache.configure(mgr, None, ["jobset"]) == "Minimal/label-selected"
        undo = reconciles.install()
        try:
            assert await component("jobset").setup(SetupContext(mgr, server)) is True
        finally:
            undo()  # the controller keeps the wrapped method; later managers get the original
        if server is not None:
            mgr.add_webhook_server(server)
        task = asyncio.create_task(mgr.run())
        try:
            await eventually(lambda: mgr.elected.is_set(), timeout=30)
            yield mgr, cluster
        finally:
            mgr.stop()
            await asyncio.gather(task, return_exceptions=True)


def scoped_webhook_manifest(namespace: str, target: Path) -> Path:
    """The upstream configurations, renamed per test and limited to one namespace."""
    docs = list(yaml.safe_load_all(WEBHOOK_MANIFEST.read_text()))
    for doc in docs:
        doc["metadata"]["name"] = f"{doc['metadata']['name']}-{namespace}"
        for hook in doc["webhooks"]:
            hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            hook["timeoutSeconds"] = 10
    target.write_text(yaml.safe_dump_all(docs))
    return target
