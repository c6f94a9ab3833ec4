"""Owner references, finalizers and create-or-update on plain object dicts (controllerutil).

These mutate the object in memory only; the caller writes it. Owner references carry the
owner's apiVersion, kind, name and uid; a controller reference also sets ``controller: true``
and (by default) ``blockOwnerDeletion: true`` so foreground deletion of the owner waits for it.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from manager.client.errors import NotFound
from manager.scheme import gvk_of_object

Object = dict[str, Any]


class AlreadyOwnedError(Exception):
    """The object already has a different controller owner."""

    def __init__(self, obj: Object, owner_ref: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        super().__init__(
            f"Object {meta.get('namespace', '')}/{meta.get('name', '')} is already owned by another "
            f"{owner_ref.get('kind')} controller {owner_ref.get('name')}"
        )
        self.owner = owner_ref


def _meta(obj: Object) -> dict[str, Any]:
    meta: dict[str, Any] = obj.setdefault("metadata", {})
    return meta


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _same_owner(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same group, kind and name (the version may differ), as controller-runtime compares them."""
    return (
        _group(a.get("apiVersion", "")) == _group(b.get("apiVersion", ""))
        and a.get("kind") == b.get("kind")
        and a.get("name") == b.get("name")
    )


def _validate_owner(owner: Object, obj: Object) -> None:
    owner_ns = (owner.get("metadata") or {}).get("namespace") or ""
    obj_ns = (obj.get("metadata") or {}).get("namespace") or ""
    if not owner_ns:
        return  # cluster-scoped owners may own anything
    if not obj_ns:
        raise ValueError(
            f"cluster-scoped resource must not have a namespace-scoped owner, owner's namespace {owner_ns}"
        )
    if owner_ns != obj_ns:
        raise ValueError(
            f"cross-namespace owner references are disallowed, owner's namespace {owner_ns}, obj's namespace {obj_ns}"
        )


def _reference(owner: Object) -> dict[str, Any]:
    gvk = gvk_of_object(owner)
    meta = owner.get("metadata") or {}
    if not gvk.kind or not meta.get("name") or not meta.get("uid"):
        raise ValueError("owner must have apiVersion, kind, metadata.name and metadata.uid")
    return {"apiVersion": gvk.api_version, "kind": gvk.kind, "name": meta["name"], "uid": meta["uid"]}


def _upsert(obj: Object, ref: dict[str, Any]) -> None:
    refs: list[dict[str, Any]] = _meta(obj).setdefault("ownerReferences", [])
    for i, existing in enumerate(refs):
        if _same_owner(existing, ref):
            refs[i] = ref
            return
    refs.append(ref)


def set_controller_reference(owner: Object, obj: Object, *, block_owner_deletion: bool = True) -> None:
    """Make ``owner`` the controller of ``obj``; ``AlreadyOwnedError`` if another controller is set."""
    _validate_owner(owner, obj)
    ref = _reference(owner) | {"controller": True, "blockOwnerDeletion": block_owner_deletion}
    for existing in _meta(obj).get("ownerReferences") or ():
        if existing.get("controller") and not _same_owner(existing, ref):
            raise AlreadyOwnedError(obj, existing)
    _upsert(obj, ref)


def set_owner_reference(owner: Object, obj: Object) -> None:
    """Add (or refresh) a non-controller owner reference to ``owner``."""
    _validate_owner(owner, obj)
    _upsert(obj, _reference(owner))


def remove_owner_reference(owner: Object, obj: Object) -> bool:
    """Drop the reference to ``owner``; returns whether there was one."""
    ref = _reference(owner)
    refs = _meta(obj).get("ownerReferences") or []
    kept = [r for r in refs if not _same_owner(r, ref)]
    if len(kept) == len(refs):
        return False
    _meta(obj)["ownerReferences"] = kept
    return True


def has_controller_reference(obj: Object) -> bool:
    return any(r.get("controller") for r in (obj.get("metadata") or {}).get("ownerReferences") or ())


def controller_of(obj: Object) -> dict[str, Any] | None:
    """The owner reference marked ``controller: true``, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return dict(ref)
    return None


def contains_finalizer(obj: Object, finalizer: str) -> bool:
    return finalizer in ((obj.get("metadata") or {}).get("finalizers") or ())


def add_finalizer(obj: Object, finalizer: str) -> bool:
    """Add ``finalizer`` if missing; returns whether the object changed."""
    finalizers: list[str] = _meta(obj).setdefault("finalizers", [])
    if finalizer in finalizers:
        return False
    finalizers.append(finalizer)
    return True


def remove_finalizer(obj: Object, finalizer: str) -> bool:
    """Remove every occurrence of ``finalizer``; returns whether the object changed."""
    finalizers = _meta(obj).get("finalizers") or []
    kept = [f for f in finalizers if f != finalizer]
    if len(kept) == len(finalizers):
        return False
    _meta(obj)["finalizers"] = kept
    return True


class OperationResult(enum.StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


class _Client(Protocol):
    async def get(self, kind: Any, name: str, namespace: str = "") -> Object: ...

    async def create(self, obj: Object) -> Object: ...

    async def update(self, obj: Object) -> Object: ...


Mutate = Callable[[Object], "Awaitable[None] | None"]


async def create_or_update(client: _Client, obj: Object, mutate: Mutate) -> tuple[OperationResult, Object]:
    """Get ``obj``; create it after ``mutate`` if missing, else update it only if ``mutate`` changed it.

    ``mutate`` edits the object in place (the live copy when it exists) and must not change its
    name or namespace. Known traps, as upstream: fields the server defaults make every call look
    like a change unless ``mutate`` sets them too, and status edits are not written (use the
    status sub-resource). Returns the outcome and the object as the server returned it.
    """
    meta = obj.get("metadata") or {}
    key = (meta.get("namespace") or "", meta.get("name") or "")
    try:
        current = await client.get(gvk_of_object(obj), key[1], key[0])
    except NotFound:
        await _call(mutate, obj)
        _check_key(obj, key)
        return OperationResult.CREATED, await client.create(obj)
    before = copy.deepcopy(current)
    await _call(mutate, current)
    _check_key(current, key)
    if current == before:
        return OperationResult.UNCHANGED, current
    return OperationResult.UPDATED, await client.update(current)


async def _call(mutate: Mutate, obj: Object) -> None:
    result = mutate(obj)
    if result is not None:
        await result


def _check_key(obj: Object, key: tuple[str, str]) -> None:
    meta = obj.get("metadata") or {}
    if ((meta.get("namespace") or ""), (meta.get("name") or "")) != key:
        raise ValueError("MutateFn cannot mutate object name and/or object namespace")
