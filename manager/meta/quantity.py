"""Kubernetes ``resource.Quantity`` (apimachinery v0.34) in exact integer arithmetic.

Why our own: PodGroup ``minResources`` and ElasticQuota ``used`` must be summed, compared and
printed exactly as the Go controllers do, and no maintained Python package reproduces Go's
parser quirks and canonical form. A value is kept as ``unscaled * 10**scale`` with Python
integers, so there is no int64/inf.Dec split; the observable behaviour of both Go paths is
reproduced:

* parsing follows Go's scanner (sign, leading zeros, ``1.``, ``.5``, suffixes ``n u m "" k M G T
  P E``, ``Ki..Ei`` and ``e<exp>``/``E<exp>``); non-zero values finer than 1n are rounded up in
  magnitude to 1n; binary values are capped at 2**63-1 in magnitude; a binary value strictly
  between 0 and 1 in magnitude becomes DecimalSI;
* a parsed string that Go considers canonical is remembered and printed verbatim (Go keeps it
  in ``Quantity.s``), e.g. ``"1e3"`` stays ``"1e3"`` and ``"+1"`` stays ``"+1"``; arithmetic
  forgets it;
* the canonical form uses the largest exponent that loses no precision, a multiple of 3 for
  decimal formats and of 1024 for BinarySI; BinarySI values inside (-1024, 1024) or with a
  fraction are printed as DecimalSI; a decimal exponent with no SI suffix (beyond ``E``)
  prints the bare mantissa, as Go does.

Deliberate difference: ``scaled_value`` rounds non-exact negative values away from zero in all
cases (Go's int64 path); Go's big-decimal path truncates some negatives instead.
"""

from __future__ import annotations

import enum
import functools
from fractions import Fraction
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

__all__ = ["Format", "Quantity", "QuantityError", "is_quantity"]


class QuantityError(ValueError):
    """A string that Go's ``ParseQuantity`` rejects; the message names Go's reason."""


class Format(enum.StrEnum):
    """How a quantity prints; remembered from the suffix it was parsed with."""

    DECIMAL_EXPONENT = "DecimalExponent"
    BINARY_SI = "BinarySI"
    DECIMAL_SI = "DecimalSI"


_NANO = -9
_MAX_INT64 = 2**63 - 1
_MAX_DECIMAL_DIGITS = 18  # Go's maxInt64Factors: longer numbers take the big-decimal path.
_SPLIT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_ERR_FORMAT = f"quantities must match the regular expression '{_SPLIT_RE}'"
_ERR_NUMERIC = "unable to parse numeric part of quantity"
_ERR_SUFFIX = "unable to parse quantity's suffix"

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXPONENT = {e: s for s, e in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_BY_EXPONENT = {e: s for s, e in _BINARY_SUFFIXES.items()}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")


def _pow10(exponent: int) -> int:
    """``10**exponent`` for a non-negative exponent, typed as int."""
    result: int = pow(10, exponent)
    return result


def _strip_tens(unscaled: int, scale: int) -> tuple[int, int]:
    while unscaled != 0 and unscaled % 10 == 0:
        unscaled //= 10
        scale += 1
    return unscaled, scale


def _ceil_div_away(numerator: int, denominator: int) -> tuple[int, bool]:
    """Divide rounding away from zero; also says whether the division was exact."""
    quotient, remainder = divmod(abs(numerator), denominator)
    if remainder:
        quotient += 1
    return (quotient if numerator >= 0 else -quotient), remainder == 0


def _cmp_parts(a: int, a_scale: int, b: int, b_scale: int) -> int:
    """Compare ``a*10**a_scale`` with ``b*10**b_scale`` without building huge powers."""
    sa, sb = (a > 0) - (a < 0), (b > 0) - (b < 0)
    if sa != sb or sa == 0:
        return (sa > sb) - (sa < sb)
    # Same non-zero sign: compare magnitudes by their order of magnitude first.
    da, db = len(str(abs(a))) + a_scale, len(str(abs(b))) + b_scale
    if da != db:
        return sa if da > db else -sa
    low = min(a_scale, b_scale)
    x, y = a * _pow10(a_scale - low), b * _pow10(b_scale - low)
    return (x > y) - (x < y)


class _Scan:
    """Result of Go's ``parseQuantityString``: the pieces, not yet interpreted."""

    __slots__ = ("denom", "num", "positive", "suffix", "value")

    def __init__(self, positive: bool, value: str, num: str, denom: str, suffix: str) -> None:
        self.positive, self.value, self.num, self.denom, self.suffix = positive, value, num, denom, suffix


def _scan(text: str) -> _Scan:
    positive, pos, end = True, 0, len(text)
    if end and text[0] in "+-":
        positive = text[0] == "+"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return _Scan(positive, "0", "0", "", "")
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    if pos >= end:
        return _Scan(positive, text, num, "", "")
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return _Scan(positive, text, num, denom, "")
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(_ERR_FORMAT)
    return _Scan(positive, value, num, denom, text[suffix_start:])


def _interpret(suffix: str) -> tuple[int, int, Format]:
    """(base, exponent, format) of a suffix, as Go's suffixer interprets it."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], Format.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], Format.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[0] in "+-" else digits
        if body and all(c in _DIGITS for c in body):
            exponent = int(digits)
            if -(2**63) <= exponent < 2**63:
                # Go narrows the int64 to int32 without a check.
                exponent = (exponent + 2**31) % 2**32 - 2**31
                return 10, exponent, Format.DECIMAL_EXPONENT
    raise QuantityError(_ERR_SUFFIX)


def _keeps_text(scan: _Scan, base: int, exponent: int, fmt: Format) -> bool:
    """Whether Go's fast path stores the input string as the quantity's printed form."""
    if fmt is Format.BINARY_SI:
        if scan.denom:
            return False
        precision = 15 - len(scan.num) - int(exponent * 3 / 10) - 1
        scale = 0
    else:
        precision = _MAX_DECIMAL_DIGITS - len(scan.num) - len(scan.denom)
        scale = exponent
    if precision < 0:
        return False
    scale -= len(scan.denom)
    if scale < _NANO:
        return False
    shifted = scan.num + scan.denom
    number = int(shifted)
    if fmt is Format.BINARY_SI:
        if abs(number << exponent) > _MAX_INT64:
            return False
        return exponent % 10 == 0 and (number & 0x07) != 0
    return scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"


@functools.total_ordering
class Quantity:
    """An immutable Kubernetes quantity. Arithmetic returns new values (Go mutates in place).

    Equality, ordering and hashing are numeric: ``Quantity("1") == Quantity("1000m")``.
    """

    __slots__ = ("_format", "_scale", "_text", "_unscaled")
    _unscaled: int
    _scale: int
    _format: Format
    _text: str | None

    def __init__(self, text: str | int | Quantity) -> None:
        if isinstance(text, Quantity):
            self._unscaled, self._scale, self._format, self._text = (
                text._unscaled,
                text._scale,
                text._format,
                text._text,
            )
            return
        if isinstance(text, bool) or not isinstance(text, str | int):
            raise QuantityError(f"a quantity is a string or an integer, not {type(text).__name__}")
        parsed = _parsed(text.strip() if isinstance(text, str) else str(text))
        self._unscaled, self._scale, self._format, self._text = (
            parsed._unscaled,
            parsed._scale,
            parsed._format,
            parsed._text,
        )

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def _make(cls, unscaled: int, scale: int, fmt: Format, text: str | None = None) -> Quantity:
        q = object.__new__(cls)
        q._unscaled, q._scale = _strip_tens(unscaled, scale) if unscaled else (0, 0)
        q._format, q._text = fmt, text
        return q

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """Go's ``ParseQuantity``: raises :class:`QuantityError` with Go's message."""
        if not text:
            raise QuantityError(_ERR_FORMAT)
        if text == "0":
            return cls._make(0, 0, Format.DECIMAL_SI, "0")
        scan = _scan(text)
        base, exponent, fmt = _interpret(scan.suffix)
        unscaled = int(scan.num + scan.denom)
        scale = -len(scan.denom)
        if not scan.positive:
            unscaled = -unscaled
        keep = _keeps_text(scan, base, exponent, fmt)
        if base == 10:
            scale += exponent
        else:
            unscaled <<= exponent
        magnitude, sign = abs(unscaled), (-1 if unscaled < 0 else 1)
        if magnitude and scale < _NANO:
            shift = _NANO - scale
            # A magnitude with fewer digits than the shift rounds up to exactly 1n.
            magnitude = 1 if len(str(magnitude)) <= shift else _ceil_div_away(magnitude, _pow10(shift))[0]
            scale = _NANO
        if fmt is Format.BINARY_SI:
            if _cmp_parts(magnitude, scale, _MAX_INT64, 0) > 0:
                magnitude, scale = _MAX_INT64, 0
            if magnitude and _cmp_parts(magnitude, scale, 1, 0) < 0:
                fmt = Format.DECIMAL_SI
        return cls._make(sign * magnitude, scale, fmt, text if keep else None)

    @classmethod
    def from_int(cls, value: int, fmt: Format = Format.DECIMAL_SI) -> Quantity:
        """Go's ``NewQuantity``."""
        return cls._make(value, 0, fmt)

    @classmethod
    def from_milli(cls, value: int, fmt: Format = Format.DECIMAL_SI) -> Quantity:
        """Go's ``NewMilliQuantity``."""
        return cls._make(value, -3, fmt)

    @classmethod
    def from_scaled(cls, value: int, scale: int) -> Quantity:
        """Go's ``NewScaledQuantity`` (always DecimalSI)."""
        return cls._make(value, scale, Format.DECIMAL_SI)

    @classmethod
    def zero(cls) -> Quantity:
        """The zero value of Go's Quantity (format unset prints as ``0``)."""
        return cls._make(0, 0, Format.DECIMAL_SI)

    # -- inspection ---------------------------------------------------------------------------

    @property
    def format(self) -> Format:
        return self._format

    def as_fraction(self) -> Fraction:
        """The exact value."""
        return Fraction(self._unscaled) * Fraction(10) ** self._scale

    def is_zero(self) -> bool:
        return self._unscaled == 0

    def sign(self) -> int:
        return (self._unscaled > 0) - (self._unscaled < 0)

    def scaled_value(self, scale: int) -> int:
        """The value in units of ``10**scale``, rounded away from zero (Go's ``ScaledValue``)."""
        shift = self._scale - scale
        if shift >= 0:
            return self._unscaled * _pow10(shift)
        return _ceil_div_away(self._unscaled, _pow10(-shift))[0]

    def value(self) -> int:
        """Whole units rounded up (Go's ``Value``): ``1100m`` -> 2."""
        return self.scaled_value(0)

    def milli_value(self) -> int:
        """Thousandths rounded up (Go's ``MilliValue``)."""
        return self.scaled_value(-3)

    # -- arithmetic (Go's format rules: a zero receiver takes the other operand's format) ----

    def __add__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        fmt = other._format if self.is_zero() else self._format
        return self._sum(other._unscaled, other._scale, fmt)

    def __sub__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        fmt = other._format if self.is_zero() else self._format
        return self._sum(-other._unscaled, other._scale, fmt)

    def _sum(self, unscaled: int, scale: int, fmt: Format) -> Quantity:
        low = min(self._scale, scale)
        total = self._unscaled * _pow10(self._scale - low) + unscaled * _pow10(scale - low)
        return Quantity._make(total, low, fmt)

    def __mul__(self, factor: int) -> Quantity:
        if isinstance(factor, bool) or not isinstance(factor, int):
            return NotImplemented
        return Quantity._make(self._unscaled * factor, self._scale, self._format)

    __rmul__ = __mul__

    def mul_checked(self, factor: int) -> tuple[Quantity, bool]:
        """Go's ``Mul``: the product, and whether it still fits Go's int64 representation."""
        product = self * factor
        unscaled, scale = product._unscaled, product._scale
        whole = unscaled * _pow10(scale) if scale > 0 else unscaled
        return product, -(2**63) <= whole <= _MAX_INT64

    def __neg__(self) -> Quantity:
        return Quantity._make(-self._unscaled, self._scale, self._format)

    def round_up(self, scale: int) -> tuple[Quantity, bool]:
        """Go's ``RoundUp``: away from zero to a multiple of ``10**scale``; says if exact."""
        if self._scale >= scale:
            return self, True
        value, exact = _ceil_div_away(self._unscaled, _pow10(scale - self._scale))
        return Quantity._make(value, scale, self._format), exact

    # -- comparison ---------------------------------------------------------------------------

    def cmp(self, other: Quantity) -> int:
        """-1, 0 or 1, as Go's ``Cmp``."""
        return _cmp_parts(self._unscaled, self._scale, other._unscaled, other._scale)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        # Trailing zeros are always stripped, so equal values have equal parts.
        return (self._unscaled, self._scale) == (other._unscaled, other._scale)

    def __lt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.cmp(other) < 0

    def __hash__(self) -> int:
        return hash((self._unscaled, self._scale))

    # -- printing -----------------------------------------------------------------------------

    def canonical(self) -> str:
        """Go's canonical form, ignoring any remembered input text."""
        if self._unscaled == 0:
            return "0"
        fmt = self._format
        if fmt is Format.BINARY_SI:
            if _cmp_parts(abs(self._unscaled), self._scale, 1024, 0) < 0:
                fmt = Format.DECIMAL_SI
            else:
                whole, exact = self.round_up(0)
                if not exact:
                    fmt = Format.DECIMAL_SI
                else:
                    number = whole.scaled_value(0)
                    power = 0
                    while abs(number) >= 1024 and number % 1024 == 0:
                        number //= 1024
                        power += 1
                    return f"{number}{_BINARY_BY_EXPONENT.get(power * 10, '')}"
        mantissa, exponent = self._unscaled, self._scale
        while exponent % 3:
            mantissa *= 10
            exponent -= 1
        if fmt is Format.DECIMAL_EXPONENT:
            return f"{mantissa}e{exponent}" if exponent else str(mantissa)
        return f"{mantissa}{_DECIMAL_BY_EXPONENT.get(exponent, '')}"

    def __str__(self) -> str:
        """Go's ``String()``: the remembered canonical input, else the canonical form."""
        return self._text if self._text is not None else self.canonical()

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    # -- pydantic -----------------------------------------------------------------------------

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        def validate(value: Any) -> Quantity:
            try:
                return value if isinstance(value, Quantity) else Quantity(value)
            except QuantityError as err:
                raise ValueError(str(err)) from err

        return core_schema.no_info_plain_validator_function(
            validate, serialization=core_schema.plain_serializer_function_ser_schema(str)
        )


def is_quantity(value: object) -> bool:
    """Whether Go would accept ``value`` (a JSON string or integer) as a quantity."""
    try:
        Quantity(value)  # type: ignore[arg-type]
    except QuantityError:
        return False
    return True


# Quantities repeat across objects (every Pod of a Deployment requests the same "250m" and
# "512Mi"): a list of 100,000 Pods parsed the same few texts hundreds of thousands of times,
# about half of the ElasticQuota transform's work per Pod. A Quantity is immutable, so one
# parsed value per text serves every constructor (an invalid text raises each time: errors are
# not cached).
_parsed = functools.lru_cache(maxsize=4096)(Quantity.parse)
