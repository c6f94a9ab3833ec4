"""Kubernetes strategic merge patch, the subset a TrainJob's ``podTemplateOverrides`` needs.

Why our own: no Python client ships an SMP engine, and the JobSet the Trainer builds must be
the one upstream builds by calling ``strategicpatch.StrategicMergePatch`` on a core/v1
``PodTemplateSpec``. Semantics implemented (apimachinery v0.34):

* maps merge recursively, a ``None`` in the patch deletes the key;
* a list whose field carries ``patchMergeKey`` merges item by item on that key (an item of the
  patch merges into the original item with the same key, or is added), then the items are
  ordered as ``normalizeElementOrder``/``mergeSortedSlice`` order them (see ``_order``);
* every other list (tolerations, affinity term lists, command, args) is replaced.

The merge keys are the ``patchMergeKey`` tags of the core/v1 types reachable from a
``PodTemplateSpec``. ``$patch``/``$retainKeys`` directives are not supported: overrides never
produce them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from manager.meta.object import Json

__all__ = ["CONTAINER", "JOB_TEMPLATE_SPEC", "POD_SPEC", "POD_TEMPLATE_SPEC", "Schema", "strategic_merge"]


@dataclass(frozen=True)
class Schema:
    """Where lists merge by key: ``lists`` maps a field to (merge key, item schema)."""

    lists: Mapping[str, tuple[str, Schema | None]] = field(default_factory=dict)
    fields: Mapping[str, Schema] = field(default_factory=dict)


CONTAINER = Schema(
    lists={
        "env": ("name", None),
        "volumeMounts": ("mountPath", None),
        "ports": ("containerPort", None),
        "volumeDevices": ("devicePath", None),
    }
)
POD_SPEC = Schema(
    lists={
        "containers": ("name", CONTAINER),
        "initContainers": ("name", CONTAINER),
        "ephemeralContainers": ("name", CONTAINER),
        "volumes": ("name", None),
        "imagePullSecrets": ("name", None),
        "schedulingGates": ("name", None),
        "hostAliases": ("ip", None),
        "topologySpreadConstraints": ("topologyKey", None),
        "resourceClaims": ("name", None),
    }
)
POD_TEMPLATE_SPEC = Schema(fields={"spec": POD_SPEC})
JOB_TEMPLATE_SPEC = Schema(fields={"spec": Schema(fields={"template": POD_TEMPLATE_SPEC})})
"""batch/v1 JobTemplateSpec: its pod template merges as a PodTemplateSpec."""


def strategic_merge(original: Json, patch: Json, schema: Schema) -> Json:
    """A new document: ``patch`` applied to ``original`` as a strategic merge patch."""
    result = copy.deepcopy(dict(original))
    _merge_map(result, patch, schema)
    return result


def _merge_map(target: Json, patch: Mapping[str, Any], schema: Schema | None) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
            continue
        list_rule = schema.lists.get(key) if schema else None
        if isinstance(value, list):
            current = target.get(key)
            if list_rule and isinstance(current, list):
                target[key] = _merge_list(current, value, list_rule[0], list_rule[1])
            else:
                target[key] = _clean(value)
            continue
        if isinstance(value, Mapping):
            current = target.get(key)
            if not isinstance(current, dict):
                current = {}
                target[key] = current
            _merge_map(current, value, schema.fields.get(key) if schema else None)
            continue
        target[key] = value


def _clean(value: Any) -> Any:
    """A patch value added where nothing was: a copy without the deleting ``None``s."""
    if isinstance(value, Mapping):
        return {k: _clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _merge_list(original: list[Any], patch: list[Any], key: str, item_schema: Schema | None) -> list[Any]:
    merged = copy.deepcopy(original)
    for item in patch:
        if not isinstance(item, Mapping):
            merged.append(item)
            continue
        for index, existing in enumerate(merged):
            if isinstance(existing, dict) and existing.get(key) == item.get(key):
                _merge_map(existing, item, item_schema)
                merged[index] = existing
                break
        else:
            merged.append(_clean(item))
    return _order(merged, patch, original, key)


def _key_of(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, Mapping) else item


def _order(merged: list[Any], patch: list[Any], original: list[Any], key: str) -> list[Any]:
    """apimachinery's ``normalizeElementOrder``: patch items in patch order, original-only items
    in original order, interleaved by ``mergeSortedSlice``."""
    patch_keys = [_key_of(p, key) for p in patch]
    server_keys = [_key_of(o, key) for o in original]
    in_patch = [m for m in merged if _key_of(m, key) in patch_keys]
    server_only = [m for m in merged if _key_of(m, key) not in patch_keys]
    in_patch.sort(key=lambda m: patch_keys.index(_key_of(m, key)))
    server_only.sort(key=lambda m: _index(server_keys, _key_of(m, key)))

    out: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(in_patch):
        if j >= len(in_patch):
            out.append(server_only[i])
            i += 1
        elif i >= len(server_only):
            out.append(in_patch[j])
            j += 1
        else:
            left = _index(server_keys, _key_of(server_only[i], key))
            right = _index(server_keys, _key_of(in_patch[j], key))
            if left >= 0 and right >= 0 and left < right:
                out.append(server_only[i])
                i += 1
            else:
                out.append(in_patch[j])
                j += 1
    return out


def _index(keys: list[Any], value: Any) -> int:
    try:
        return keys.index(value)
    except ValueError:
        return -1
