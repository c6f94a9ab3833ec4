"""Owner references, finalizers, retry_on_conflict, create_or_update/patch, and event de-dup."""

from __future__ import annotations

from typing import Any

import pytest

from manager.client import Conflict, NotFound
from manager.controller_util import (
    AlreadyOwnedError,
    OperationResult,
    OwnerReferenceError,
    RetryBackoff,
    add_finalizer,
    contains_finalizer,
    create_or_patch,
    create_or_update,
    get_controller_of,
    has_owner_reference,
    remove_finalizer,
    remove_owner_reference,
    retry_on_conflict,
    set_controller_reference,
    set_owner_reference,
)
from manager.events import EventRecorder
from manager.scheme import GroupVersionKind
from manager.testing.fake import FakeClient

CM = GroupVersionKind("", "v1", "ConfigMap")
JOB = GroupVersionKind("batch", "v1", "Job")


def owner(
    name: str = "o", uid: str = "u1", ns: str = "ns", api: str = "example.com/v1", kind: str = "Widget"
) -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": ns, "uid": uid}}


def child(ns: str = "ns") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": ns}}


def test_set_controller_reference() -> None:
    obj = child()
    assert set_controller_reference(owner(), obj) is True
    assert obj["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "name": "o",
            "uid": "u1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert set_controller_reference(owner(), obj) is False  # idempotent
    # the same owner at another version replaces the reference rather than adding one
    assert set_controller_reference(owner(api="example.com/v2"), obj) is True
    assert len(obj["metadata"]["ownerReferences"]) == 1
    with pytest.raises(AlreadyOwnedError):
        set_controller_reference(owner(name="other", uid="u2"), obj)
    with pytest.raises(OwnerReferenceError):
        set_controller_reference(owner(ns="elsewhere"), child())
    with pytest.raises(OwnerReferenceError):
        set_controller_reference(
            owner(), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}
        )
    with pytest.raises(OwnerReferenceError):
        set_controller_reference({"apiVersion": "v1", "kind": "X", "metadata": {"name": "no-uid"}}, child())
    cluster_owner = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "uid": "n1"}}
    assert set_controller_reference(cluster_owner, child(), block_owner_deletion=False)


def test_owner_references_and_finalizers() -> None:
    obj = child()
    assert set_owner_reference(owner(), obj)
    assert get_controller_of(obj) is None
    assert set_owner_reference(owner(name="p", uid="u2"), obj)
    assert has_owner_reference(owner(), obj)
    # a controller reference may still be set when only plain owners exist
    assert set_controller_reference(owner(name="p", uid="u2"), obj)
    assert get_controller_of(obj)["name"] == "p"  # type: ignore[index]
    assert set_owner_reference(owner(name="p", uid="u2"), obj) is False  # keeps controller flag
    assert get_controller_of(obj)["name"] == "p"  # type: ignore[index]
    assert remove_owner_reference(owner(), obj) and not has_owner_reference(owner(), obj)
    assert remove_owner_reference(owner(), obj) is False

    assert add_finalizer(obj, "example.com/f") and not add_finalizer(obj, "example.com/f")
    assert contains_finalizer(obj, "example.com/f")
    assert remove_finalizer(obj, "example.com/f") and not remove_finalizer(obj, "example.com/f")
    assert not contains_finalizer(obj, "example.com/f")


async def test_retry_on_conflict_retries_to_success_and_gives_up() -> None:
    c = FakeClient([child()])
    c.inject_error("update", Conflict("modified", code=409), times=3)

    async def bump() -> dict[str, Any]:
        cm = await c.get(CM, "c", "ns")
        cm.setdefault("data", {})["n"] = "1"
        result: dict[str, Any] = await c.update(cm)
        return result

    result = await retry_on_conflict(bump)
    assert result["data"] == {"n": "1"}
    assert c.requests["update"] == 4
    c.inject_error("update", Conflict("modified", code=409), times=3)
    with pytest.raises(Conflict):
        await retry_on_conflict(bump, RetryBackoff(steps=3, duration=0.001))
    assert c.requests["update"] == 7
    c.inject_error("update", NotFound("gone", code=404))
    with pytest.raises(NotFound):  # other errors are not retried
        await retry_on_conflict(bump)
    assert c.requests["update"] == 8


async def test_create_or_update() -> None:
    c = FakeClient()
    desired = child()

    def mutate(obj: dict[str, Any]) -> None:
        obj["data"] = {"k": "v"}

    obj, op = await create_or_update(c, desired, mutate)
    assert op is OperationResult.CREATED and obj["data"] == {"k": "v"}
    _, op = await create_or_update(c, desired, mutate)
    assert op is OperationResult.NONE
    writes = c.writes
    _, op = await create_or_update(c, desired, lambda o: o.update(data={"k": "w"}))
    assert op is OperationResult.UPDATED and c.writes == writes + 1
    with pytest.raises(ValueError):
        await create_or_update(c, desired, lambda o: o["metadata"].update(name="renamed"))


@pytest.mark.parametrize(
    "change",
    [
        lambda o: o["metadata"].update(name="renamed"),
        lambda o: o["metadata"].update(namespace="elsewhere"),
        lambda o: o.update(kind="Secret"),
        lambda o: o.update(apiVersion="v2"),
        lambda o: o.pop("apiVersion"),
    ],
    ids=["name", "namespace", "kind", "apiVersion", "no apiVersion"],
)
@pytest.mark.parametrize("write", [create_or_update, create_or_patch])
@pytest.mark.parametrize("exists", [False, True], ids=["to create", "to update"])
async def test_mutate_must_leave_kind_namespace_and_name(write: Any, exists: bool, change: Any) -> None:
    c = FakeClient([child()] if exists else [])
    writes = c.writes
    with pytest.raises(ValueError, match="mutate changed the object's kind, namespace or name"):
        await write(c, child(), change)
    assert c.writes == writes, "nothing written"
    if not exists:
        with pytest.raises(NotFound):
            await c.get(CM, "c", "ns")


@pytest.mark.parametrize("write", [create_or_update, create_or_patch])
@pytest.mark.parametrize("exists", [False, True], ids=["to create", "to update"])
async def test_an_identity_spelled_another_way_is_the_same_kind(write: Any, exists: bool) -> None:
    # "/v1" parses to the core group's v1, as "v1" does: neither the object passed in nor mutate
    # writing it that way changes the kind
    c = FakeClient([child()] if exists else [])
    spelled = child() | {"apiVersion": "/v1"}
    _, op = await write(c, spelled, lambda o: o.update(data={"k": "v"}))
    assert op is (OperationResult.UPDATED if exists else OperationResult.CREATED)
    _, op = await write(c, child(), lambda o: o.update(apiVersion="/v1", data={"k": "v"}))
    # as stored: created as "/v1" above, so unchanged; stored as "v1", so rewritten
    assert op is (OperationResult.UPDATED if exists else OperationResult.NONE)
    assert (await c.get(CM, "c", "ns"))["data"] == {"k": "v"}


async def test_create_or_patch_writes_spec_and_status_separately() -> None:
    c = FakeClient(status_subresource=[JOB])
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns"}}

    def mutate(obj: dict[str, Any]) -> None:
        obj["spec"] = {"parallelism": 2}
        obj["status"] = {"active": 1}

    obj, op = await create_or_patch(c, job, mutate)
    assert op is OperationResult.CREATED and obj["status"] == {"active": 1}
    _, op = await create_or_patch(c, job, mutate)
    assert op is OperationResult.NONE
    _, op = await create_or_patch(c, job, lambda o: o["status"].update(active=2))
    assert op is OperationResult.UPDATED_STATUS_ONLY
    obj, op = await create_or_patch(
        c, job, lambda o: (o["spec"].update(parallelism=3), o["status"].update(active=3))
    )
    assert op is OperationResult.UPDATED_STATUS
    assert obj["spec"] == {"parallelism": 3} and obj["status"] == {"active": 3}


async def test_event_recorder_deduplicates_within_window() -> None:
    c = FakeClient()
    now = [0.0]
    recorder = EventRecorder(c, component="test-controller", dedup_window=60, clock=lambda: now[0])
    target = owner()
    first = await recorder.event(target, "Normal", "Created", "created pod p")
    assert first is not None and first["count"] == 1
    assert first["involvedObject"]["uid"] == "u1" and first["source"] == {"component": "test-controller"}
    now[0] = 30
    second = await recorder.event(target, "Normal", "Created", "created pod p")
    assert second is not None and second["metadata"]["name"] == first["metadata"]["name"]
    assert second["count"] == 2
    await recorder.event(target, "Warning", "Failed", "different message")
    events = await c.list(GroupVersionKind("", "v1", "Event"), namespace="ns")
    assert len(events) == 2
    now[0] = 200  # outside the window: a fresh Event
    await recorder.event(target, "Normal", "Created", "created pod p")
    assert len(await c.list(GroupVersionKind("", "v1", "Event"), namespace="ns")) == 3
    # errors are swallowed (best effort)
    c.inject_error("create", Conflict("x", code=409))
    assert await recorder.event(target, "Normal", "Other", "m") is None


async def test_event_recorder_emit_is_fire_and_forget() -> None:
    c = FakeClient()
    recorder = EventRecorder(c, component="bg")
    for _ in range(4):
        recorder.emit(owner(), "Normal", "Tick", "tick")  # from sync code, no await
    await recorder.flush()
    events = await c.list(GroupVersionKind("", "v1", "Event"), namespace="ns")
    assert len(events) == 1 and events[0]["count"] == 4
