"""Generate CustomResourceDefinitions from the API models (our controller-gen).

The models are the single source of truth: Python types give JSON types, ``Literal`` gives
enums, field defaults give ``default:``, pydantic constraints give min/max/pattern, and the
``Ext``/``Rule`` markers give list types, map keys and CEL rules. Embedded core types
(``CoreRef``) are converted from the Kubernetes OpenAPI v3 snapshot the way controller-gen
renders them:

* ``$ref``/``allOf`` are inlined; ObjectMeta inside templates becomes the five fields a CRD keeps
  (``generateEmbeddedObjectMeta``); Quantity and IntOrString become int-or-string schemas;
  metav1.Time becomes ``string``/``date-time``;
* ``x-kubernetes-list-type``, ``-list-map-keys`` and ``-map-type`` are kept as Kubernetes has
  them, so server-side apply merges pod templates as it merges Pods;
* defaults are kept only where Kubernetes declares one on an optional field (``protocol: TCP``,
  ``LocalObjectReference.name: ""``); the zero-value and ``{}`` defaults the OpenAPI generator
  adds to required fields and nested structs are dropped, as controller-gen never emits them;
* ``enum`` (from ``+enum``), descriptions and patch-strategy extensions are dropped, as in the
  upstream CRDs.

``python -m trainer.api.crdgen [DIR]`` writes ``<group>_<plural>.yaml`` files (``make manifests``)
from the v2.1 models and the v1.34 snapshot; ``--models=trainer.api.v2_3`` takes another API
level's models package instead (its ``CRD_KINDS`` with its ``OPENAPI_SNAPSHOT``).
"""

from __future__ import annotations

import importlib
import json
import sys
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from trainer.api import trainer_constants as tc
from trainer.api.base import QUANTITY_PATTERN, CoreRef, Ext, KindModel
from trainer.api.core import OBJECT_META, EmbeddedObjectMeta, ObjectMeta
from trainer.api.kinds import CRD_KINDS as CRD_KINDS  # the v2.1 kinds, crdgen's default
from trainer.api.openapi import SNAPSHOT, definitions

Schema = dict[str, Any]

DEFAULT_DIR = Path("config/crd/bases")

_INT_OR_STRING: Schema = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "x-kubernetes-int-or-string": True,
}
_SPECIAL_CORE: dict[str, Schema] = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {**_INT_OR_STRING, "pattern": QUANTITY_PATTERN},
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": _INT_OR_STRING,
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": {"type": "string", "format": "date-time"},
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": {"type": "string", "format": "date-time"},
}
_KEPT_CORE_KEYS = (
    "description",
    "type",
    "format",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
)
_REF_PREFIX = "#/components/schemas/"

# Two places where controller-gen renders Go markers the apiserver's OpenAPI cannot show:
# defaults written as ``+default=ref(...)`` (controller-gen ignores them), and structs that
# inline the atomic LocalObjectReference (controller-gen makes the parent atomic too).
# Also ignored: the zero-value default the OpenAPI generator gives a field without
# ``omitempty`` that is ``+optional`` (no marker, so controller-gen writes none):
# PodFailurePolicyOnPodConditionsPattern.status turned optional in Kubernetes 1.36.
_CONTROLLER_GEN_IGNORED_DEFAULTS = frozenset(
    {
        ("io.k8s.api.core.v1.AzureDiskVolumeSource", "cachingMode"),
        ("io.k8s.api.core.v1.AzureDiskVolumeSource", "kind"),
        ("io.k8s.api.batch.v1.PodFailurePolicyOnPodConditionsPattern", "status"),
    }
)
_INLINES_ATOMIC_LOCAL_OBJECT_REFERENCE = frozenset(
    {
        "io.k8s.api.core.v1.ConfigMapVolumeSource",
        "io.k8s.api.core.v1.ConfigMapProjection",
        "io.k8s.api.core.v1.SecretProjection",
        "io.k8s.api.core.v1.ConfigMapEnvSource",
        "io.k8s.api.core.v1.SecretEnvSource",
    }
)


class CrdGenError(TypeError):
    """A model uses a Python type crdgen cannot map to a structural schema."""


# -- core types from the OpenAPI snapshot -----------------------------------------------------


def core_schema(name: str, snapshot: str = SNAPSHOT) -> Schema:
    """The CRD schema of a Kubernetes OpenAPI type, by its OpenAPI name, from ``snapshot``."""
    if name in _SPECIAL_CORE:
        return dict(_SPECIAL_CORE[name])
    if name == OBJECT_META:
        return model_schema(EmbeddedObjectMeta, snapshot)
    try:
        source = definitions(snapshot)[name]
    except KeyError:
        raise CrdGenError(f"{name} is not in the OpenAPI snapshot {snapshot}; add it to its roots") from None
    schema = _convert(source, snapshot, name)
    if name in _INLINES_ATOMIC_LOCAL_OBJECT_REFERENCE:
        schema["x-kubernetes-map-type"] = "atomic"
    return schema


def _ref_name(node: Schema) -> str | None:
    if "$ref" in node:
        return str(node["$ref"]).removeprefix(_REF_PREFIX)
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and "$ref" in all_of[0]:
        return str(all_of[0]["$ref"]).removeprefix(_REF_PREFIX)
    return None


def _is_kept_default(value: Any) -> bool:
    return not isinstance(value, dict | list)


def _convert(node: Schema, snapshot: str, owner: str = "") -> Schema:
    """Convert one OpenAPI node; ``owner`` names the type whose properties these are."""
    ref = _ref_name(node)
    out: Schema = core_schema(ref, snapshot) if ref else {}
    for key in _KEPT_CORE_KEYS:
        if key in node:
            out[key] = node[key]
    if "items" in node:
        out["items"] = _convert(node["items"], snapshot)
    if "additionalProperties" in node and isinstance(node["additionalProperties"], dict):
        out["additionalProperties"] = _convert(node["additionalProperties"], snapshot)
    if "properties" in node:
        required = set(node.get("required", ()))
        props: Schema = {}
        for prop, sub in node["properties"].items():
            converted = _convert(sub, snapshot)
            if (
                "default" in sub
                and prop not in required
                and _is_kept_default(sub["default"])
                and (owner, prop) not in _CONTROLLER_GEN_IGNORED_DEFAULTS
            ):
                converted["default"] = sub["default"]
            props[prop] = converted
        out["properties"] = props
    if node.get("required"):
        out["required"] = sorted(node["required"])
    return out


# -- model types ------------------------------------------------------------------------------


def _split_annotated(tp: Any) -> tuple[Any, list[Any]]:
    metadata: list[Any] = []
    while get_origin(tp) is typing.Annotated:
        args = get_args(tp)
        tp, metadata = args[0], [*args[1:], *metadata]
    return tp, metadata


def _unwrap_optional(tp: Any) -> Any:
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _flatten(metadata: Iterable[Any]) -> list[Any]:
    flat: list[Any] = []
    for item in metadata:
        if isinstance(item, FieldInfo):
            flat.extend(_flatten(item.metadata))
        else:
            flat.append(item)
    return flat


def _apply(schema: Schema, metadata: Iterable[Any]) -> Schema:
    """Apply markers and constraints to a schema already built for the bare type."""
    for item in _flatten(metadata):
        if isinstance(item, Ext):
            if item.list_type:
                schema["x-kubernetes-list-type"] = item.list_type
            if item.map_keys:
                schema["x-kubernetes-list-map-keys"] = list(item.map_keys)
            if item.map_type:
                schema["x-kubernetes-map-type"] = item.map_type
            if item.rules:
                rules = schema.setdefault("x-kubernetes-validations", [])
                rules.extend({"rule": r.rule, "message": r.message} for r in item.rules)
            if item.min_properties is not None:
                schema["minProperties"] = item.min_properties
            if item.format:
                schema["format"] = item.format
            if item.pattern:
                schema["pattern"] = item.pattern
        elif isinstance(item, annotated_types.MinLen):
            schema["minItems" if schema.get("type") == "array" else "minLength"] = item.min_length
        elif isinstance(item, annotated_types.MaxLen):
            schema["maxItems" if schema.get("type") == "array" else "maxLength"] = item.max_length
        elif isinstance(item, annotated_types.Ge):
            schema["minimum"] = item.ge
        elif isinstance(item, annotated_types.Le):
            schema["maximum"] = item.le
        elif getattr(item, "pattern", None) is not None:
            schema["pattern"] = item.pattern
    return schema


def type_schema(tp: Any, extra: Iterable[Any] = (), snapshot: str = SNAPSHOT) -> Schema:
    """The schema of an annotation (``Annotated``, optional, list, dict, model, scalar).

    ``extra`` is metadata pydantic already split off a field's top-level ``Annotated``; core
    types come from the OpenAPI ``snapshot``.
    """
    tp, metadata = _split_annotated(_unwrap_optional(tp))
    tp = _unwrap_optional(tp)
    flat = _flatten([*metadata, *extra])
    refs = [m for m in flat if isinstance(m, CoreRef)]
    if refs:
        return _apply(core_schema(refs[0].name, snapshot), flat)
    if any(isinstance(m, Ext) and m.int_or_string for m in flat):
        return _apply(dict(_INT_OR_STRING), flat)
    return _apply(_bare_schema(tp, snapshot), flat)


def _bare_schema(tp: Any, snapshot: str) -> Schema:
    origin = get_origin(tp)
    if origin is Literal:
        values = list(get_args(tp))
        kinds = {type(v) for v in values}
        if kinds != {str}:
            raise CrdGenError(f"only string enums are supported: {tp}")
        return {"type": "string", "enum": values}
    if origin is list:
        (item,) = get_args(tp)
        return {"type": "array", "items": type_schema(item, snapshot=snapshot)}
    if origin is dict:
        key, value = get_args(tp)
        if key is not str:
            raise CrdGenError(f"map keys must be strings: {tp}")
        return {"type": "object", "additionalProperties": type_schema(value, snapshot=snapshot)}
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return model_schema(tp, snapshot)
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    raise CrdGenError(f"no schema for {tp!r}")


def _field_schema(info: FieldInfo, snapshot: str) -> Schema:
    schema = type_schema(info.annotation, info.metadata, snapshot)
    if info.description:
        schema["description"] = " ".join(info.description.split())
    default = info.default
    if default is not PydanticUndefined and default is not None and _is_kept_default(default):
        schema["default"] = default
    return schema


def model_schema(model: type[BaseModel], snapshot: str = SNAPSHOT) -> Schema:
    """The object schema of a model: properties by JSON name, required, type-level rules.

    A model without fields is ``type: object`` alone, as controller-gen renders an empty struct.
    """
    if model is ObjectMeta:
        return {"type": "object"}
    properties: Schema = {}
    required: list[str] = []
    for name, info in model.model_fields.items():
        json_name = info.alias or name
        properties[json_name] = _field_schema(info, snapshot)
        if info.is_required():
            required.append(json_name)
    schema: Schema = {"type": "object"}
    if properties:
        schema["properties"] = properties
    if required:
        schema["required"] = sorted(required)
    rules = getattr(model, "k8s_rules", ())
    if rules:
        schema["x-kubernetes-validations"] = [{"rule": r.rule, "message": r.message} for r in rules]
    min_properties = getattr(model, "k8s_min_properties", None)
    if min_properties is not None:
        schema["minProperties"] = min_properties
    return schema


# -- CRDs -------------------------------------------------------------------------------------


_TYPE_META = {
    "apiVersion": {
        "type": "string",
        "description": "Versioned schema of this representation of the object; the server may convert it.",
    },
    "kind": {"type": "string", "description": "REST resource this object represents, in CamelCase."},
}


def root_schema(kind: type[KindModel], snapshot: str = SNAPSHOT) -> Schema:
    schema = model_schema(kind, snapshot)
    schema["properties"] = {**_TYPE_META, **schema["properties"]}
    if kind.__doc__:
        schema["description"] = " ".join(kind.__doc__.split())
    return schema


def crd(kind: type[KindModel], snapshot: str = SNAPSHOT) -> Schema:
    """The CustomResourceDefinition of one kind, its core types from the OpenAPI ``snapshot``."""
    names: Schema = {
        "kind": kind.kind,
        "listKind": f"{kind.kind}List",
        "plural": kind.plural,
        "singular": kind.singular,
    }
    if kind.short_names:
        names["shortNames"] = list(kind.short_names)
    if kind.categories:
        names["categories"] = list(kind.categories)
    version: Schema = {
        "name": kind.version(),
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": root_schema(kind, snapshot)},
    }
    if kind.printer_columns:
        version["additionalPrinterColumns"] = [dict(col) for col in kind.printer_columns]
    if kind.status_subresource:
        version["subresources"] = {"status": {}}
    metadata: Schema = {"name": f"{kind.plural}.{kind.group()}"}
    if kind.crd_annotations:
        metadata["annotations"] = dict(kind.crd_annotations)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": {
            "group": kind.group(),
            "names": names,
            "scope": "Namespaced" if kind.namespaced else "Cluster",
            "versions": [version],
        },
    }


def with_trainjob_status(document: Schema) -> Schema:
    """The TrainJobStatus gate's TrainJob CRD: ``status.trainerStatus`` and Progress/ETA columns.

    Derived from the default CRD so that everything else (the State column included) stays
    whatever the models say.
    """
    from trainer.api.trainjob_progress_v1alpha1 import PROGRESS_PRINTER_COLUMNS, TrainerStatus

    out: Schema = json.loads(json.dumps(document))
    version = out["spec"]["versions"][0]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    if "trainerStatus" in status.get("properties", {}):
        raise ValueError(
            "this TrainJob CRD has status.trainerStatus already (the TrainJobStatus gate is for v2.1)"
        )
    trainer_status = model_schema(TrainerStatus)
    trainer_status["description"] = (
        "trainerStatus contains the latest observed runtime status of the Trainer step of the "
        "TrainJob: progress, remaining time, metrics and the last update timestamp "
        "(TrainJobStatus feature gate)."
    )
    status.setdefault("properties", {})["trainerStatus"] = trainer_status
    columns = list(version.get("additionalPrinterColumns") or [])
    age = next((i for i, col in enumerate(columns) if col.get("name") == "Age"), len(columns))
    columns[age:age] = [dict(col) for col in PROGRESS_PRINTER_COLUMNS]
    version["additionalPrinterColumns"] = columns
    return out


def file_name(kind: type[KindModel]) -> str:
    return f"{kind.group()}_{kind.plural}.yaml"


def _dump(document: Schema) -> str:
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    body = yaml.dump(document, Dumper=dumper, sort_keys=True, default_flow_style=False, width=100)
    return "---\n" + body


def render(kind: type[KindModel], snapshot: str = SNAPSHOT) -> str:
    """The YAML text of a CRD, byte-stable (sorted keys) so a stale file is a diff."""
    return _dump(crd(kind, snapshot))


def with_trainjob_state(document: Schema) -> Schema:
    """The TrainJobState gate's TrainJob CRD: ``status.state`` and a ``State`` column reading it.

    Upstream's column (the last condition's type) shows ``Suspended`` for a resumed TrainJob and
    nothing for a running one; the controller writes the derived state (trainer/controllers/state.py, values in
    trainer_constants.TrainJobStates).
    """
    out: Schema = json.loads(json.dumps(document))
    version = out["spec"]["versions"][0]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    status.setdefault("properties", {})["state"] = {
        "description": (
            "state is the TrainJob's lifecycle state derived from its conditions and its JobSet: "
            "Pending, Suspended, Running, Complete or Failed (TrainJobState feature gate)."
        ),
        "enum": list(tc.TrainJobStates),
        "type": "string",
    }
    for column in version.get("additionalPrinterColumns") or []:
        if column.get("name") == "State":
            column["jsonPath"] = ".status.state"
    return out


#: Feature gates that change CRDs, in the order their changes are applied.
GATED_VARIANTS = ("TrainJobStatus", "TrainJobState")


def generate(
    gates: frozenset[str] = frozenset(),
    *,
    kinds: tuple[type[KindModel], ...] = CRD_KINDS,
    snapshot: str = SNAPSHOT,
) -> dict[str, str]:
    """File name -> YAML text for every CRD; with ``gates`` only the CRDs those gates change.

    ``kinds`` and ``snapshot`` are one API level's models and the OpenAPI snapshot of the
    Kubernetes minor they embed (the v2.1 models and ``k8s-v1.34.json`` unless given).
    """
    if not gates:
        return {file_name(kind): render(kind, snapshot) for kind in kinds}
    unknown = sorted(gates - set(GATED_VARIANTS))
    if unknown:
        raise ValueError(f"no CRD variant for feature gate(s): {', '.join(unknown)}")
    trainjob = next((kind for kind in kinds if kind.kind == tc.TrainJobKind), None)
    if trainjob is None:
        raise ValueError("the feature-gated CRD variants change the TrainJob CRD; these models have none")
    document = crd(trainjob, snapshot)
    if "TrainJobStatus" in gates:
        document = with_trainjob_status(document)
    if "TrainJobState" in gates:
        document = with_trainjob_state(document)
    return {file_name(trainjob): _dump(document)}


def write(
    directory: Path = DEFAULT_DIR,
    gates: frozenset[str] = frozenset(),
    *,
    kinds: tuple[type[KindModel], ...] = CRD_KINDS,
    snapshot: str = SNAPSHOT,
) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in generate(gates, kinds=kinds, snapshot=snapshot).items():
        path = directory / name
        path.write_text(text)
        written.append(path)
    return written


def models(module: str) -> tuple[tuple[type[KindModel], ...], str]:
    """The kinds and OpenAPI snapshot an API models package declares (``CRD_KINDS``, ``OPENAPI_SNAPSHOT``)."""
    package = importlib.import_module(module)
    try:
        return tuple(package.CRD_KINDS), str(package.OPENAPI_SNAPSHOT)
    except AttributeError as err:
        raise ValueError(f"{module} declares no CRD_KINDS and OPENAPI_SNAPSHOT") from err


def main(argv: list[str] | None = None) -> int:
    """``python -m trainer.api.crdgen [--models=trainer.api.v2_3] [--feature-gates=G=true] [DIR]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    gates: frozenset[str] = frozenset()
    kinds, snapshot = CRD_KINDS, SNAPSHOT
    for arg in list(args):
        if arg.startswith("--feature-gates="):
            args.remove(arg)
            pairs = (p.split("=", 1) for p in arg.split("=", 1)[1].split(",") if p)
            gates = frozenset(name for name, value in pairs if value.lower() == "true")
        elif arg.startswith("--models="):
            args.remove(arg)
            kinds, snapshot = models(arg.split("=", 1)[1])
    for path in write(Path(args[0]) if args else DEFAULT_DIR, gates, kinds=kinds, snapshot=snapshot):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
