"""``metav1.Duration``: Go's ``time.ParseDuration``, with its error texts.

``15s``, ``1m30s``, ``1.5h``, ``-2ms``, ``0``; units ``ns``, ``us`` (``µs``, ``μs``), ``ms``,
``s``, ``m``, ``h``. The result is in seconds.
"""

from __future__ import annotations

import json

__all__ = ["DurationError", "parse_duration"]

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,  # U+00B5 micro sign
    "\u03bcs": 1e-6,  # U+03BC Greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


class DurationError(ValueError):
    """Not a Go duration; the text is Go's (``time: invalid duration "x"``)."""


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def parse_duration(text: str) -> float:
    """A Go duration string in seconds (``time: ...`` errors as Go words them)."""
    rest = text
    negative = False
    if rest[:1] in ("-", "+"):
        negative = rest[0] == "-"
        rest = rest[1:]
    if rest == "0":
        return 0.0
    if not rest:
        raise DurationError(f"time: invalid duration {_quote(text)}")
    total = 0.0
    while rest:
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        whole, rest = rest[:i], rest[i:]
        fraction = ""
        if rest[:1] == ".":
            j = 1
            while j < len(rest) and rest[j].isdigit():
                j += 1
            fraction, rest = rest[1:j], rest[j:]
        if not whole and not fraction:  # no digits (e.g. ".s")
            raise DurationError(f"time: invalid duration {_quote(text)}")
        k = 0
        while k < len(rest) and rest[k] != "." and not rest[k].isdigit():
            k += 1
        unit, rest = rest[:k], rest[k:]
        if not unit:
            raise DurationError(f"time: missing unit in duration {_quote(text)}")
        if unit not in _UNITS:
            raise DurationError(f"time: unknown unit {_quote(unit)} in duration {_quote(text)}")
        total += float(f"{whole or 0}.{fraction or 0}") * _UNITS[unit]
    return -total if negative else total
