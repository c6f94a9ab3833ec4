"""The model base class and the schema markers every API module uses.

Why a shared base: each API object must (1) keep every field a user wrote, including fields
this version does not know (``extra="allow"``: unknown keys ride along at every depth and are
dumped back unchanged), (2) serialize only what was set, which is what server-side apply needs,
and (3) carry, next to its Python types, the facts ``crdgen`` turns into the CRD schema (list
types, map keys, CEL rules, formats). The markers below are plain frozen dataclasses put in
``Annotated[...]`` metadata, so the model stays the single source of truth.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, Self, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr, model_validator
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo

from manager.meta.quantity import Quantity, QuantityError

__all__ = [
    "Bool",
    "CoreRef",
    "Ext",
    "Float",
    "Int",
    "Int32",
    "Int64",
    "IntOrString",
    "KindModel",
    "Model",
    "QuantityValue",
    "ResourceList",
    "Rule",
    "Str",
    "StringList",
    "StringMap",
    "Time",
]


@dataclass(frozen=True)
class Rule:
    """A CEL ``x-kubernetes-validations`` entry, with the message users see on a 422."""

    rule: str
    message: str


@dataclass(frozen=True)
class Ext:
    """Kubernetes schema facts that Python types cannot express.

    ``list_type``/``map_keys`` drive server-side apply merging; ``rules`` are CEL rules on the
    annotated value; ``format``/``int_or_string``/``pattern`` refine the JSON type.
    """

    list_type: Literal["atomic", "set", "map"] | None = None
    map_keys: tuple[str, ...] = ()
    map_type: Literal["atomic", "granular"] | None = None
    rules: tuple[Rule, ...] = ()
    min_properties: int | None = None
    format: str | None = None
    int_or_string: bool = False
    pattern: str | None = None


@dataclass(frozen=True)
class CoreRef:
    """A value whose schema is a Kubernetes core type, taken from the OpenAPI snapshot.

    The Python value is the plain JSON mapping (``dict``), kept exactly as written; typed
    accessors live in ``trainer.api.core``.
    """

    name: str


QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?"
    r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def _check_quantity(value: int | str) -> int | str:
    try:
        Quantity(value)
    except QuantityError as err:
        raise ValueError(f"invalid quantity {value!r}: {err}") from err
    return value


Str = StrictStr
Bool = StrictBool
Int = StrictInt
Float = float
Int32 = Annotated[StrictInt, Ext(format="int32")]
Int64 = Annotated[StrictInt, Ext(format="int64")]
IntOrString = Annotated[StrictInt | StrictStr, Ext(int_or_string=True)]
# Kept as written (``"1000m"`` stays ``"1000m"``); parse with ``Quantity(value)`` to compute.
QuantityValue = Annotated[
    StrictInt | StrictStr, AfterValidator(_check_quantity), Ext(int_or_string=True, pattern=QUANTITY_PATTERN)
]
ResourceList = dict[str, QuantityValue]
StringMap = dict[str, StrictStr]
StringList = list[StrictStr]
# metav1.Time as its RFC 3339 text, so a round trip never reformats it.
Time = Annotated[StrictStr, Ext(format="date-time")]


class Model(BaseModel):
    """Base of every API struct: JSON names, unknown fields kept, unset fields omitted."""

    model_config = ConfigDict(
        extra="allow",
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        alias_generator=to_camel,
        validate_assignment=True,
        protected_namespaces=(),
        # Attribute docstrings are the field descriptions crdgen writes into the CRDs.
        use_attribute_docstrings=True,
    )

    # CEL rules and minProperties on the object type itself (controller-gen's type markers).
    k8s_rules: ClassVar[tuple[Rule, ...]] = ()
    k8s_min_properties: ClassVar[int | None] = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: only fields that were set, unknown fields included, by JSON name."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Load a JSON object; errors name the field path (``spec.runtimeRef.name``) and why."""
        return cls.model_validate(data)

    @classmethod
    def from_go(cls, data: Mapping[str, Any]) -> Self:
        """The model as a Go struct holds ``data`` after ``json.Unmarshal``: none of the schema's
        constraints checked (required fields, lengths, enums: the CRD's, which the API server
        checks), a required field that is absent or null at its type's zero value (``""``, 0,
        an empty list or struct; not set, so ``to_dict`` leaves it out as ``json.Marshal``
        leaves out the Trainer API's ``omitempty`` fields), every other field as given.

        Why: a webhook sent an object straight (not through the API server) has only been
        decoded, and Go's validators then judge the zero values; ``from_dict`` would refuse such
        an object in pydantic's words (found by admission fuzzing: an old TrainJob without
        ``runtimeRef``, a ``podTemplateOverrides`` entry without ``targetJobs``). Only for JSON
        that passed the Go decode (``trainer.api.gocodec``): values are not type-checked."""
        plan = _go_plan(cls)
        values: dict[str, Any] = {}
        fields_set: set[str] = set()
        for name, key, convert, zero, default in plan.fields:
            value = data.get(key)
            if value is not None:
                values[name] = value if convert is None else convert(value)
                fields_set.add(name)
            elif zero is not None:
                values[name] = zero()
            elif default is None:
                values[name] = None
            else:
                values[name] = default()
        extra = {key: value for key, value in data.items() if key not in plan.keys and key not in values}
        if extra:
            fields_set.update(extra)
        # What ``model_construct`` does with these values, without its second walk over the fields
        # (``_GoPlan.direct``: checked once per class that nothing else is needed).
        if not plan.direct:
            return cls.model_construct(fields_set, **values, **extra)
        model = cls.__new__(cls)
        _set(model, "__dict__", values)
        _set(model, "__pydantic_fields_set__", fields_set)
        _set(model, "__pydantic_extra__", extra)
        _set(model, "__pydantic_private__", None)
        return model


_set = object.__setattr__

# How ``Model.from_go`` reads a value of one field type: None when the JSON value is kept as it is.
_Convert = Callable[[Any], Any] | None


@dataclass(frozen=True)
class _GoPlan:
    """``Model.from_go`` for one class, worked out once from its fields (the per-call type
    inspection and ``model_construct``'s own walk were most of an admission answer's model
    building): per field its Python name, JSON key, how its value is read, how its Go zero
    value is made when it is required, and how its default is made when it is not (None: the
    default is None)."""

    fields: tuple[tuple[str, str, _Convert, Callable[[], Any] | None, Callable[[], Any] | None], ...]
    keys: frozenset[str]
    direct: bool
    """The instance can be assembled straight from the values, as ``model_construct`` would:
    no post-init hook or private attributes, not a root model."""


@functools.cache
def _go_plan(cls: type[Model]) -> _GoPlan:
    fields = tuple(
        (
            name,
            info.alias or name,
            _go_converter(info.annotation),
            _go_zero(info.annotation) if info.is_required() else None,
            None if info.is_required() else _default(info),
        )
        for name, info in cls.model_fields.items()
    )
    direct = (
        cls.__pydantic_post_init__ is None
        and not cls.__private_attributes__
        and not cls.__pydantic_root_model__
        and cls.model_config.get("extra") == "allow"
    )
    return _GoPlan(fields, frozenset(key for _name, key, *_rest in fields), direct)


def _default(info: FieldInfo) -> Callable[[], Any] | None:
    """What makes a field's default as ``model_construct`` does (a fresh copy of a mutable one);
    None for the common ``= None``."""
    if info.default is None and info.default_factory is None:
        return None
    return lambda: info.get_default(call_default_factory=True, validated_data={})


def _model_class(tp: Any) -> type[Model] | None:
    return tp if isinstance(tp, type) and issubclass(tp, Model) else None


def _bare(tp: Any) -> Any:
    """The type without ``Annotated`` and ``| None``."""
    while True:
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
        elif get_origin(tp) in (Union, types.UnionType):
            args = [a for a in get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def _go_converter(tp: Any) -> _Convert:
    """How ``from_go`` holds decoded JSON in a field of type ``tp``: a nested model through its
    own ``from_go``, a list's or map's null items at their zero value; None: as given."""
    tp = _bare(tp)
    origin = get_origin(tp)
    if (model := _model_class(tp)) is not None:
        return lambda value: model.from_go(value) if isinstance(value, Mapping) else value
    if origin is list:
        (item,) = get_args(tp)
        convert, zero = _go_converter(item), _go_zero(item)

        def as_list(value: Any) -> Any:
            if not isinstance(value, list):
                return value
            return [zero() if v is None else v if convert is None else convert(v) for v in value]

        return as_list
    if origin is dict:
        item = get_args(tp)[1]
        convert, zero = _go_converter(item), _go_zero(item)

        def as_map(value: Any) -> Any:
            if not isinstance(value, dict):
                return value
            return {
                k: zero() if v is None else v if convert is None else convert(v) for k, v in value.items()
            }

        return as_map
    return None


def _go_zero(tp: Any) -> Callable[[], Any]:
    """What makes Go's zero value of a field of type ``tp``, as the model holds it (a fresh one
    per call: the models are mutable)."""
    tp = _bare(tp)
    origin = get_origin(tp)
    if (model := _model_class(tp)) is not None:
        return lambda: model.from_go({})
    if origin is list or tp is list:
        return list
    if origin is dict or tp is dict:
        return dict
    if origin is Literal:
        return str
    if origin in (Union, types.UnionType):  # an int-or-string: Go's IntOrString zero is the int 0
        return int
    zero = {str: "", int: 0, float: 0.0, bool: False}.get(tp)
    return lambda: zero


class KindModel(Model):
    """A top-level object. ``api_version`` and ``kind`` class attributes name its type.

    ``apiVersion`` and ``kind`` are always serialized, because every apply document and every
    create needs them.
    """

    api_version: ClassVar[str]
    kind: ClassVar[str]
    # Served resource facts crdgen needs (names, scope, columns, subresources).
    plural: ClassVar[str]
    singular: ClassVar[str]
    namespaced: ClassVar[bool] = True
    short_names: ClassVar[tuple[str, ...]] = ()
    categories: ClassVar[tuple[str, ...]] = ()
    printer_columns: ClassVar[tuple[dict[str, str], ...]] = ()
    status_subresource: ClassVar[bool] = False
    crd_annotations: ClassVar[dict[str, str]] = {}

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        return {"apiVersion": self.api_version, "kind": self.kind, **data}

    @model_validator(mode="before")
    @classmethod
    def _same_kind(cls, data: Any) -> Any:
        """Refuse another kind's object, however the model is validated."""
        if isinstance(data, dict):
            for key, want in (("apiVersion", cls.api_version), ("kind", cls.kind)):
                got = data.get(key)
                if got is not None and got != want:
                    raise ValueError(f"{key}: Invalid value: {got!r}: expected {want!r} for {cls.__name__}")
        return data

    @classmethod
    def group(cls) -> str:
        return cls.api_version.rpartition("/")[0]

    @classmethod
    def version(cls) -> str:
        return cls.api_version.rpartition("/")[2]
