"""A compact store replays its objects once to the handlers added together.

Each object a compact store replays must be decoded; three controllers adding a handler each
to a store of 100k Pods decoded 300k Pods (docs/scale.md). Handlers added within
``REPLAY_GATHER_SECONDS`` of each other now share one decode per object, and a handler's
registration is synced once its replay was delivered, which is what a source waits for.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from manager.cache.informer import REPLAY_GATHER_SECONDS, SharedInformer
from manager.client import Client
from manager.client.restmapper import RESTMapping
from manager.controller.handler import enqueue_for_object
from manager.controller.reconcile import Request
from manager.controller.source import KindSource
from manager.scheme import GroupVersionKind
from manager.workqueue.queue import Queue

pytestmark = pytest.mark.unit

GVK = GroupVersionKind("example.com", "v1", "Widget")
MAPPING = RESTMapping(GVK, "widgets", True)


def widget(name: str, rv: str) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv},
    }


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.seen: list[dict[str, Any]] = []

    def on_add(self, o: dict[str, Any], initial: bool) -> None:
        self.seen.append(o)
        self.events.append(
            ("add-initial" if initial else "add", o["metadata"]["name"], o["metadata"]["resourceVersion"])
        )

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.events.append(("update", new["metadata"]["name"], new["metadata"]["resourceVersion"]))

    def on_delete(self, o: dict[str, Any]) -> None:
        self.events.append(("delete", o["metadata"]["name"], o["metadata"]["resourceVersion"]))


def filled(compact: bool, *names: str) -> SharedInformer:
    informer = SharedInformer(Client(None, None), MAPPING, compact_store=compact)  # type: ignore[arg-type]
    informer.replace([widget(n, "1") for n in names], None, True)
    return informer


async def test_handlers_added_together_share_one_decode_of_each_object(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    informer = filled(True, "a", "b", "c")
    decodes = 0
    decode = informer.store._decode

    def counting(stored: Any) -> dict[str, Any]:
        nonlocal decodes
        decodes += 1
        return decode(stored)

    informer.store._decode = counting  # type: ignore[method-assign]
    first, second, third = Recorder(), Recorder(), Recorder()
    # The loop's clock moves only as the test says while the handlers join, so "a moment
    # later" is a fifth of the gathering window whatever the machine's load (a stalled loop
    # would otherwise let the gathering timer come due before the third handler joins).
    loop = asyncio.get_running_loop()
    start, elapsed = loop.time(), 0.0
    with monkeypatch.context() as patched:
        patched.setattr(loop, "time", lambda: start + elapsed)
        registrations = [informer.add_event_handler(h) for h in (first, second)]
        elapsed = REPLAY_GATHER_SECONDS / 5
        for _ in range(3):  # loop turns, in which a timer that is due would fire
            await asyncio.sleep(0)
        registrations.append(informer.add_event_handler(third))  # a moment later: still gathered
        assert not any(r.has_synced() for r in registrations), "no replay before the gathering ends"
    await asyncio.wait_for(asyncio.gather(*(r.wait_synced() for r in registrations)), 5)
    expected = [("add-initial", n, "1") for n in ("a", "b", "c")]
    assert first.events == second.events == third.events == expected
    assert decodes == 3, "one decode per object, not one per object and handler"
    # the handlers get the same decoded object: they must not mutate it (cache interfaces)
    assert first.seen[0] is second.seen[0]


async def test_a_handler_gets_the_state_at_its_replay_then_every_event() -> None:
    informer = filled(True, "a", "gone")
    rec = Recorder()
    registration = informer.add_event_handler(rec)
    informer.upsert(widget("a", "2"))  # changes before the replay are in the replay, not events
    informer.remove(widget("gone", "1"))
    informer.upsert(widget("new", "3"))
    await asyncio.wait_for(registration.wait_synced(), 5)
    assert sorted(rec.events) == [("add-initial", "a", "2"), ("add-initial", "new", "3")]
    rec.events.clear()
    informer.upsert(widget("a", "4"))
    assert rec.events == [("update", "a", "4")]


async def test_a_handler_removed_before_its_replay_gets_nothing() -> None:
    informer = filled(True, "a")
    rec = Recorder()
    informer.add_event_handler(rec)
    informer.remove_event_handler(rec)
    assert informer._replay is None, "the removal cancelled the gathering: nothing left scheduled"
    # A bounded negative check besides: past the window no replay comes in by another way.
    await asyncio.sleep(REPLAY_GATHER_SECONDS * 3)
    informer.upsert(widget("a", "2"))
    assert rec.events == []
    assert informer._replay is None, "nothing left scheduled"


@pytest.mark.parametrize("compact, names", [(False, ("a",)), (True, ())])
async def test_a_dict_store_or_an_empty_store_replays_at_once(compact: bool, names: tuple[str, ...]) -> None:
    informer = filled(compact, *names)
    rec = Recorder()
    assert informer.add_event_handler(rec).has_synced()
    assert rec.events == [("add-initial", n, "1") for n in names]


class Informers:
    def __init__(self, informer: SharedInformer) -> None:
        self.informer = informer

    async def get_informer(self, gvk: GroupVersionKind) -> SharedInformer:
        return self.informer

    async def wait_for_cache_sync(self) -> bool:
        return True


async def test_a_source_is_synced_only_once_its_handler_has_every_cached_object() -> None:
    # a controller's workers start when its sources are synced: before the replay they would
    # find an empty queue and a controller that has not seen the cache yet
    informer = filled(True, "a", "b")
    queue: Queue[Request] = Queue()
    synced = asyncio.Event()
    source = KindSource(Informers(informer), GVK, enqueue_for_object())  # type: ignore[arg-type]
    task = asyncio.create_task(source.run(queue, synced))
    try:
        await asyncio.wait_for(synced.wait(), 5)
        assert sorted(queue.get_nowait().name for _ in range(len(queue))) == ["a", "b"]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
