"""Logging: structlog configured once, JSON in production and key=value on a console.

Controllers bind ``controller``, ``kind``, ``namespace``, ``name`` and ``reconcileID`` through
contextvars for the duration of one reconcile, so every line a reconciler logs carries them
without passing a logger around. Never log secrets: ``redact`` masks the usual suspects in
event dicts (tokens, passwords, certificate keys) before rendering.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any, Literal

import structlog
from structlog.typing import EventDict, Processor

SENSITIVE_KEYS = frozenset({"token", "password", "secret", "authorization", "bearer", "tls.key", "key_data"})
REDACTED = "[REDACTED]"


def redact(_logger: Any, _method: str, event_dict: EventDict) -> EventDict:
    """Mask values whose key names a credential."""
    for key in list(event_dict):
        if key.lower() in SENSITIVE_KEYS:
            event_dict[key] = REDACTED
    return event_dict


def configure(
    *,
    level: int | str = logging.INFO,
    fmt: Literal["json", "console"] | None = None,
    stream: Any = None,
) -> None:
    """Set up structlog for the process; ``fmt`` defaults to console on a TTY, JSON otherwise."""
    stream = stream or sys.stderr
    if isinstance(level, str):
        level = logging.getLevelNamesMapping()[level.upper()]
    if fmt is None:
        fmt = "console" if getattr(stream, "isatty", lambda: False)() else "json"
    processors: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
        redact,
        structlog.processors.format_exc_info if fmt == "json" else structlog.dev.set_exc_info,
    ]
    renderer: Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=True,
    )


@contextmanager
def bound(**values: Any) -> Iterator[None]:
    """Bind ``values`` to every log line emitted in this context (task-local via contextvars)."""
    with structlog.contextvars.bound_contextvars(**values):
        yield


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)


def current_context() -> MutableMapping[str, Any]:
    """The values bound in this context right now (what a reconcile's log lines carry)."""
    return structlog.contextvars.get_contextvars()
