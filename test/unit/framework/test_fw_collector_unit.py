"""The cyclic collector while a manager runs (``manager.collector``, framework.md A.16)."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from manager import collector
from manager.manager import Manager, Options


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _garbage_cycle() -> weakref.ref[_Node]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_the_young_generation_is_widened_and_what_exists_frozen_until_the_block_ends() -> None:
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    with collector.tuned(5_000):
        assert gc.get_threshold() == (5_000, *before[1:])
        assert gc.get_freeze_count() > 0  # the modules and classes alive at the start
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_a_cycle_made_meanwhile_is_still_collected_without_an_explicit_collect() -> None:
    """Only later: once ``young`` more container objects were allocated than freed."""
    with collector.tuned(2_000):
        gc.collect()  # an empty youngest generation to count from
        cycle = _garbage_cycle()
        assert cycle() is not None  # a cycle: reference counting alone never frees it
        alive: list[list[int]] = []
        while cycle() is not None and len(alive) < 100_000:
            alive.append([])
        assert cycle() is None, "the youngest generation never ran"
        assert 1_000 < len(alive) <= 2_000, f"collected after {len(alive)} allocations, not about 2,000"


def test_nested_blocks_share_one_setting_and_the_outermost_restores_it() -> None:
    before = gc.get_threshold()
    with collector.tuned(8_000):
        with collector.tuned(8_000):
            pass
        assert gc.get_threshold()[0] == 8_000  # the inner end leaves the outer's setting
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_none_leaves_the_collector_alone_and_a_young_generation_under_1_is_refused() -> None:
    before = gc.get_threshold()
    with collector.tuned(None):
        assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    with pytest.raises(ValueError, match="at least 1 allocation, not 0"), collector.tuned(0):
        pass
    assert gc.get_threshold() == before


class _Cluster:
    class _Cache:
        async def start(self, started: asyncio.Event) -> None:
            started.set()
            await asyncio.Event().wait()

    def __init__(self) -> None:
        self.cache = self._Cache()
        self.client = None
        self.api_reader = None


class _Probe:
    """Notes the collector's setting while the manager runs."""

    needs_leader_election = False

    def __init__(self) -> None:
        self.seen: tuple[int, ...] | None = None
        self.frozen = 0

    async def start(self, started: asyncio.Event) -> None:
        self.seen, self.frozen = gc.get_threshold(), gc.get_freeze_count()
        started.set()


@pytest.mark.parametrize(
    ("option", "expected"), [("unset", collector.DEFAULT_YOUNG), (None, None), (30_000, 30_000)]
)
async def test_a_running_manager_tunes_the_collector_and_its_stop_restores_it(
    option: int | str | None, expected: int | None
) -> None:
    before = gc.get_threshold()
    probe = _Probe()
    opts = Options(metrics_bind_address="0", heap_trim_interval=None)
    if option != "unset":
        opts.gc_young_generation = option  # type: ignore[assignment]
    mgr = Manager(_Cluster(), opts)  # type: ignore[arg-type]
    mgr.add(probe)
    run = asyncio.create_task(mgr.run())
    await asyncio.wait_for(mgr.elected.wait(), 5)
    mgr.stop()
    await asyncio.wait_for(run, 5)
    assert probe.seen == ((expected, *before[1:]) if expected is not None else before)
    assert (probe.frozen > 0) is (expected is not None)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
