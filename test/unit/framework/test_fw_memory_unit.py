"""Freed heap memory goes back to the OS (manager.memory)."""

from __future__ import annotations

import asyncio
import ctypes.util
import gc
import platform
import subprocess
import sys

import pytest

from manager import memory
from manager.manager.manager import Group, Manager, Options
from manager.memory import HeapTrimmer, trim_heap
from manager.testing import eventually


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not sys.platform.startswith("linux") or not ctypes.util.find_library("c"), reason="glibc")
def test_trimming_returns_pages_freed_in_the_middle_of_the_heap() -> None:
    # 60 MB of blocks glibc serves from its heap (not mmap), each second one kept: freed blocks
    # sit between live ones, so nothing can shrink the heap from its top
    blocks = [bytearray(64 * 1024) for _ in range(960)]
    keep = blocks[1::2]
    del blocks
    gc.collect()
    before = _rss_kb()
    assert trim_heap() is True
    after = _rss_kb()
    assert before - after > 10_000, (before, after)  # most of the freed 30 MB left the RSS
    assert len(keep) == 480


async def test_the_trimmer_trims_now_and_then_and_stops_when_it_cannot() -> None:
    calls: list[int] = []

    def trim() -> bool:
        calls.append(1)
        return True

    started = asyncio.Event()
    task = asyncio.create_task(HeapTrimmer(0.01, trim).start(started))
    try:

        def trimmed_thrice() -> None:
            assert started.is_set() and len(calls) >= 3, (started.is_set(), len(calls))

        await eventually(trimmed_thrice, timeout=10, interval=0.01, message="three trims, 10 ms apart")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    unavailable = HeapTrimmer(0.01, lambda: False)
    await asyncio.wait_for(unavailable.start(asyncio.Event()), 1)  # returns at once


class _Cluster:
    def __init__(self) -> None:
        class _Cache:
            async def start(self, started: asyncio.Event) -> None:
                started.set()

        self.cache = _Cache()


def test_a_manager_runs_a_trimmer_unless_told_not_to() -> None:
    def trimmers(mgr: Manager) -> list[object]:
        return [r for g in Group for r in mgr._groups[g].members if isinstance(r, HeapTrimmer)]

    on = Manager(_Cluster(), Options(metrics_bind_address="0"))  # type: ignore[arg-type]
    on._setup_servers()  # what run() does first
    assert [t.interval for t in trimmers(on)] == [5.0]  # type: ignore[attr-defined]
    off = Manager(_Cluster(), Options(metrics_bind_address="0", heap_trim_interval=None))  # type: ignore[arg-type]
    off._setup_servers()
    assert trimmers(off) == []


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_finding_malloc_trim_starts_no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lookup reads the process's own symbols: ``ctypes.util.find_library`` would fork
    ``ldconfig -p`` from the manager (a second child beside its webhook process, for a moment)."""

    def no_process(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(subprocess.Popen, "__init__", no_process)
    monkeypatch.setattr(memory, "_looked_up", False)
    monkeypatch.setattr(memory, "_malloc_trim", None)
    assert memory.trim_heap() is True
