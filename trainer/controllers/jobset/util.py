"""Map and list merges used when resuming Jobs (upstream's ``collections`` package, 6.R)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

V = TypeVar("V")


def merge_maps(first: Mapping[str, V] | None, second: Mapping[str, V] | None) -> dict[str, V]:
    """Union of both maps; on a key in both, ``second`` wins. Keys are never removed."""
    return {**(first or {}), **(second or {})}


def merge_slices(first: Sequence[Any] | None, second: Sequence[Any] | None) -> list[Any]:
    """Union without duplicates (value equality): ``first`` in order, then new items of ``second``.

    PORT NOTE: Go builds the union through a hash map, so its order is random; ours is stable.
    """
    out: list[Any] = []
    for item in (*(first or ()), *(second or ())):
        if item not in out:
            out.append(item)
    return out
