"""``field.Error`` and ``ErrorList.ToAggregate()`` (k8s.io/apimachinery v0.34), with its texts.

An error renders as ``<path>: <Type>[: <value>][: <detail>]``; only Invalid and Unsupported
print the value (numbers and booleans plain, strings quoted as ``%q`` quotes them, anything
else as compact JSON in the order given, with Go's escapes: ``manager.meta.gotext``). A caller
that knows the Go type of a complex value passes ``value_text``, the ``json.Marshal`` of that
typed value (field order, zero fields), which is printed instead.
``aggregate`` is Go's: duplicates collapsed, one error bare, several as ``[e1, e2]``.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from manager.meta.gotext import go_json_escapes, go_quote

__all__ = ["OMIT", "ErrorType", "FieldError", "aggregate", "render_value"]


class ErrorType(enum.StrEnum):
    """Go's ``field.ErrorType`` texts, as they appear in the rendered message."""

    INVALID = "Invalid value"
    FORBIDDEN = "Forbidden"
    INTERNAL = "Internal error"
    REQUIRED = "Required value"
    NOT_SUPPORTED = "Unsupported value"
    TOO_LONG = "Too long"


class _Omit:
    """Marks a field error that prints no value (Forbidden, Internal, Required)."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT: Final = _Omit()

# Go's ``field.ErrorType`` values: a StatusCause's ``reason`` (``apierrors.NewInvalid``).
_CAUSE_TYPES: Final = {
    ErrorType.INVALID: "FieldValueInvalid",
    ErrorType.FORBIDDEN: "FieldValueForbidden",
    ErrorType.INTERNAL: "InternalError",
    ErrorType.REQUIRED: "FieldValueRequired",
    ErrorType.NOT_SUPPORTED: "FieldValueNotSupported",
    ErrorType.TOO_LONG: "FieldValueTooLong",
}

# Only these types print the offending value (Go's field.Error.ErrorBody).
_PRINTS_VALUE = frozenset({ErrorType.INVALID, ErrorType.NOT_SUPPORTED})


def render_value(value: object) -> str:
    """Go's rendering of a bad value: numbers plain, strings as ``%q`` quotes them, others as
    ``json.Marshal`` writes them (found comparing fuzzed reviews with the Go webhooks: a control
    character in a value was printed as JSON escapes it)."""
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        value = to_dict()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    return go_json_escapes(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


@dataclass(frozen=True)
class FieldError:
    """One problem with one field; ``bad_value`` is ``OMIT`` for types that print none."""

    type: ErrorType
    field: str
    bad_value: object = OMIT
    detail: str = ""
    value_text: str | None = None

    @classmethod
    def invalid(cls, path: str, value: object, detail: str, *, value_text: str | None = None) -> FieldError:
        return cls(ErrorType.INVALID, path, value, detail, value_text)

    @classmethod
    def forbidden(cls, path: str, detail: str) -> FieldError:
        return cls(ErrorType.FORBIDDEN, path, OMIT, detail)

    @classmethod
    def internal(cls, path: str, error: BaseException | str) -> FieldError:
        return cls(ErrorType.INTERNAL, path, OMIT, str(error))

    @classmethod
    def required(cls, path: str, detail: str = "") -> FieldError:
        return cls(ErrorType.REQUIRED, path, OMIT, detail)

    @classmethod
    def too_long(cls, path: str, max_length: int) -> FieldError:
        return cls(ErrorType.TOO_LONG, path, OMIT, f"may not be more than {max_length} bytes")

    @property
    def cause_type(self) -> str:
        """The error's type as a StatusCause names it (``FieldValueInvalid``, ``InternalError``)."""
        return _CAUSE_TYPES[self.type]

    def error_body(self) -> str:
        body = str(self.type)
        if self.type in _PRINTS_VALUE and self.bad_value is not OMIT:
            text = self.value_text if self.value_text is not None else render_value(self.bad_value)
            body += f": {text}"
        if self.detail:
            body += f": {self.detail}"
        return body

    def __str__(self) -> str:
        return f"{self.field}: {self.error_body()}" if self.field else self.error_body()


def aggregate(errors: Iterable[FieldError | str]) -> str:
    """Go's ``ToAggregate().Error()``: one error bare, several in brackets, duplicates collapsed."""
    seen: list[str] = []
    for err in errors:
        text = str(err)
        if text not in seen:
            seen.append(text)
    if len(seen) == 1:
        return seen[0]
    return "[" + ", ".join(seen) + "]"
