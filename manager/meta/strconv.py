"""Go's ``strconv.Atoi``, with its error texts (labels and annotations holding numbers)."""

from __future__ import annotations

import re

__all__ = ["atoi"]

_DECIMAL = re.compile(r"[+-]?[0-9]+")
_INT64 = 1 << 63


def atoi(text: str) -> int:
    """A decimal integer with an optional sign that fits 64 bits, else ``ValueError`` with Go's
    text (``strconv.Atoi: parsing "x": invalid syntax`` or ``... value out of range``)."""
    if not _DECIMAL.fullmatch(text):
        raise ValueError(f'strconv.Atoi: parsing "{text}": invalid syntax')
    value = int(text)
    if not -_INT64 <= value < _INT64:
        raise ValueError(f'strconv.Atoi: parsing "{text}": value out of range')
    return value
