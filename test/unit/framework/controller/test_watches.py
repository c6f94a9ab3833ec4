"""What reaches the reconciler: owner-based requeue, map functions, predicates and the builder's rules."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest

from manager.controller import (
    Builder,
    ChannelSource,
    Request,
    and_,
    annotations_changed,
    enqueue_for_owner,
    enqueue_from_map,
    generation_changed,
    label_selector,
    labels_changed,
    not_,
    or_,
    resource_version_changed,
)
from manager.controller.event import CreateEvent, DeleteEvent, UpdateEvent
from manager.controller.predicate import new_predicate_funcs
from manager.scheme import GroupVersionKind
from manager.testing.clock import FakeClock

WIDGET = GroupVersionKind("example.com", "v1", "Widget")
DEPLOYMENT = GroupVersionKind("apps", "v1", "Deployment")
CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")


class Cluster:
    """A model class of a cluster-scoped kind (no namespace on its requests)."""

    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Cluster"
    namespaced: ClassVar[bool] = False


def obj(name: str, namespace: str = "ns", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, **meta}}


def owner_ref(
    kind: str, name: str, api_version: str = "example.com/v1", controller: bool = True
) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": f"uid-{name}",
        "controller": controller,
    }


class Calls:
    def __init__(self) -> None:
        self.requests: list[Request] = []

    async def reconcile(self, req: Request) -> None:
        self.requests.append(req)

    def take(self) -> list[Request]:
        out, self.requests = self.requests, []
        return out


async def test_owned_object_changes_reconcile_the_owner(
    mgr: Any, name: str, clock: FakeClock, running: Any
) -> None:
    calls = Calls()
    ctrl = Builder(mgr).for_(WIDGET).owns(DEPLOYMENT).named(name).with_options(clock=clock).complete(calls)
    deployments = mgr.informers.informer(DEPLOYMENT)
    async with running(ctrl):
        deployments.create(obj("w1-workers", ownerReferences=[owner_ref("Widget", "w1")]))
        await clock.advance(0)
        assert calls.take() == [Request("ns", "w1")], "create of an owned object"
        deployments.update(obj("w1-workers", ownerReferences=[owner_ref("Widget", "w1")], labels={"a": "b"}))
        await clock.advance(0)
        assert calls.take() == [Request("ns", "w1")], "update of an owned object"
        deployments.delete(obj("w1-workers"))
        await clock.advance(0)
        assert calls.take() == [Request("ns", "w1")], "delete of an owned object"

        # references that are not the controller, or of another kind/group, are ignored
        deployments.create(obj("x", ownerReferences=[owner_ref("Widget", "w2", controller=False)]))
        deployments.create(obj("y", ownerReferences=[owner_ref("Gadget", "g")]))
        deployments.create(obj("z", ownerReferences=[owner_ref("Widget", "w3", api_version="other.io/v1")]))
        await clock.advance(0)
        assert calls.take() == []


async def test_owner_change_on_update_reconciles_old_and_new_owner(
    mgr: Any, name: str, clock: FakeClock, running: Any
) -> None:
    calls = Calls()
    ctrl = Builder(mgr).for_(WIDGET).owns(DEPLOYMENT).named(name).with_options(clock=clock).complete(calls)
    deployments = mgr.informers.informer(DEPLOYMENT)
    deployments.create(
        obj("d", ownerReferences=[owner_ref("Widget", "old", api_version="example.com/v1beta1")])
    )
    async with running(ctrl):
        await clock.advance(0)
        assert calls.take() == [Request("ns", "old")], "initial list, any version of the owner's group"
        deployments.update(obj("d", ownerReferences=[owner_ref("Widget", "new")]))
        await clock.advance(0)
        assert sorted(calls.take(), key=str) == [Request("ns", "new"), Request("ns", "old")]


def test_cluster_scoped_owner_gets_no_namespace() -> None:
    handler = enqueue_for_owner(Cluster)
    added: list[Request] = []

    class Q:
        def add(self, item: Request) -> None:
            added.append(item)

    handler.create(CreateEvent(obj("cm", ownerReferences=[owner_ref("Cluster", "prod")])), Q())
    assert added == [Request("", "prod")]


def test_match_every_owner() -> None:
    handler = enqueue_for_owner(WIDGET, only_controller=False)
    added: list[Request] = []

    class Q:
        def add(self, item: Request) -> None:
            added.append(item)

    refs = [owner_ref("Widget", "a", controller=False), owner_ref("Widget", "b"), owner_ref("Widget", "b")]
    handler.delete(DeleteEvent(obj("cm", ownerReferences=refs)), Q())
    assert added == [Request("ns", "a"), Request("ns", "b")], "every owner once"


def test_each_event_maps_its_object_once_and_adds_each_request_once() -> None:
    from manager.controller import enqueue_for_object
    from manager.controller.event import GenericEvent
    from manager.scheme import ObjectKey

    added: list[Request] = []

    class Q:
        def add(self, item: Request) -> None:
            added.append(item)

    mapped: list[str] = []

    def users_of(o: dict[str, Any]) -> list[Request | ObjectKey]:
        mapped.append(o["metadata"]["name"])
        return [ObjectKey("ns", "a"), Request("ns", "a"), Request("ns", "b")]

    by_map = enqueue_from_map(users_of)
    by_map.create(CreateEvent(obj("cm")), Q())
    by_map.generic(GenericEvent(obj("cm")), Q())
    assert mapped == ["cm", "cm"], "the map function runs once per event"
    assert added == [Request("ns", "a"), Request("ns", "b")] * 2, "each request once per event"

    added.clear()
    itself = enqueue_for_object()
    itself.create(CreateEvent(obj("w")), Q())
    itself.update(UpdateEvent(obj("w"), obj("w")), Q())
    itself.delete(DeleteEvent(obj("w")), Q())
    itself.generic(GenericEvent(obj("w", namespace="")), Q())
    assert added == [Request("ns", "w")] * 3 + [Request("", "w")]


async def test_watches_with_map_function(mgr: Any, name: str, clock: FakeClock, running: Any) -> None:
    calls = Calls()

    def users_of(config: dict[str, Any]) -> list[Request]:
        return [Request(config["metadata"]["namespace"], w) for w in config["metadata"].get("labels", {})]

    ctrl = (
        Builder(mgr)
        .for_(WIDGET)
        .watches(CONFIGMAP, enqueue_from_map(users_of))
        .named(name)
        .with_options(clock=clock)
        .complete(calls)
    )
    async with running(ctrl):
        mgr.informers.informer(CONFIGMAP).create(obj("cfg", labels={"w1": "", "w2": ""}))
        await clock.advance(0)
        assert sorted(calls.take(), key=str) == [Request("ns", "w1"), Request("ns", "w2")]


async def test_generation_changed_drops_status_only_updates(
    mgr: Any, name: str, clock: FakeClock, running: Any
) -> None:
    calls = Calls()
    ctrl = (
        Builder(mgr)
        .for_(WIDGET, predicates=[generation_changed()])
        .named(name)
        .with_options(clock=clock)
        .complete(calls)
    )
    widgets = mgr.informers.informer(WIDGET)
    async with running(ctrl):
        widgets.create(obj("w", generation=1))
        await clock.advance(0)
        assert calls.take() == [Request("ns", "w")]
        widgets.update({**obj("w", generation=1), "status": {"phase": "Running"}})
        await clock.advance(0)
        assert calls.take() == [], "status write without generation bump"
        widgets.update({**obj("w", generation=2), "spec": {"replicas": 3}})
        await clock.advance(0)
        assert calls.take() == [Request("ns", "w")]


async def test_event_filter_applies_to_every_watch(
    mgr: Any, name: str, clock: FakeClock, running: Any
) -> None:
    calls = Calls()
    ctrl = (
        Builder(mgr)
        .for_(WIDGET)
        .owns(DEPLOYMENT)
        .with_event_filter(label_selector({"team": "ml"}))
        .named(name)
        .with_options(clock=clock)
        .complete(calls)
    )
    async with running(ctrl):
        mgr.informers.informer(WIDGET).create(obj("mine", labels={"team": "ml"}))
        mgr.informers.informer(WIDGET).create(obj("theirs", labels={"team": "web"}))
        mgr.informers.informer(DEPLOYMENT).create(obj("d", ownerReferences=[owner_ref("Widget", "theirs")]))
        await clock.advance(0)
        assert calls.take() == [Request("ns", "mine")]


async def test_channel_source_triggers_reconciles(
    mgr: Any, name: str, clock: FakeClock, running: Any
) -> None:
    calls = Calls()
    channel: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    from manager.controller import enqueue_for_object

    ctrl = (
        Builder(mgr)
        .watches_raw_source(ChannelSource(channel, enqueue_for_object()))
        .named(name)
        .with_options(clock=clock)
        .complete(calls)
    )
    async with running(ctrl):
        channel.put_nowait(obj("external", namespace="ext"))
        await clock.advance(0)
        assert calls.take() == [Request("ext", "external")]


def upd(old: dict[str, Any], new: dict[str, Any]) -> UpdateEvent:
    return UpdateEvent(old, new)


def test_change_predicates_only_filter_updates() -> None:
    a = obj("a", resourceVersion="1", labels={"x": "1"}, annotations={"n": "1"}, generation=1)
    same = obj("a", resourceVersion="1", labels={"x": "1"}, annotations={"n": "1"}, generation=1)
    bumped = obj("a", resourceVersion="2", labels={"x": "2"}, annotations={"n": "2"}, generation=2)
    for predicate in (
        generation_changed(),
        resource_version_changed(),
        labels_changed(),
        annotations_changed(),
    ):
        assert predicate.create(CreateEvent(a))
        assert predicate.delete(DeleteEvent(a))
        assert not predicate.update(upd(a, same))
        assert predicate.update(upd(a, bumped))
    assert not labels_changed().update(upd(obj("a"), obj("a", labels={})))  # missing == empty


def test_label_selector_expressions() -> None:
    selector = label_selector(
        {
            "matchLabels": {"app": "train"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["gpu", "tpu"]},
                {"key": "skip", "operator": "DoesNotExist"},
            ],
        }
    )
    assert selector.create(CreateEvent(obj("a", labels={"app": "train", "tier": "gpu"})))
    assert not selector.create(CreateEvent(obj("a", labels={"app": "train", "tier": "cpu"})))
    assert not selector.create(CreateEvent(obj("a", labels={"app": "train", "tier": "gpu", "skip": ""})))
    assert selector.update(upd(obj("a"), obj("a", labels={"app": "train", "tier": "tpu"}))), (
        "new object decides"
    )
    with pytest.raises(ValueError, match="operator"):
        label_selector({"matchExpressions": [{"key": "k", "operator": "Near"}]})


def test_combinators() -> None:
    yes = new_predicate_funcs(lambda o: True)
    no = new_predicate_funcs(lambda o: False)
    e = CreateEvent(obj("a"))
    assert and_(yes, yes).create(e) and not and_(yes, no).create(e)
    assert or_(no, yes).create(e) and not or_(no, no).create(e)
    assert not_(no).create(e) and not not_(yes).create(e)


def test_builder_rules(mgr: Any) -> None:
    async def r(req: Request) -> None:
        return None

    with pytest.raises(ValueError, match="requires for_"):
        Builder(mgr).owns(DEPLOYMENT).named("x").complete(r)
    with pytest.raises(ValueError, match="no watches"):
        Builder(mgr).named("x").complete(r)
    ctrl = Builder(mgr).for_(WIDGET).complete(r)
    assert ctrl.name == "widget", "default name is the lowercase kind"
    assert mgr.runnables == [ctrl]
    assert ctrl.needs_leader_election
    with pytest.raises(ValueError, match="already exists"):
        Builder(mgr).for_(WIDGET).complete(r)
    other = Builder(mgr).for_(WIDGET).named("widget-2").with_options(need_leader_election=False).build(r)
    assert not other.needs_leader_election


async def test_async_map_function_reads_before_enqueueing(
    mgr: Any, name: str, clock: FakeClock, running: Any
) -> None:
    from manager.controller import enqueue_from_async_map
    from manager.scheme import ObjectKey

    calls = Calls()
    seen: list[str] = []

    async def dependants(config: dict[str, Any]) -> list[ObjectKey]:
        await asyncio.sleep(0)  # e.g. a cache list
        seen.append(config["metadata"]["name"])
        if config["metadata"].get("labels", {}).get("broken"):
            raise RuntimeError("index missing")
        return [ObjectKey(config["metadata"]["namespace"], w) for w in config["metadata"].get("labels", {})]

    ctrl = (
        Builder(mgr)
        .for_(WIDGET)
        .watches(CONFIGMAP, enqueue_from_async_map(dependants, map_old_on_update=False))
        .named(name)
        .with_options(clock=clock)
        .complete(calls)
    )
    configs = mgr.informers.informer(CONFIGMAP)
    async with running(ctrl):
        configs.create(obj("bad", labels={"broken": "1"}))
        configs.create(obj("cfg", labels={"w1": ""}))
        await clock.advance(0)
        assert calls.take() == [Request("ns", "w1")], "a failing map is skipped, later events still map"
        configs.update(obj("cfg", labels={"w2": ""}))
        await clock.advance(0)
        assert calls.take() == [Request("ns", "w2")], "only the new object is mapped when asked"
    assert seen == ["bad", "cfg", "cfg"]
