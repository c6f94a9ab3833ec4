"""The whole engine on a real API server: the I/O half's Cluster (client, cache) under the
Manager, Builder and controllers.

* owner-based requeue: deleting or editing an owned ConfigMap reconciles its Widget, which puts
  the ConfigMap back;
* an update conflict (stale resourceVersion) is retried with backoff until it succeeds;
* two managers elect one leader on a real Lease; only the leader reconciles and the other takes
  over when the leader stops.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from manager import Builder, GroupVersionKind, Manager, Options, Request, Result
from manager.client.errors import NotFound
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.controller_util import set_controller_reference
from manager.envtest import Environment
from manager.metrics import REGISTRY
from manager.testing import eventually

WIDGET = GroupVersionKind("envtest.example.com", "v1", "Widget")
CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")


def widget(name: str, namespace: str, size: int) -> dict[str, Any]:
    return {
        "apiVersion": WIDGET.api_version,
        "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"size": size},
    }


class WidgetReconciler:
    """Keeps a ConfigMap ``<widget>-config`` with ``data.size`` = the widget's size."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.client = cluster.client
        self.namespace = namespace
        self.requests: list[Request] = []

    async def reconcile(self, req: Request) -> Result | None:
        if req.namespace != self.namespace:
            return None
        self.requests.append(req)
        try:
            owner = await self.client.get(WIDGET, req.name, req.namespace)
        except NotFound:
            return None
        desired: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{req.name}-config", "namespace": req.namespace},
            "data": {"size": str(owner["spec"]["size"])},
        }
        set_controller_reference(owner, desired)
        try:
            current = await self.client.get(CONFIGMAP, desired["metadata"]["name"], req.namespace)
        except NotFound:
            await self.client.create(desired)
            return None
        if current.get("data") != desired["data"]:
            current["data"] = desired["data"]
            await self.client.update(current)
        return None


@contextlib.asynccontextmanager
async def running_manager(control_plane: Environment, namespace: str, **opts: Any) -> AsyncIterator[Any]:
    config = await load_kubeconfig(control_plane.kubeconfig)
    async with Cluster(config, field_owner="fw-core-test") as cluster:
        options = Options(metrics_bind_address="0", **opts)
        mgr = Manager(cluster, options)
        reconciler = WidgetReconciler(cluster, namespace)
        yield mgr, cluster, reconciler
        # the caller started mgr.run(); make sure it is stopped before the session closes
        mgr.stop()


async def test_owned_object_changes_reconcile_the_owner(
    control_plane: Environment, widgets_crd: None, namespace: str
) -> None:  # docs/behaviour/framework.md A.8: owner-based requeue
    async with running_manager(control_plane, namespace) as (mgr, cluster, reconciler):
        Builder(mgr).for_(WIDGET).owns(CONFIGMAP).named("widget-live").complete(reconciler)
        task = asyncio.create_task(mgr.run())
        try:
            await asyncio.wait_for(mgr.elected.wait(), 60)
            await cluster.api_reader.create(widget("w1", namespace, 3))

            async def config_is(size: str) -> None:
                try:
                    cm = await cluster.api_reader.get(CONFIGMAP, "w1-config", namespace)
                except NotFound as err:
                    raise AssertionError(str(err)) from err
                assert cm["data"] == {"size": size}
                ref = cm["metadata"]["ownerReferences"][0]
                assert (ref["kind"], ref["name"], ref["controller"]) == ("Widget", "w1", True)

            await eventually(lambda: config_is("3"), timeout=30)

            before = len(reconciler.requests)
            await cluster.api_reader.delete_by_name(CONFIGMAP, "w1-config", namespace)
            await eventually(lambda: config_is("3"), timeout=30, message="deleted ConfigMap recreated")
            assert len(reconciler.requests) > before, "the delete of the owned object reconciled the owner"

            cm = await cluster.api_reader.get(CONFIGMAP, "w1-config", namespace)
            cm["data"] = {"size": "tampered"}
            await cluster.api_reader.update(cm)
            await eventually(lambda: config_is("3"), timeout=30, message="edited ConfigMap restored")
        finally:
            mgr.stop()
            await asyncio.wait_for(task, 30)


async def test_update_conflict_is_retried_to_success(
    control_plane: Environment, widgets_crd: None, namespace: str
) -> None:  # docs/behaviour/framework.md A.4: an update conflict is retried to success
    async with running_manager(control_plane, namespace) as (mgr, cluster, _):
        attempts = 0

        async def reconcile(req: Request) -> None:
            nonlocal attempts
            if req.namespace != namespace:
                return
            attempts += 1
            stale = await cluster.api_reader.get(WIDGET, req.name, req.namespace)
            if attempts == 1:  # someone else writes between our read and our write
                fresh = dict(stale, metadata=dict(stale["metadata"], labels={"other": "writer"}))
                await cluster.api_reader.update(fresh)
            stale["metadata"].setdefault("annotations", {})["reconciled"] = "yes"
            await cluster.api_reader.update(stale)  # 409 on the first attempt

        Builder(mgr).for_(WIDGET).named("widget-conflict").complete(reconcile)
        task = asyncio.create_task(mgr.run())
        try:
            await asyncio.wait_for(mgr.elected.wait(), 60)
            await cluster.api_reader.create(widget("w2", namespace, 2))

            async def annotated() -> None:
                w = await cluster.api_reader.get(WIDGET, "w2", namespace)
                assert (w["metadata"].get("annotations") or {}).get("reconciled") == "yes"

            await eventually(annotated, timeout=30)
            errors = REGISTRY.get_sample_value(
                "controller_runtime_reconcile_errors_total", {"controller": "widget-conflict"}
            )
            assert errors is not None and errors >= 1, (
                "the conflict surfaced as a reconcile error and was retried"
            )
            assert attempts >= 2
        finally:
            mgr.stop()
            await asyncio.wait_for(task, 30)


@pytest.mark.parametrize("release", [False, True])
async def test_two_managers_one_leader_then_failover(
    control_plane: Environment, widgets_crd: None, namespace: str, release: bool
) -> None:  # docs/behaviour/framework.md A.10: two managers with leader election
    timing = {"lease_duration": 4.0, "renew_deadline": 3.0, "retry_period": 1.0}
    election = {
        "leader_election": True,
        "leader_election_id": "widgets-leader",
        "leader_election_namespace": namespace,
        "leader_election_release_on_cancel": release,
        **timing,
    }
    async with (
        running_manager(control_plane, namespace, identity="one", **election) as (a, _, rec_a),
        running_manager(control_plane, namespace, identity="two", **election) as (b, cluster, rec_b),
    ):
        Builder(a).for_(WIDGET).named(f"widget-a-{release}").complete(rec_a)
        Builder(b).for_(WIDGET).named(f"widget-b-{release}").complete(rec_b)
        task_a = asyncio.create_task(a.run())
        await asyncio.wait_for(a.elected.wait(), 60)
        task_b = asyncio.create_task(b.run())
        try:
            await cluster.api_reader.create(widget("w3", namespace, 1))
            await eventually(lambda: Request(namespace, "w3") in rec_a.requests, timeout=30)

            def b_saw_a_lead() -> None:  # b tried for the lease and found it held
                assert b.elector is not None and a.elector is not None
                assert b.elector.leader() == a.elector.identity, b.elector.leader()

            await eventually(b_saw_a_lead, timeout=30, message="b observed a's lease")
            assert not b.elected.is_set() and rec_b.requests == [], "only the leader reconciles"

            a.stop()
            await asyncio.wait_for(task_a, 30)
            await asyncio.wait_for(b.elected.wait(), 30)
            await eventually(lambda: Request(namespace, "w3") in rec_b.requests, timeout=30)
        finally:
            b.stop()
            await asyncio.wait_for(task_b, 30)
