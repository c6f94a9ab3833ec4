"""Owner references, finalizers, create-or-update and conflict retry (controllerutil).

The reference and finalizer helpers mutate a JSON dict in place and return whether anything
changed; the caller writes the object. Semantics follow controller-runtime v0.22 (docs/behaviour/framework.md
A.9): a controller reference is ``controller=true`` + ``blockOwnerDeletion=true`` and a second,
different controller is refused; cross-namespace owners are refused.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from manager.client.errors import Conflict, NotFound
from manager.client.interfaces import ClientProtocol
from manager.client.objects import gvk_of
from manager.client.patch import Patch, merge_diff
from manager.errors import Error
from manager.meta.object import Json as Object
from manager.meta.object import json_copy
from manager.scheme import gvk_of_object

T = TypeVar("T")


class OwnerReferenceError(Error, ValueError):
    """An owner reference that Kubernetes would not honour."""


class AlreadyOwnedError(OwnerReferenceError):
    def __init__(self, obj: Object, owner: Object) -> None:
        meta = obj.get("metadata") or {}
        super().__init__(
            f"object {meta.get('namespace', '')}/{meta.get('name', '')} is already owned by another "
            f"{owner.get('kind')} controller {owner.get('name')}"
        )
        self.owner = owner


def _meta(obj: Object) -> Object:
    result: Object = obj.setdefault("metadata", {})
    return result


def _same_owner(a: Object, b: Object) -> bool:
    """Same group, kind and name (the version may differ), as controller-runtime compares."""
    group_a = str(a.get("apiVersion", "")).rpartition("/")[0]
    group_b = str(b.get("apiVersion", "")).rpartition("/")[0]
    return group_a == group_b and a.get("kind") == b.get("kind") and a.get("name") == b.get("name")


def _reference(owner: Object, *, controller: bool | None, block: bool | None) -> Object:
    meta = owner.get("metadata") or {}
    gvk = gvk_of(owner)
    if not meta.get("name") or not meta.get("uid"):
        raise OwnerReferenceError("owner needs metadata.name and metadata.uid (read it from the server)")
    ref: Object = {
        "apiVersion": gvk.api_version,
        "kind": gvk.kind,
        "name": meta["name"],
        "uid": meta["uid"],
    }
    if controller is not None:
        ref["controller"] = controller
    if block is not None:
        ref["blockOwnerDeletion"] = block
    return ref


def _check_scope(owner: Object, obj: Object) -> None:
    owner_ns = (owner.get("metadata") or {}).get("namespace") or ""
    obj_ns = (obj.get("metadata") or {}).get("namespace") or ""
    if owner_ns and not obj_ns:
        raise OwnerReferenceError("a cluster-scoped object cannot have a namespaced owner")
    if owner_ns and owner_ns != obj_ns:
        raise OwnerReferenceError(f"cross-namespace owner references are disallowed ({owner_ns} != {obj_ns})")


def _upsert(obj: Object, ref: Object) -> bool:
    refs: list[Object] = _meta(obj).setdefault("ownerReferences", [])
    for i, existing in enumerate(refs):
        if _same_owner(existing, ref):
            if existing == ref:
                return False
            refs[i] = ref
            return True
    refs.append(ref)
    return True


def set_controller_reference(owner: Object, obj: Object, *, block_owner_deletion: bool = True) -> bool:
    """Make ``owner`` the controller of ``obj``; ``AlreadyOwnedError`` if another controller is set."""
    _check_scope(owner, obj)
    ref = _reference(owner, controller=True, block=block_owner_deletion)
    current = get_controller_of(obj)
    if current is not None and not _same_owner(current, ref):
        raise AlreadyOwnedError(obj, current)
    return _upsert(obj, ref)


def set_owner_reference(owner: Object, obj: Object) -> bool:
    """Add (or refresh) a non-controller owner reference."""
    _check_scope(owner, obj)
    ref = _reference(owner, controller=None, block=None)
    for existing in _meta(obj).get("ownerReferences") or []:
        if _same_owner(existing, ref):
            # keep the controller/blockOwnerDeletion flags of an existing reference
            merged = {**existing, **ref}
            return _upsert(obj, merged)
    return _upsert(obj, ref)


def remove_owner_reference(owner: Object, obj: Object) -> bool:
    ref = _reference(owner, controller=None, block=None)
    refs = _meta(obj).get("ownerReferences") or []
    kept = [r for r in refs if not _same_owner(r, ref)]
    if len(kept) == len(refs):
        return False
    _meta(obj)["ownerReferences"] = kept
    return True


def get_controller_of(obj: Object) -> Object | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def has_controller_reference(obj: Object) -> bool:
    return get_controller_of(obj) is not None


def has_owner_reference(owner: Object, obj: Object) -> bool:
    ref = _reference(owner, controller=None, block=None)
    return any(_same_owner(r, ref) for r in (obj.get("metadata") or {}).get("ownerReferences") or [])


def contains_finalizer(obj: Object, finalizer: str) -> bool:
    return finalizer in ((obj.get("metadata") or {}).get("finalizers") or [])


def add_finalizer(obj: Object, finalizer: str) -> bool:
    finalizers: list[str] = _meta(obj).setdefault("finalizers", [])
    if finalizer in finalizers:
        return False
    finalizers.append(finalizer)
    return True


def remove_finalizer(obj: Object, finalizer: str) -> bool:
    finalizers = _meta(obj).get("finalizers") or []
    kept = [f for f in finalizers if f != finalizer]
    if len(kept) == len(finalizers):
        return False
    _meta(obj)["finalizers"] = kept
    return True


# -- conflict retry --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryBackoff:
    """client-go's ``wait.Backoff`` for retries; ``DEFAULT_RETRY`` is ``retry.DefaultRetry``."""

    steps: int = 5
    duration: float = 0.010
    factor: float = 1.0
    jitter: float = 0.1


DEFAULT_RETRY = RetryBackoff()


async def retry_on_conflict(
    fn: Callable[[], Awaitable[T]],
    backoff: RetryBackoff = DEFAULT_RETRY,
    *,
    retriable: Callable[[BaseException], bool] = lambda err: isinstance(err, Conflict),
) -> T:
    """Run ``fn`` (which must re-read what it changes) until it succeeds without a Conflict,
    at most ``backoff.steps`` times; the last Conflict is raised."""
    delay = backoff.duration
    for attempt in range(backoff.steps):
        try:
            return await fn()
        except Exception as err:
            if not retriable(err) or attempt == backoff.steps - 1:
                raise
        await asyncio.sleep(delay * (1 + backoff.jitter * random.random()))
        delay *= backoff.factor
    raise AssertionError("unreachable")  # pragma: no cover - loop always returns or raises


class OperationResult(StrEnum):
    NONE = "unchanged"
    CREATED = "created"
    UPDATED = "updated"
    UPDATED_STATUS = "updatedStatus"
    UPDATED_STATUS_ONLY = "updatedStatusOnly"


_Identity = tuple[object, object, str, str]
"""apiVersion, kind, namespace and name as written: what ``mutate`` must leave as it found it."""


def _identity(obj: Object) -> _Identity:
    meta = obj.get("metadata") or {}
    return obj.get("apiVersion"), obj.get("kind"), meta.get("namespace") or "", meta.get("name") or ""


def _check_identity(identity: _Identity, mutated: Object) -> None:
    found = _identity(mutated)
    if found != identity and not (found[2:] == identity[2:] and _same_kind(found, identity)):
        raise ValueError("mutate changed the object's kind, namespace or name")


def _same_kind(a: _Identity, b: _Identity) -> bool:
    """Whether two identities written differently name one kind (``/v1`` is ``v1``): compared as
    parsed, only when the text differs (the object's own identity always has both, checked first)."""
    return gvk_of_object({"apiVersion": a[0], "kind": a[1]}) == gvk_of_object(
        {"apiVersion": b[0], "kind": b[1]}
    )


async def _current_or_desired(
    client: ClientProtocol, obj: Object, mutate: Callable[[Object], None]
) -> tuple[Object | None, Object, _Identity]:
    """The object as it is (None if missing), or else ``obj`` mutated: what to create; and the
    identity ``obj`` names (read once, checked after every ``mutate``)."""
    gvk = gvk_of(obj)  # refuses an object without apiVersion and kind
    identity = _identity(obj)
    _, _, namespace, name = identity
    try:
        return await client.get(gvk, name, namespace), obj, identity
    except NotFound:
        desired = json_copy(obj)
        mutate(desired)
        _check_identity(identity, desired)
        return None, desired, identity


async def create_or_update(
    client: ClientProtocol, obj: Object, mutate: Callable[[Object], None]
) -> tuple[Object, OperationResult]:
    """Get ``obj`` (live would be the caller's choice of client), apply ``mutate``; create it if
    missing, update it only if ``mutate`` changed something. ``mutate`` must not change the
    name, namespace or kind. Status changes are not written (use ``create_or_patch``)."""
    current, desired, identity = await _current_or_desired(client, obj, mutate)
    if current is None:
        created: Object = await client.create(desired)
        return created, OperationResult.CREATED
    before = json_copy(current)
    mutate(current)
    _check_identity(identity, current)
    if current == before:
        return current, OperationResult.NONE
    updated: Object = await client.update(current)
    return updated, OperationResult.UPDATED


async def create_or_patch(
    client: ClientProtocol, obj: Object, mutate: Callable[[Object], None]
) -> tuple[Object, OperationResult]:
    """Like ``create_or_update`` but sends merge patches: one for everything but status, one for
    status (through the status subresource), so each only carries what ``mutate`` changed."""
    current, desired, identity = await _current_or_desired(client, obj, mutate)
    if current is None:
        status = desired.pop("status", None)
        created: Object = await client.create(desired)
        if status:
            created["status"] = status
            created = await client.status.update(created)
        return created, OperationResult.CREATED
    before = json_copy(current)
    mutate(current)
    _check_identity(identity, current)
    before_status, after_status = before.pop("status", None), current.pop("status", None)
    result = OperationResult.NONE
    spec_patch = merge_diff(before, current)
    if spec_patch:
        current = await client.patch(current, Patch.merge(spec_patch))
        result = OperationResult.UPDATED
    if after_status != before_status:
        status_patch = merge_diff({"status": before_status or {}}, {"status": after_status or {}})
        current = await client.status.patch(current, Patch.merge(status_patch))
        result = (
            OperationResult.UPDATED_STATUS
            if result is OperationResult.UPDATED
            else OperationResult.UPDATED_STATUS_ONLY
        )
    elif after_status is not None:
        current.setdefault("status", after_status)
    return current, result
