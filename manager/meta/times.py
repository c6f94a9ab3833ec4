"""``metav1.Time`` on the wire: RFC 3339 with whole seconds in UTC (``2025-01-02T03:04:05Z``);
``metav1.MicroTime``: the same with microseconds (``2025-01-02T03:04:05.123456Z``)."""

from __future__ import annotations

import datetime

__all__ = ["format_micro_time", "format_time", "now", "parse_time"]

_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_MICRO_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def format_time(when: datetime.datetime) -> str:
    """``when`` as metav1.Time serializes it (sub-seconds dropped, converted to UTC)."""
    return when.astimezone(datetime.UTC).strftime(_FORMAT)


def format_micro_time(when: datetime.datetime) -> str:
    """``when`` as metav1.MicroTime serializes it (microseconds kept, converted to UTC)."""
    return when.astimezone(datetime.UTC).strftime(_MICRO_FORMAT)


def now() -> str:
    """The current time as metav1.Time."""
    return format_time(datetime.datetime.now(datetime.UTC))


def parse_time(text: str | None) -> datetime.datetime | None:
    """An RFC 3339 timestamp (``Z`` or an offset, any fraction of a second: Time and MicroTime)
    as an aware datetime; None for empty."""
    if not text:
        return None
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
