"""Helpers that edit apply documents in place: keyed upserts, env conversion, field extraction.

Why in-place upserts: plugins add env vars, ports, volumes and mounts to lists that already
hold the runtime's entries; an entry with the same key is replaced *at its index* (so template
order is kept) and a new one is appended, exactly as upstream's ``apply.Upsert*`` helpers do.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from manager.meta.object import Json

__all__ = [
    "FieldPathNotFound",
    "env_var",
    "env_vars",
    "extract_field",
    "typed_env_var",
    "upsert_env_vars",
    "upsert_ports",
    "upsert_volume_mounts",
    "upsert_volumes",
]


def _upsert(
    items: list[Json], new_items: Iterable[Mapping[str, Any]], same: Callable[[Json, Json], bool]
) -> None:
    for new in new_items:
        item = dict(new)
        for index, existing in enumerate(items):
            if same(existing, item):
                items[index] = item
                break
        else:
            items.append(item)


def _by_name(a: Json, b: Json) -> bool:
    return a.get("name") == b.get("name")


def _by_port_or_name(a: Json, b: Json) -> bool:
    # Two absent names compare equal (upstream's ptr.Equal on nil pointers): docs/behaviour/trainer.md §9
    # quirk 10.
    return a.get("containerPort") == b.get("containerPort") or a.get("name") == b.get("name")


def _by_mount_path(a: Json, b: Json) -> bool:
    return a.get("mountPath") == b.get("mountPath")


def upsert_env_vars(env: list[Json], new: Iterable[Mapping[str, Any]]) -> None:
    """Replace env vars with the same ``name`` in place, append the others."""
    _upsert(env, new, _by_name)


def upsert_ports(ports: list[Json], new: Iterable[Mapping[str, Any]]) -> None:
    """Replace a port with the same ``containerPort`` or the same (possibly absent) ``name``."""
    _upsert(ports, new, _by_port_or_name)


def upsert_volumes(volumes: list[Json], new: Iterable[Mapping[str, Any]]) -> None:
    """Replace volumes with the same ``name`` in place, append the others."""
    _upsert(volumes, new, _by_name)


def upsert_volume_mounts(mounts: list[Json], new: Iterable[Mapping[str, Any]]) -> None:
    """Replace mounts with the same ``mountPath`` (not name) in place, append the others."""
    _upsert(mounts, new, _by_mount_path)


def _key_selector(ref: Mapping[str, Any]) -> Json:
    out: Json = {"key": ref.get("key", ""), "name": ref.get("name", "")}
    if ref.get("optional") is not None:
        out["optional"] = ref["optional"]
    return out


def env_var(env: Mapping[str, Any]) -> Json:
    """A TrainJob ``corev1.EnvVar`` as the apply document upstream builds from it.

    Only the sources upstream copies survive: ``fieldRef.apiVersion`` and ``fileKeyRef`` are
    dropped; ``value`` is always written when there is no ``valueFrom`` (even ``""``).
    """
    out: Json = {"name": env.get("name", "")}
    source = env.get("valueFrom")
    if source is None:
        out["value"] = env.get("value", "")
        return out
    converted: Json = {}
    if (ref := source.get("fieldRef")) is not None:
        converted["fieldRef"] = {"fieldPath": ref.get("fieldPath", "")}
    if (ref := source.get("resourceFieldRef")) is not None:
        converted["resourceFieldRef"] = {
            "containerName": ref.get("containerName", ""),
            "resource": ref.get("resource", ""),
            "divisor": ref.get("divisor", "0"),
        }
    if (ref := source.get("configMapKeyRef")) is not None:
        converted["configMapKeyRef"] = _key_selector(ref)
    if (ref := source.get("secretKeyRef")) is not None:
        converted["secretKeyRef"] = _key_selector(ref)
    out["valueFrom"] = converted
    return out


def env_vars(envs: Iterable[Mapping[str, Any]] | None) -> list[Json] | None:
    """Convert a list of env vars; an empty or absent list gives ``None`` (no list at all)."""
    converted = [env_var(e) for e in envs or ()]
    return converted or None


class FieldPathNotFound(LookupError):
    """``extract_field`` found nothing at the path; the text is upstream's."""


def extract_field(obj: Mapping[str, Any], *path: str) -> Any:
    """A deep copy of the value at ``path`` (``"spec", "containers"``) inside ``obj``."""
    current: Any = obj
    for part in path:
        if not isinstance(current, Mapping) or part not in current:
            raise FieldPathNotFound(f"requested field path not found: '.{'.'.join(path)}'")
        current = current[part]
    return copy.deepcopy(current)


def typed_env_var(env: Json) -> Json:
    """An EnvVar in Go's struct field order (name, value, valueFrom), as error messages print it."""
    ordered: Json = {k: env[k] for k in ("name", "value", "valueFrom") if k in env}
    ordered.update({k: v for k, v in env.items() if k not in ordered})
    return ordered
