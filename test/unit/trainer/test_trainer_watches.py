"""The TrainJob controller's extra watches: async mappers become queue additions (docs/behaviour/trainer.md §3.1)."""

from __future__ import annotations

from typing import Any

from manager.controller.event import CreateEvent, DeleteEvent, GenericEvent, UpdateEvent
from manager.controller.reconcile import Request
from manager.scheme import ObjectKey
from trainer.controllers.watches import AsyncMapHandler
from trainer.runtime.context import require_kinds

Json = dict[str, Any]


class _Queue:
    def __init__(self) -> None:
        self.added: list[Request] = []

    def add(self, item: Request) -> None:
        self.added.append(item)


async def _by_name(_reader: Any, obj: Json) -> list[ObjectKey]:
    name = obj["metadata"]["name"]
    return [ObjectKey("ns", name), ObjectKey("ns", name)]  # duplicates collapse


async def _failing(_reader: Any, obj: Json) -> list[ObjectKey]:
    raise RuntimeError("cache gone")


def _obj(name: str) -> Json:
    return {"metadata": {"name": name}}


async def test_listed_events_enqueue_mapped_keys_once() -> None:
    queue = _Queue()
    handler = AsyncMapHandler(None, _by_name, {"create", "update", "delete"})  # type: ignore[arg-type]
    handler.create(CreateEvent(_obj("a")), queue)
    handler.update(UpdateEvent(_obj("old"), _obj("b")), queue)
    handler.delete(DeleteEvent(_obj("c")), queue)
    handler.generic(GenericEvent(_obj("ignored")), queue)
    await handler.drain()
    assert sorted(r.name for r in queue.added) == ["a", "b", "c"]


async def test_old_object_is_mapped_on_update_when_asked() -> None:
    queue = _Queue()
    handler = AsyncMapHandler(None, _by_name, {"update"}, map_old_on_update=True)  # type: ignore[arg-type]
    handler.update(UpdateEvent(_obj("old"), _obj("new")), queue)
    await handler.drain()
    assert queue.added == [Request("ns", "old"), Request("ns", "new")]


async def test_a_failing_mapper_drops_only_that_event() -> None:
    queue = _Queue()
    handler = AsyncMapHandler(None, _failing, {"create"})  # type: ignore[arg-type]
    handler.create(CreateEvent(_obj("a")), queue)
    await handler.drain()
    assert queue.added == []


async def test_without_a_mapper_every_kind_is_served() -> None:
    from manager.scheme import GroupVersionKind

    assert await require_kinds(None, GroupVersionKind("x", "v1", "Y"))
