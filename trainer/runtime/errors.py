"""Errors the runtime framework hands back instead of raising: field errors and build failures.

Why a field-error type of our own: the webhooks render these exactly as Go's ``field.Error``
(``<path>: <Type>[: <value>][: <detail>]``, docs/behaviour/trainer.md §5.2) and tests compare type, path, bad
value and detail. ``RuntimeFailure`` carries an error the reconciler reports (a missing runtime,
an unsupported MPI implementation, a failed read); the reconciler turns it into an event.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OMIT", "ErrorType", "FieldError", "RuntimeFailure", "aggregate", "render_value"]


class ErrorType(enum.StrEnum):
    """Go's ``field.ErrorType`` texts, as they appear in the rendered message."""

    INVALID = "Invalid value"
    FORBIDDEN = "Forbidden"
    INTERNAL = "Internal error"
    REQUIRED = "Required value"
    NOT_SUPPORTED = "Unsupported value"


class _Omit:
    """Marks a field error that prints no value (Forbidden, Internal, Required)."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT: Any = _Omit()

# Only these types print the offending value (Go's field.Error.ErrorBody).
_PRINTS_VALUE = frozenset({ErrorType.INVALID, ErrorType.NOT_SUPPORTED})


def render_value(value: Any) -> str:
    """Go's rendering of a bad value: numbers plain, strings quoted, others as JSON."""
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class FieldError:
    """One problem with one field; ``bad_value`` is ``OMIT`` for types that print none."""

    type: ErrorType
    field: str
    bad_value: Any = OMIT
    detail: str = ""

    @classmethod
    def invalid(cls, path: str, value: Any, detail: str) -> FieldError:
        return cls(ErrorType.INVALID, path, value, detail)

    @classmethod
    def forbidden(cls, path: str, detail: str) -> FieldError:
        return cls(ErrorType.FORBIDDEN, path, OMIT, detail)

    @classmethod
    def internal(cls, path: str, error: BaseException | str) -> FieldError:
        return cls(ErrorType.INTERNAL, path, OMIT, str(error))

    def error_body(self) -> str:
        body = str(self.type)
        if self.type in _PRINTS_VALUE and self.bad_value is not OMIT:
            body += f": {render_value(self.bad_value)}"
        if self.detail:
            body += f": {self.detail}"
        return body

    def __str__(self) -> str:
        return f"{self.field}: {self.error_body()}" if self.field else self.error_body()


def aggregate(errors: Iterable[FieldError]) -> str:
    """Go's ``ToAggregate().Error()``: one error bare, several in brackets, duplicates collapsed."""
    seen: list[str] = []
    for err in errors:
        text = str(err)
        if text not in seen:
            seen.append(text)
    if len(seen) == 1:
        return seen[0]
    return "[" + ", ".join(seen) + "]"


@dataclass
class RuntimeFailure(Exception):
    """The runtime could not build objects; ``message`` is the text upstream reports.

    ``field_errors`` is set when bad input (rather than the cluster) is the cause, so a
    caller can show where the input is wrong.
    """

    message: str
    field_errors: list[FieldError] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


@dataclass
class PluginFailure(RuntimeFailure):
    """A third-party runtime plugin raised: only the TrainJob being handled fails (``plugin`` names it)."""

    plugin: str = ""
