"""object_reconciler: fetch the object named by the request; a deleted object needs no work."""

from __future__ import annotations

import copy
from typing import Any

from manager.client.errors import NotFound


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
