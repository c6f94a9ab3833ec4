"""Informers over the union of several label selectors, per-kind compact stores, projections
(memory in proportion to the objects the controllers read)."""

from __future__ import annotations

from typing import Any

import pytest

from manager.cache.cache import ByObject, Cache, CacheOptions
from manager.cache.informer import SharedInformer
from manager.cache.store import Store, field_index_func
from manager.cache.transform import by_predicate, project
from manager.client import Client
from manager.client.restmapper import RESTMapping
from manager.scheme import GroupVersionKind

GVK = GroupVersionKind("", "v1", "Pod")
MAPPING = RESTMapping(GVK, "pods", True)


def pod(name: str, rv: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Running"},
    }


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_add(self, o: dict[str, Any], initial: bool) -> None:
        self.events.append(("add", o["metadata"]["name"]))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.events.append(("update", new["metadata"]["name"]))

    def on_delete(self, o: dict[str, Any]) -> None:
        self.events.append(("delete", o["metadata"]["name"]))


def union_informer() -> SharedInformer:
    return SharedInformer(Client(None, None), MAPPING, label_selectors=["a", "b"])  # type: ignore[arg-type]


def test_union_of_selectors_syncs_once_every_selector_listed() -> None:
    informer = union_informer()
    assert [r.options.label_selector for r in informer.reflectors] == ["a", "b"]
    informer.replace([pod("x", "1", a="1"), pod("both", "1", a="1", b="1")], None, True, 0)
    assert not informer.has_synced()
    informer.replace([pod("y", "1", b="1"), pod("both", "1", a="1", b="1")], None, True, 1)
    assert informer.has_synced()
    assert sorted(informer.store.keys()) == ["ns/both", "ns/x", "ns/y"]


def test_object_in_two_selectors_stays_until_both_let_it_go() -> None:
    informer = union_informer()
    rec = Recorder()
    informer.add_event_handler(rec)
    informer.replace([pod("both", "1", a="1", b="1")], None, True, 0)
    informer.replace([pod("both", "1", a="1", b="1")], None, True, 1)
    rec.events.clear()
    # label a removed: selector a's watch says DELETED (with the old state), b still holds it
    informer.remove(pod("both", "2", a="1", b="1"), 0)
    assert rec.events == [] and "ns/both" in informer.store
    informer.upsert(pod("both", "2", b="1"), 1)
    assert rec.events == [("update", "both")]
    # an older state from the other watch arriving late does not overwrite the newer one
    informer.upsert(pod("both", "1", a="1", b="1"), 0)
    stored = informer.store.get("ns/both")
    assert stored is not None and stored["metadata"]["resourceVersion"] == "2"
    informer.remove(pod("both", "3", b="1"), 1)
    informer.remove(pod("both", "3", b="1"), 0)
    assert rec.events[-1] == ("delete", "both") and "ns/both" not in informer.store


def test_relist_of_one_selector_drops_only_what_it_alone_held() -> None:
    informer = union_informer()
    rec = Recorder()
    informer.add_event_handler(rec)
    informer.replace([pod("x", "1", a="1"), pod("both", "1", a="1", b="1")], None, True, 0)
    informer.replace([pod("both", "1", a="1", b="1")], None, True, 1)
    rec.events.clear()
    informer.replace([], None, False, 0)  # selector a now matches nothing
    assert rec.events == [("delete", "x")]
    assert informer.store.keys() == ["ns/both"]


def test_one_selector_and_selectors_are_exclusive() -> None:
    with pytest.raises(ValueError, match="not both"):
        SharedInformer(Client(None, None), MAPPING, label_selector="a", label_selectors=["b"])  # type: ignore[arg-type]


def test_narrow_index_keeps_nothing_for_objects_outside_it() -> None:
    store = Store()
    store.add_index(
        "field:g", field_index_func(lambda o: [v] if (v := o["metadata"]["labels"].get("g")) else [])
    )
    for i in range(100):
        store.put(pod(f"p{i}", "1"))
    store.put(pod("member", "1", g="x"))
    assert len(store._keys_of["field:g"]) == 1
    assert [o["metadata"]["name"] for o in store.by_index("field:g", "ns/x")] == ["member"]
    store.put(pod("member", "2"))  # leaves the index
    assert store.by_index("field:g", "ns/x") == [] and not store._keys_of["field:g"]


def test_project_keeps_named_fields_in_lists_and_by_predicate_chooses() -> None:
    slim = project({"metadata": {"name": True}, "spec": {"containers": {"resources": {"requests": True}}}})
    full = pod("p", "1", keep="yes")
    assert slim(full) == {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]},
    }
    choose = by_predicate(lambda o: "keep" in o["metadata"]["labels"], lambda o: o, slim)
    assert choose(full) is full
    assert "status" not in choose(pod("q", "1"))


async def test_per_kind_compact_store_and_selectors_reach_the_informer() -> None:
    class Mapper:
        async def mapping(self, gvk: GroupVersionKind) -> RESTMapping:
            return MAPPING

    client = Client(None, Mapper())  # type: ignore[arg-type]
    options = CacheOptions(by_object={GVK: ByObject(label_selectors=["a", "b"], compact=True)})
    cache = Cache(client, options)
    informer = await cache.get_informer(GVK)
    assert informer.store.compact
    assert [r.options.label_selector for r in informer.reflectors] == ["a", "b"]
    other = Cache(client, CacheOptions(by_object={GVK: ByObject(label_selector="a")}))
    plain = await other.get_informer(GVK)
    assert not plain.store.compact and [r.options.label_selector for r in plain.reflectors] == ["a"]


async def test_a_list_is_transformed_page_by_page_and_once() -> None:
    calls: list[str] = []

    def slim(o: dict[str, Any]) -> dict[str, Any]:
        calls.append(o["metadata"]["name"])
        return {"metadata": {k: o["metadata"][k] for k in ("name", "namespace", "resourceVersion")}}

    class Pages:
        """list_raw as the client pages it: the transform sees each item as its page arrives."""

        async def list_raw(self, gvk: GroupVersionKind, **kw: Any) -> tuple[list[dict[str, Any]], str]:
            transform = kw["transform"]
            out = []
            for page in ([pod("a", "1"), pod("b", "1")], [pod("c", "1")]):
                out += [transform(p) for p in page]
                assert all("spec" not in o for o in out)  # nothing whole is kept between pages
            return out, "7"

    informer = SharedInformer(Client(None, None), MAPPING, transform=slim)  # type: ignore[arg-type]
    reflector = informer.reflectors[0]
    reflector.client = Pages()  # type: ignore[assignment]
    await reflector._list(None)
    assert calls == ["a", "b", "c"]  # once each: replace does not transform again
    assert informer.has_synced() and sorted(informer.store.keys()) == ["ns/a", "ns/b", "ns/c"]
    assert reflector.last_resource_version == "7"


async def test_a_compact_informer_holds_a_list_as_stored_bytes_until_it_is_complete() -> None:
    held: list[Any] = []

    class Pages:
        async def list_raw(self, gvk: GroupVersionKind, **kw: Any) -> tuple[list[Any], str]:
            transform = kw["transform"]
            out = [transform(p) for p in (pod("a", "1"), pod("b", "2"))]
            held.extend(out)
            return out, "9"

    def slim(o: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": {k: o["metadata"][k] for k in ("name", "namespace", "resourceVersion")}}

    seen: list[tuple[str, bool]] = []

    class Handler:
        def on_add(self, obj: dict[str, Any], initial: bool) -> None:
            seen.append((obj["metadata"]["name"], initial))

        def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
            seen.append(("update " + new["metadata"]["name"], False))

        def on_delete(self, obj: dict[str, Any]) -> None:
            seen.append(("delete " + obj["metadata"]["name"], False))

    informer = SharedInformer(Client(None, None), MAPPING, transform=slim, compact_store=True)  # type: ignore[arg-type]
    informer.add_event_handler(Handler())
    reflector = informer.reflectors[0]
    reflector.client = Pages()  # type: ignore[assignment]
    await reflector._list(None)
    # what the list kept between pages is what the store keeps: bytes, not dicts
    assert all(isinstance(item, bytes) for item in held)
    assert seen == [("a", True), ("b", True)]
    assert informer.store.get("ns/b") == {
        "metadata": {"name": "b", "namespace": "ns", "resourceVersion": "2"}
    }
    # a relist with a changed and a vanished object diffs against the store as before
    informer.replace([informer.prepare_listed(pod("b", "3"))], None, False, prepared=True)
    assert seen[2:] == [("update b", False), ("delete a", False)]
    # a dict store keeps the transformed dicts
    plain = SharedInformer(Client(None, None), MAPPING, transform=slim)  # type: ignore[arg-type]
    assert plain.prepare_listed(pod("a", "1")) == {
        "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "1"}
    }
