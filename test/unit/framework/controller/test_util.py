"""Owner references, finalizers and create_or_update on dicts."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from manager.client.errors import NotFound
from manager.controller.util import (
    AlreadyOwnedError,
    OperationResult,
    add_finalizer,
    contains_finalizer,
    controller_of,
    create_or_update,
    has_controller_reference,
    remove_finalizer,
    remove_owner_reference,
    set_controller_reference,
    set_owner_reference,
)


def job(name: str = "job", namespace: str = "ns", uid: str = "uid-1") -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
    }


def test_controller_reference_blocks_owner_deletion_and_is_idempotent() -> None:
    child: dict[str, Any] = {"metadata": {"name": "c", "namespace": "ns"}}
    set_controller_reference(job(), child)
    set_controller_reference(job(), child)
    assert child["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "job",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert has_controller_reference(child)
    assert controller_of(child)["name"] == "job"  # type: ignore[index]
    with pytest.raises(AlreadyOwnedError, match="already owned by another TrainJob controller job"):
        set_controller_reference(job("other", uid="uid-2"), child)


def test_owner_scope_rules() -> None:
    with pytest.raises(ValueError, match="cross-namespace owner references are disallowed"):
        set_controller_reference(job(namespace="a"), {"metadata": {"name": "c", "namespace": "b"}})
    with pytest.raises(ValueError, match="cluster-scoped resource must not have a namespace-scoped owner"):
        set_owner_reference(job(), {"metadata": {"name": "c"}})
    cluster_owner = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u"}}
    child: dict[str, Any] = {"metadata": {"name": "c", "namespace": "ns"}}
    set_owner_reference(cluster_owner, child)
    assert not has_controller_reference(child)
    assert remove_owner_reference(cluster_owner, child)
    assert not remove_owner_reference(cluster_owner, child)
    assert child["metadata"]["ownerReferences"] == []


def test_finalizers() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "x"}}
    assert add_finalizer(obj, "trainer.kubeflow.org/resources")
    assert not add_finalizer(obj, "trainer.kubeflow.org/resources")
    assert contains_finalizer(obj, "trainer.kubeflow.org/resources")
    assert remove_finalizer(obj, "trainer.kubeflow.org/resources")
    assert not remove_finalizer(obj, "trainer.kubeflow.org/resources")
    assert obj["metadata"]["finalizers"] == []


class MiniClient:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes: list[str] = []

    async def get(self, kind: Any, name: str, namespace: str = "") -> dict[str, Any]:
        try:
            return copy.deepcopy(self.objects[(namespace, name)])
        except KeyError:
            raise NotFound("not found") from None

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.writes.append("create")
        self.objects[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = copy.deepcopy(obj)
        return obj

    async def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.writes.append("update")
        self.objects[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = copy.deepcopy(obj)
        return obj


async def test_create_or_update_writes_only_on_change() -> None:
    client = MiniClient()
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "ns"}}

    def want(data: str) -> Any:
        def mutate(obj: dict[str, Any]) -> None:
            obj["data"] = {"k": data}

        return mutate

    result, _ = await create_or_update(client, copy.deepcopy(cm), want("1"))
    assert result is OperationResult.CREATED
    result, _ = await create_or_update(client, copy.deepcopy(cm), want("1"))
    assert result is OperationResult.UNCHANGED
    result, stored = await create_or_update(client, copy.deepcopy(cm), want("2"))
    assert result is OperationResult.UPDATED and stored["data"] == {"k": "2"}
    assert client.writes == ["create", "update"]

    def rename(obj: dict[str, Any]) -> None:
        obj["metadata"]["name"] = "other"

    with pytest.raises(ValueError, match="cannot mutate object name"):
        await create_or_update(client, copy.deepcopy(cm), rename)


async def test_object_reconciler_fetches_and_ignores_deleted_objects() -> None:
    from manager.controller.reconcile import Request, Result, object_reconciler

    client = MiniClient()
    client.objects[("ns", "there")] = {"metadata": {"name": "there", "namespace": "ns"}, "spec": {"n": 1}}
    seen: list[dict[str, Any]] = []

    async def fn(obj: dict[str, Any]) -> Result:
        seen.append(obj)
        return Result(requeue_after=5)

    reconcile = object_reconciler(client, "Widget", fn)
    assert await reconcile(Request("ns", "there")) == Result(requeue_after=5)
    assert await reconcile(Request("ns", "gone")) is None
    assert [o["metadata"]["name"] for o in seen] == ["there"]
