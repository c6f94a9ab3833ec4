"""Fixtures for the Trainer integration tests: a real Manager running the ``trainer`` component.

The manager serves the three validating webhooks on 127.0.0.1 with a throwaway CA; the
webhook configuration (config/webhook/trainer.yaml) is installed pointing at it, with the
namespaced webhooks limited to the test's namespace, and removed afterwards so no other test
meets a webhook that is gone. There is no kube-controller-manager and no JobSet controller:
tests play their part by writing JobSet status.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from trainer_wrappers import runtime, wrapper_rjobs

from manager import Manager, Options
from manager.client import Client, Forbidden, NotFound
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.controller.reconcile import Request
from manager.envtest import Environment
from manager.envtest.certs import TinyCA
from manager.scheme import GroupVersionKind
from manager.testing.eventually import eventually
from manager.webhook.server import WebhookServer
from trainer.controllers import trainer_setup
from trainer.controllers.trainingruntime import RuntimeReconciler
from trainer.controllers.trainjob import TrainJobReconciler
from trainer.runtime.context import SetupContext
from webhooks import setup_trainer

ROOT = Path(__file__).resolve().parents[3]
WEBHOOKS = ROOT / "config" / "webhook" / "trainer.yaml"
VWC = "validator.trainer.kubeflow.org"
VWC_PATH = f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{VWC}"

Json = dict[str, Any]


JOBSET = GroupVersionKind("jobset.x-k8s.io", "v1alpha2", "JobSet")
TRAINJOB = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainJob")


@dataclass(frozen=True)
class Reconcile:
    """One reconcile that returned without raising, and what the manager's cache held when it
    started (the reconciler reads the cache right after, so it saw this or newer)."""

    controller: str  # "trainjob" or "runtime"
    request: Request
    started: int  # the position of its start among all starts (``Reconciles.mark``)
    observed: dict[str, int | None]


def _resource_version(obj: Json | None) -> int | None:
    return int(obj["metadata"]["resourceVersion"]) if obj is not None else None


async def _cached(client: Any, gvk: GroupVersionKind, name: str, namespace: str) -> Json | None:
    try:
        obj: Json = await client.get(gvk, name, namespace)
    except NotFound:
        return None
    return obj


@dataclass
class Reconciles:
    """The TrainJob and runtime controllers' finished reconciles: the positive proof that a
    controller has processed a change, for a test to wait for before it checks that the change
    did *not* lead somewhere (instead of looking again for a while).

    A TrainJob reconcile observes the cached ``trainjob`` and its ``jobset`` (same name) by
    resourceVersion (None: absent); a runtime reconcile the cached ``runtime`` and how many
    TrainJobs reference it (``trainjobs``).
    """

    finished: list[Reconcile] = field(default_factory=list)
    _starts: itertools.count[int] = field(default_factory=itertools.count)
    _next: int = 0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Wrap the reconcilers' ``reconcile`` (before the controllers are built: they keep the method)."""
        trainjob_reconcile, runtime_reconcile = TrainJobReconciler.reconcile, RuntimeReconciler.reconcile

        async def trainjob_spy(reconciler: TrainJobReconciler, req: Request) -> Any:
            namespace = req.namespace or ""
            tj = await _cached(reconciler.client, TRAINJOB, req.name, namespace)
            js = await _cached(reconciler.client, JOBSET, req.name, namespace)
            observed = {"trainjob": _resource_version(tj), "jobset": _resource_version(js)}
            return await self._record("trainjob", req, observed, trainjob_reconcile(reconciler, req))

        async def runtime_spy(reconciler: RuntimeReconciler, req: Request) -> Any:
            runtime = await _cached(reconciler.client, reconciler.kind.gvk, req.name, req.namespace or "")
            count = len(await reconciler.list_referencing_trainjobs(runtime)) if runtime is not None else None
            observed = {"runtime": _resource_version(runtime), "trainjobs": count}
            return await self._record("runtime", req, observed, runtime_reconcile(reconciler, req))

        monkeypatch.setattr(TrainJobReconciler, "reconcile", trainjob_spy)
        monkeypatch.setattr(RuntimeReconciler, "reconcile", runtime_spy)

    async def _record(self, controller: str, req: Request, observed: dict[str, int | None], call: Any) -> Any:
        started = next(self._starts)
        self._next = started + 1
        result = await call
        self.finished.append(Reconcile(controller, req, started, observed))
        return result

    def mark(self) -> int:
        """A position: ``processed(since=mark)`` counts only reconciles that start after now."""
        return self._next

    async def processed(
        self,
        controller: str,
        request: Request,
        check: Callable[[dict[str, int | None]], bool],
        *,
        what: str,
        since: int = 0,
        timeout: float = 30.0,
    ) -> Reconcile:
        """Until a reconcile of ``request`` by ``controller`` that started at or after ``since``
        with an ``observed`` cache for which ``check`` holds has finished; returns it."""

        def found() -> Reconcile:
            for r in self.finished:
                if (
                    r.controller == controller
                    and r.request == request
                    and r.started >= since
                    and check(r.observed)
                ):
                    return r
            seen = [r.observed for r in self.finished if r.controller == controller and r.request == request]
            raise AssertionError(f"reconciles of {request} so far observed {seen[-5:]}")

        return await eventually(
            found, timeout=timeout, message=f"the {controller} controller processed {what}"
        )

    async def trainjob_read(self, namespace: str, name: str, resource_version: str) -> Reconcile:
        """Until a TrainJob reconcile that read the TrainJob at ``resource_version`` or later finished."""
        rv = int(resource_version)
        return await self.processed(
            "trainjob",
            Request(namespace, name),
            lambda o: (o["trainjob"] or 0) >= rv,
            what=f"TrainJob {namespace}/{name} at resourceVersion {rv}",
        )


@dataclass
class TrainerEnv:
    """A running manager and a live client (field manager ``test``) for the test's own writes."""

    client: Client
    namespace: str
    manager: Manager
    controllers: Any
    # The webhook server's address and CA, for AdmissionReviews POSTed straight to it.
    webhook_url: str = ""
    webhook_ca: bytes = b""
    reconciles: Reconciles = field(default_factory=Reconciles)


def scoped_webhooks(namespace: str) -> Json:
    """The shipped configuration, namespaced webhooks limited to ``namespace``."""
    doc: Json = yaml.safe_load(WEBHOOKS.read_text())
    doc = copy.deepcopy(doc)
    for hook in doc["webhooks"]:
        if hook["name"] != "validator.clustertrainingruntime.trainer.kubeflow.org":
            hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    return doc


async def _webhooks_in_effect(client: Client, namespace: str) -> None:
    """Until the API server calls the webhooks just installed: its admission plugin sees a new
    configuration through its own informer, so a create right after the install can pass
    unchecked (seen once in CI when the previous test had just deleted the same-named one)."""
    bad_jobs = wrapper_rjobs()
    bad_jobs[0]["replicas"] = 2  # the TrainingRuntime validator refuses this

    async def denied() -> None:
        try:
            await client.create(runtime("webhook-probe", namespace, rjobs=bad_jobs), dry_run=True)
        except Forbidden:
            return
        raise AssertionError("the TrainingRuntime webhook is not called yet")

    await eventually(denied, timeout=30, interval=0.1)


@pytest.fixture
async def trainer(
    control_plane: Environment, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[TrainerEnv]:
    reconciles = Reconciles()
    reconciles.install(monkeypatch)
    ca = TinyCA("trainer-test-webhook-ca")
    ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        tmp_path / "tls.crt", tmp_path / "tls.key"
    )
    config = await load_kubeconfig(control_plane.kubeconfig)
    async with Cluster(config, field_owner="trainer", event_source="trainer-controller-manager") as cluster:
        mgr = Manager(cluster, Options(metrics_bind_address="0", health_probe_bind_address=""))
        server = WebhookServer(host="127.0.0.1", port=0, cert_dir=tmp_path)
        context = SetupContext(mgr, server)
        controllers = await trainer_setup.setup_controllers(context)
        assert await setup_trainer(context)
        mgr.add_webhook_server(server)
        task = asyncio.create_task(mgr.run())
        try:
            await eventually(lambda: server.bound_port is not None and mgr.elected.is_set(), timeout=60)
            hooks = tmp_path / "webhooks.yaml"
            hooks.write_text(yaml.safe_dump(scoped_webhooks(namespace)))
            assert server.bound_port is not None
            await control_plane.install_webhooks(
                [hooks], host="127.0.0.1", port=server.bound_port, ca_bundle=ca.cert_pem
            )
            client = Client(cluster.transport, cluster.mapper, field_owner="test")
            await _webhooks_in_effect(client, namespace)
            try:
                yield TrainerEnv(
                    client,
                    namespace,
                    mgr,
                    controllers,
                    webhook_url=f"https://127.0.0.1:{server.bound_port}",
                    webhook_ca=ca.cert_pem,
                    reconciles=reconciles,
                )
            finally:
                await control_plane.request("DELETE", VWC_PATH)
        finally:
            mgr.stop()
            await asyncio.wait_for(task, 60)
