"""The cyclic garbage collector set up for a long-running manager, as Go's GOGC sets its own.

CPython frees nearly everything by reference counting; its cyclic collector only finds cycles.
Its defaults suit a short script: it runs after every 700 net allocations of container objects,
and each run walks every young object it tracks (a youngest run), every tenth run the middle
generation, and now and then the whole heap. A manager allocates in bursts that hold no cycles:
a page of 500 decoded Pods is ~40,000 dicts and lists, alive until it is transformed, so the
collector walks them several times while they are decoded, moves them to older generations and
then walks the whole heap (every cached object) again: about half of a listed Pod's decode and
transform time at the defaults (docs/scale.md). Two settings take that back:

* the youngest generation holds ``young`` allocations instead of 700 (a page's worth: the
  older generations then fill as often as before in objects that outlived a youngest run, far
  less often in runs);
* what exists when the manager starts (modules, classes, the configuration: objects that live as
  long as the process) is frozen, so no whole-heap run walks it again (``gc.freeze``).

Cycles are still found, a little later: one youngest run per ``young`` allocations (a few MB of
objects at most). :func:`tuned` restores the interpreter's settings when the last manager that
tuned it stops.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

DEFAULT_YOUNG = 50_000
"""Container allocations between two youngest-generation runs (CPython's default is 700)."""

_holders = 0
_saved: tuple[int, ...] | None = None


@contextmanager
def tuned(young: int | None = DEFAULT_YOUNG) -> Iterator[None]:
    """Within the block the collector runs per ``young`` allocations and the objects alive when
    it was entered are frozen; ``None`` leaves the collector as it is. Nested and concurrent
    blocks (several managers in one process) share one setting; the outermost restores it."""
    global _holders, _saved
    if young is None:
        yield
        return
    if young < 1:
        raise ValueError(f"the collector's young generation must hold at least 1 allocation, not {young}")
    if _holders == 0:
        _saved = gc.get_threshold()
        gc.freeze()
        _, middle, old = _saved
        gc.set_threshold(young, middle, old)
    _holders += 1
    try:
        yield
    finally:
        _holders -= 1
        if _holders == 0 and _saved is not None:
            gc.set_threshold(*_saved)
            # what was frozen is an ordinary old object again: a cycle among them is found
            gc.unfreeze()
            _saved = None
