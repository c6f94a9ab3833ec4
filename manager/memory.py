"""Freed heap memory handed back to the operating system, as Go's background scavenger does.

CPython frees small objects into its own arenas and larger ones (list pages, a whole Pod's JSON,
a big dict's table) through glibc's ``malloc``. glibc keeps what was freed in the middle of its
heap mapped: after a burst (the first list of 100k Pods, the first reconciles) those pages stay
in the process's RSS although nothing uses them. ``malloc_trim(0)`` releases every whole free
page of every malloc arena (``madvise``), which takes milliseconds even for a heap of hundreds
of MB. :class:`HeapTrimmer` calls it now and then; elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

_malloc_trim: Callable[[int], int] | None = None
_looked_up = False


def _lookup() -> Callable[[int], int] | None:
    global _malloc_trim, _looked_up
    if not _looked_up:
        _looked_up = True
        trim = None
        # the process's own symbols first (the interpreter links the C library): no
        # ``ctypes.util.find_library``, which forks ``ldconfig -p`` and blocks the loop meanwhile
        # (a stray child of the manager for a moment)
        for name in (None, "libc.so.6"):
            try:
                trim = ctypes.CDLL(name).malloc_trim
                break
            except (OSError, AttributeError):
                continue
        if trim is not None:
            trim.argtypes = [ctypes.c_size_t]
            trim.restype = ctypes.c_int
        _malloc_trim = trim
    return _malloc_trim


def trim_heap() -> bool:
    """Return whole free heap pages to the OS; whether the C library can (glibc)."""
    trim = _lookup()
    if trim is None:
        return False
    trim(0)
    return True


class HeapTrimmer:
    """A runnable that trims the heap every ``interval`` seconds (on every replica).

    Go's runtime returns unused heap to the OS in the background on its own; CPython on glibc
    does not, so without this a process's steady RSS is its peak.
    """

    needs_leader_election = False

    def __init__(self, interval: float = 5.0, trim: Callable[[], bool] = trim_heap) -> None:
        self.interval = interval
        self._trim = trim

    async def start(self, started: asyncio.Event) -> None:
        started.set()
        if not self._trim():
            log.debug("heap trimming not available on this C library")
            return
        while True:
            await asyncio.sleep(self.interval)
            self._trim()

    def __repr__(self) -> str:
        return f"HeapTrimmer(every {self.interval:g}s)"
