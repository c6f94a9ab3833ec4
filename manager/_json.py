"""One place for JSON encoding: orjson, because the watch and list paths decode every object.

orjson returns ``bytes`` from ``dumps``; callers that need text use ``dumps_str``.
"""

from __future__ import annotations

from typing import Any

import orjson


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode JSON text or bytes."""
    return orjson.loads(data)


def dumps(obj: Any) -> bytes:
    """Encode to compact UTF-8 JSON bytes (what goes on the wire)."""
    return orjson.dumps(obj)


def dumps_str(obj: Any) -> str:
    return orjson.dumps(obj).decode()


JSONDecodeError = orjson.JSONDecodeError
