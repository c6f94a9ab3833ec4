"""FakeClient semantics that reconciler unit tests rely on."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, ConfigDict

from manager.client import AlreadyExists, BadRequest, Conflict, NotFound, Patch, Preconditions
from manager.scheme import GroupVersionKind
from manager.testing.fake import FakeClient

WIDGET = GroupVersionKind("example.com", "v1", "Widget")


def widget(name: str, ns: str = "default", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"size": 1},
    }


class Meta(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    namespace: str = ""


class Widget(BaseModel):
    model_config = ConfigDict(extra="allow")
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Widget"
    metadata: Meta
    spec: dict[str, Any] = {}


async def test_seeded_objects_and_resource_versions() -> None:
    c = FakeClient([widget("seed")])
    seed = await c.get(WIDGET, "seed", "default")
    assert seed["metadata"]["resourceVersion"] == "999"
    created = await c.create(widget("new"))
    rv1 = created["metadata"]["resourceVersion"]
    created["spec"]["size"] = 2
    updated = await c.update(created)
    assert int(updated["metadata"]["resourceVersion"]) > int(rv1)
    assert updated["metadata"]["generation"] == 2
    # metadata-only change: no generation bump
    updated["metadata"]["labels"] = {"x": "y"}
    relabelled = await c.update(updated)
    assert relabelled["metadata"]["generation"] == 2


async def test_conflicts_and_errors() -> None:
    c = FakeClient()
    first = await c.create(widget("w"))
    with pytest.raises(AlreadyExists):
        await c.create(widget("w"))
    second = await c.update(dict(first, spec={"size": 3}))
    with pytest.raises(Conflict):
        await c.update(dict(first, spec={"size": 4}))  # stale resourceVersion
    with pytest.raises(BadRequest):
        await c.create(
            dict(widget("x"), metadata={"name": "x", "namespace": "default", "resourceVersion": "5"})
        )
    with pytest.raises(NotFound):
        await c.get(WIDGET, "missing", "default")
    with pytest.raises(Conflict):
        await c.delete(second, preconditions=Preconditions(resource_version="1"))
    await c.delete(second, preconditions=Preconditions(uid=second["metadata"]["uid"]))
    with pytest.raises(NotFound):
        await c.delete(second)


async def test_status_subresource_is_separate() -> None:
    c = FakeClient(status_subresource=[WIDGET])
    created = await c.create({**widget("w"), "status": {"phase": "ignored on create"}})
    assert "status" not in created
    created["status"] = {"phase": "Running"}
    after_update = await c.update(created)
    assert "status" not in after_update  # update does not write status
    after_update["status"] = {"phase": "Running"}
    after_status = await c.status.update(after_update)
    assert after_status["status"] == {"phase": "Running"}
    after_status["spec"] = {"size": 9}
    after_status["status"] = {"phase": "Done"}
    only_status = await c.status.update(after_status)
    assert only_status["spec"] == {"size": 1} and only_status["status"] == {"phase": "Done"}
    patched = await c.status.patch(only_status, Patch.merge({"status": {"reason": "x"}}))
    assert patched["status"] == {"phase": "Done", "reason": "x"}
    plain = FakeClient()
    await plain.create(widget("w"))
    with pytest.raises(NotFound):
        await plain.status.update(widget("w"))


async def test_finalizers_hold_deletion_until_removed() -> None:
    c = FakeClient()
    obj = widget("f")
    obj["metadata"]["finalizers"] = ["example.com/cleanup"]
    created = await c.create(obj)
    await c.delete(created)
    pending = await c.get(WIDGET, "f", "default")
    assert pending["metadata"]["deletionTimestamp"]
    pending["metadata"]["finalizers"] = []
    await c.update(pending)
    with pytest.raises(NotFound):
        await c.get(WIDGET, "f", "default")


async def test_lists_with_label_and_field_selectors_and_request_counter() -> None:
    c = FakeClient([widget("a", tier="web"), widget("b", tier="db"), widget("c", "other", tier="web")])
    c.add_index(WIDGET, "spec.size", lambda o: [str(o["spec"]["size"])])
    names = lambda items: [i["metadata"]["name"] for i in items]  # noqa: E731
    assert names(await c.list(WIDGET, namespace="default")) == ["a", "b"]
    assert names(await c.list(WIDGET, label_selector="tier=web")) == ["a", "c"]
    assert names(await c.list(WIDGET, label_selector="tier notin (web)")) == ["b"]
    assert names(await c.list(WIDGET, field_selector={"spec.size": "1", "metadata.namespace": "other"})) == [
        "c"
    ]
    with pytest.raises(BadRequest):
        await c.list(WIDGET, field_selector={"spec.color": "red"})
    assert c.writes == 0
    assert c.requests["list"] == 5
    await c.create(widget("d"))
    assert c.writes == 1


async def test_typed_models_round_trip_and_patches() -> None:
    c = FakeClient()
    created = await c.create(Widget(metadata=Meta(name="m", namespace="default"), spec={"size": 2}))
    assert isinstance(created, Widget)
    assert created.metadata.model_extra and created.metadata.model_extra["resourceVersion"]
    fetched = await c.get(Widget, "m", "default")
    assert isinstance(fetched, Widget) and fetched.spec == {"size": 2}
    jp = await c.patch(fetched, Patch.json([{"op": "add", "path": "/spec/color", "value": "blue"}]))
    assert jp.spec == {"size": 2, "color": "blue"}
    mp = await c.patch(jp, Patch.merge({"spec": {"color": None}}))
    assert mp.spec == {"size": 2}
    applied = await c.apply(widget("ssa"), field_owner="me")
    assert applied["metadata"]["resourceVersion"]
    reapplied = await c.apply({**widget("ssa"), "spec": {"size": 5}}, field_owner="me")
    assert reapplied["spec"] == {"size": 5}


async def test_inject_error() -> None:
    c = FakeClient([widget("w")])
    c.inject_error("get", Conflict("boom", code=409), times=1)
    with pytest.raises(Conflict):
        await c.get(WIDGET, "w", "default")
    assert (await c.get(WIDGET, "w", "default"))["metadata"]["name"] == "w"


class Recording:
    """A ``ResourceEventHandler`` that writes down what it is called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def on_add(self, obj: dict[str, Any], is_in_initial_list: bool) -> None:
        self.calls.append(("add", obj["metadata"]["name"], str(is_in_initial_list)))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.calls.append(
            (
                "update",
                new["metadata"]["name"],
                old["metadata"]["resourceVersion"],
                new["metadata"]["resourceVersion"],
            )
        )

    def on_delete(self, obj: dict[str, Any]) -> None:
        self.calls.append(("delete", obj["metadata"]["name"]))


async def test_event_handlers_see_every_stored_change_as_a_watch_would() -> None:
    c = FakeClient([widget("seed"), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}])
    seen = Recording()
    c.add_event_handler(WIDGET, seen)
    assert seen.calls == [("add", "seed", "True")]  # what was stored, then only changes of the kind
    created = await c.create(widget("w"))
    rv = created["metadata"]["resourceVersion"]
    await c.patch(created, Patch.merge({"spec": {"size": 3}}))
    await c.create(widget("dry"), dry_run=True)  # not stored: no event
    with pytest.raises(AlreadyExists):
        await c.create(widget("w"))
    obj = widget("f")
    obj["metadata"]["finalizers"] = ["example.com/cleanup"]
    held = await c.create(obj)
    await c.delete(held)  # held by its finalizer: an update that sets deletionTimestamp
    pending = await c.get(WIDGET, "f", "default")
    pending["metadata"]["finalizers"] = []
    await c.update(pending)  # the last finalizer gone: deleted
    await c.delete_by_name(WIDGET, "w", "default")
    kinds = [call[0] for call in seen.calls[1:]]
    assert kinds == ["add", "update", "add", "update", "delete", "delete"]
    assert seen.calls[2][2] == rv and int(seen.calls[2][3]) > int(rv)
    assert seen.calls[4][1] == "f" and seen.calls[-2:] == [("delete", "f"), ("delete", "w")]


async def test_an_event_handler_gets_copies_it_cannot_change_the_store_through() -> None:
    c = FakeClient([widget("seed")], status_subresource=[WIDGET])

    class Mutating(Recording):
        def on_add(self, obj: dict[str, Any], is_in_initial_list: bool) -> None:
            obj["spec"]["size"] = 99

        def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
            self.calls.append(("update", str(new.get("status"))))
            new["spec"]["size"] = 99

    seen = Mutating()
    c.add_event_handler(WIDGET, seen)
    stored = await c.get(WIDGET, "seed", "default")
    await c.status.patch(stored, Patch.merge({"status": {"ready": True}}))
    assert seen.calls == [("update", "{'ready': True}")]
    assert (await c.get(WIDGET, "seed", "default"))["spec"] == {"size": 1}
