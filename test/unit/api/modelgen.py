"""Hypothesis strategies that build random valid JSON objects for any API model.

The strategy is derived from the model's own types and constraints, and it adds random unknown
fields at every object level (model or pass-through core mapping), so a round trip proves that
nothing a user wrote can be lost.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from hypothesis import strategies as st
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from trainer.api.base import QUANTITY_PATTERN, CoreRef, Ext

JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.text(max_size=8))
JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
# Unknown keys never collide with a known JSON name or Python field name.
UNKNOWN_KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=6).map(lambda s: "zz" + s)
QUANTITIES = st.one_of(
    st.integers(0, 10**6),
    st.sampled_from(
        ["1", "500m", "1.5Gi", "1000m", "2Ki", "1e3", "0.1", "+3", "128974848", "129e6", "123Mi"]
    ),
)


def unknown_fields() -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(UNKNOWN_KEYS, JSON, max_size=2)


def core_object() -> st.SearchStrategy[dict[str, Any]]:
    """A pass-through core object: any JSON object, nested objects included."""
    return st.dictionaries(st.text(min_size=1, max_size=6), JSON, max_size=3)


def _split(tp: Any) -> tuple[Any, list[Any]]:
    metadata: list[Any] = []
    while True:
        if get_origin(tp) is typing.Annotated:
            args = get_args(tp)
            tp, metadata = args[0], [*args[1:], *metadata]
        elif get_origin(tp) in (Union, types.UnionType) and type(None) in get_args(tp):
            rest = [a for a in get_args(tp) if a is not type(None)]
            tp = rest[0] if len(rest) == 1 else Union[tuple(rest)]  # noqa: UP007
        else:
            return tp, metadata


def _flatten(metadata: list[Any]) -> list[Any]:
    out: list[Any] = []
    for m in metadata:
        out.extend(_flatten(list(m.metadata)) if isinstance(m, FieldInfo) else [m])
    return out


def for_type(tp: Any, extra: list[Any] | None = None) -> st.SearchStrategy[Any]:
    tp, metadata = _split(tp)
    meta = _flatten([*metadata, *(extra or [])])
    ext = [m for m in meta if isinstance(m, Ext)]
    if any(isinstance(m, CoreRef) for m in meta):
        return core_object()
    if any(e.pattern == QUANTITY_PATTERN for e in ext):
        return QUANTITIES
    if any(e.int_or_string for e in ext):
        return st.one_of(st.integers(1, 64), st.sampled_from(["auto", "cpu", "gpu"]))
    if tp is Any:
        return JSON
    origin = get_origin(tp)
    if origin is Literal:
        return st.sampled_from(get_args(tp))
    if origin in (Union, types.UnionType):
        return st.one_of([for_type(a) for a in get_args(tp)])
    min_len = next((m.min_length for m in meta if isinstance(m, annotated_types.MinLen)), 0)
    max_len = next((m.max_length for m in meta if isinstance(m, annotated_types.MaxLen)), None)
    if origin is list:
        (item,) = get_args(tp)
        return st.lists(for_type(item), min_size=min_len, max_size=min(max_len or 3, 3))
    if origin is dict:
        _, value = get_args(tp)
        return st.dictionaries(st.text(min_size=1, max_size=6), for_type(value), max_size=3)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return model_object(tp)
    if tp is bool:
        return st.booleans()
    if tp is float:
        return st.floats(allow_nan=False, allow_infinity=False, width=32)
    if tp is int:
        low = next((int(m.ge) for m in meta if isinstance(m, annotated_types.Ge)), None)
        if any(e.format == "int32" for e in ext):
            return st.integers(max(low if low is not None else -(2**31), -(2**31)), 2**31 - 1)
        return st.integers(min_value=low, max_value=2**53)
    if tp is str:
        pattern = next((getattr(m, "pattern", None) for m in meta if getattr(m, "pattern", None)), None)
        if pattern:
            limit = max_len or 64
            return st.from_regex(pattern, fullmatch=True).filter(lambda s: min_len <= len(s) <= limit)
        return st.text(min_size=max(min_len, 0), max_size=min(max_len or 12, 12))
    raise TypeError(f"no strategy for {tp!r}")


@st.composite
def model_object(draw: st.DrawFn, model: type[BaseModel]) -> dict[str, Any]:
    """A JSON object for ``model``: required fields always, optional ones sometimes, unknown extras."""
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if not info.is_required() and not draw(st.booleans()):
            continue
        out[info.alias or name] = draw(for_type(info.annotation, list(info.metadata)))
    out.update(draw(unknown_fields()))
    return out


def kind_object(model: Any) -> st.SearchStrategy[dict[str, Any]]:
    """A full top-level object, ``apiVersion`` and ``kind`` included."""
    return model_object(model).map(lambda o: {**o, "apiVersion": model.api_version, "kind": model.kind})
