"""Store indexes, informer diffing on relist, handler isolation, backoff, and the reflector's
inactivity guard against a stalled watch (an in-process fake API server)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from local_http import open_watch, serving_client

from manager.cache.backoff import ReflectorBackoff
from manager.cache.informer import SharedInformer
from manager.cache.store import Store, field_index_func
from manager.client import Client
from manager.client.restmapper import RESTMapping
from manager.scheme import GroupVersionKind
from manager.testing.eventually import eventually

GVK = GroupVersionKind("example.com", "v1", "Widget")
MAPPING = RESTMapping(GVK, "widgets", True)


def obj(name: str, rv: str, ns: str = "ns", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {
            "name": name,
            "namespace": ns,
            "resourceVersion": rv,
            "labels": labels,
            "managedFields": [{"manager": "x"}],
        },
        "spec": {"owner": labels.get("owner", "")},
    }


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_add(self, o: dict[str, Any], initial: bool) -> None:
        self.events.append(("add-initial" if initial else "add", o["metadata"]["name"]))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.events.append(("update", new["metadata"]["name"]))

    def on_delete(self, o: dict[str, Any]) -> None:
        self.events.append(("delete", o["metadata"]["name"]))


class Exploding(Recorder):
    def on_add(self, o: dict[str, Any], initial: bool) -> None:
        raise RuntimeError("handler bug")


@pytest.mark.parametrize("compact", [False, True])
def test_store_indexes_follow_updates_and_deletes(compact: bool) -> None:
    store = Store(compact=compact)
    store.add_index("field:spec.owner", field_index_func(lambda o: [o["spec"]["owner"]]))
    store.put(obj("a", "1", owner="x"))
    store.put(obj("b", "1", ns="other", owner="x"))
    assert {o["metadata"]["name"] for o in store.by_index("field:spec.owner", "__all_namespaces/x")} == {
        "a",
        "b",
    }
    assert [o["metadata"]["name"] for o in store.by_index("field:spec.owner", "ns/x")] == ["a"]
    store.put(obj("a", "2", owner="y"))
    assert [o["metadata"]["name"] for o in store.by_index("field:spec.owner", "ns/x")] == []
    assert [o["metadata"]["name"] for o in store.by_index("field:spec.owner", "ns/y")] == ["a"]
    store.delete("other/b")
    assert store.by_index("field:spec.owner", "__all_namespaces/x") == []
    assert store.keys_in_namespace("ns") == {"ns/a"}
    with pytest.raises(ValueError):
        store.add_index("field:spec.owner", field_index_func(lambda o: []))
    # an index added late covers what is already stored
    store.add_index("byname", lambda o: [o["metadata"]["name"]])
    assert len(store.by_index("byname", "a")) == 1


@pytest.mark.parametrize("compact", [False, True])
def test_relist_synthesises_deletes_and_updates_only_for_changes(compact: bool) -> None:
    informer = SharedInformer(Client(None, None), MAPPING, compact_store=compact)  # type: ignore[arg-type]
    rec = Recorder()
    bad = Exploding()
    informer.add_event_handler(bad)
    informer.add_event_handler(rec)
    informer.replace([obj("keep", "1"), obj("change", "1"), obj("gone", "1")], None, True)
    assert informer.has_synced()
    assert rec.events == [("add-initial", "keep"), ("add-initial", "change"), ("add-initial", "gone")]
    assert "managedFields" not in informer.store.get("ns/keep")["metadata"]  # type: ignore[index]
    rec.events.clear()
    informer.replace([obj("keep", "1"), obj("change", "2"), obj("new", "3")], None, False)
    assert sorted(rec.events) == [("add", "new"), ("delete", "gone"), ("update", "change")]
    late = Recorder()
    informer.add_event_handler(late)
    assert sorted(late.events) == [("add-initial", "change"), ("add-initial", "keep"), ("add-initial", "new")]
    stored = informer.store.get("ns/change")
    assert stored is not None and stored["metadata"]["resourceVersion"] == "2"
    stored["metadata"]["resourceVersion"] = "mutated"
    # a compact store hands out copies; a dict store shares (callers copy, see Cache._out)
    again = informer.store.get("ns/change")
    assert again is not None
    assert (again["metadata"]["resourceVersion"] == "2") is compact


def test_compact_store_uses_less_memory_than_dicts() -> None:
    import tracemalloc

    def measure(compact: bool) -> int:
        tracemalloc.start()
        store = Store(compact=compact)
        before = tracemalloc.get_traced_memory()[0]
        for i in range(500):
            store.put(obj(f"o{i}", str(i), owner="x"))
        used = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        return used

    assert measure(True) * 2 < measure(False)


def test_relist_of_one_namespace_leaves_the_others_alone() -> None:
    informer = SharedInformer(Client(None, None), MAPPING, namespaces=["a", "b"])  # type: ignore[arg-type]
    rec = Recorder()
    informer.add_event_handler(rec)
    informer.replace([obj("x", "1", ns="a")], "a", True, 0)
    assert not informer.has_synced()  # namespace b has not listed yet
    informer.replace([obj("y", "1", ns="b")], "b", True, 1)
    assert informer.has_synced()
    rec.events.clear()
    informer.replace([], "a", False, 0)
    assert rec.events == [("delete", "x")]
    assert informer.store.keys() == ["b/y"]


def test_backoff_grows_with_jitter_caps_and_resets() -> None:
    now = [0.0]
    b = ReflectorBackoff(clock=lambda: now[0], rand=lambda: 0.5)
    waits = [b.next() for _ in range(8)]
    assert waits[0] == pytest.approx(0.8 * 1.5)
    assert waits[1] == pytest.approx(1.6 * 1.5)
    assert max(waits) == pytest.approx(30 * 1.5)
    now[0] = 1000  # quiet for longer than reset_after
    assert b.next() == pytest.approx(0.8 * 1.5)


class StallingServer:
    """Serves one object (its LIST or a watch-list's initial events), then watches that send nothing
    and never end."""

    def __init__(self) -> None:
        self.watches = 0
        self.lists = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") == "true":
            self.watches += 1
            if request.query.get("sendInitialEvents") == "true":
                self.lists += 1  # the whole state, read as a watch-list
            resp = await open_watch(request, [obj("first", "10")], "10")
            if self.watches == 2:
                event = b'{"type":"ADDED","object":{"metadata":{"name":"late","namespace":"ns","resourceVersion":"11"}}}\n'
                await resp.write(event)
            await asyncio.sleep(3600)
            return resp
        self.lists += 1
        return web.json_response({"items": [obj("first", "10")], "metadata": {"resourceVersion": "10"}})


@pytest.fixture
async def stalling() -> AsyncIterator[tuple[StallingServer, Client]]:
    fake = StallingServer()
    async with serving_client(fake.handle, MAPPING) as client:
        yield fake, client


async def test_inactivity_guard_reconnects_a_silent_watch(stalling: tuple[StallingServer, Client]) -> None:
    fake, client = stalling
    informer = SharedInformer(client, MAPPING, inactivity_timeout=0.2)
    rec = Recorder()
    informer.add_event_handler(rec)
    task = asyncio.create_task(informer.run())
    try:
        await eventually(lambda: fake.watches >= 3, timeout=10, interval=0.05)
        assert ("add", "late") in rec.events
        assert fake.lists == 1  # reconnected from the last resourceVersion, no relist
        assert informer.reflectors[0].last_resource_version == "11"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_watch_timeouts_are_spread_over_five_to_ten_minutes() -> None:
    from manager.cache.reflector import Reflector

    informer = SharedInformer(Client(None, None), MAPPING)  # type: ignore[arg-type]
    reflector: Reflector = informer.reflectors[0]
    timeouts = {reflector._watch_timeout() for _ in range(500)}
    assert min(timeouts) >= 300 and max(timeouts) < 600
    assert len(timeouts) > 100  # jittered, not one value
