"""FakeClient: an in-memory stand-in for ``manager.client.Client`` in unit tests.

Mirrors controller-runtime's fake client (docs/behaviour/framework.md A.13) where it matters to reconcilers:

* every write bumps a cluster-wide resourceVersion; seeded objects get ``"999"``;
* ``update`` with a stale resourceVersion raises ``Conflict``; ``create`` of an existing name
  ``AlreadyExists``; reads of a missing object ``NotFound``;
* kinds listed in ``status_subresource`` keep status apart: ``update``/``patch`` leave it alone,
  ``status.update``/``status.patch`` change only it;
* ``metadata.generation`` goes up when anything outside metadata and status changes;
* delete of an object with finalizers only sets ``deletionTimestamp``; removing the last
  finalizer then deletes it;
* ``list`` filters by namespace, label selector and field selectors backed by ``index_field``
  (the async ``FieldIndexer`` seam) or ``add_index`` (the same, for synchronous test setup),
  plus ``metadata.name``/``metadata.namespace``;
* ``requests`` counts calls per verb, so a test can assert "no writes" (``writes == 0``);
* ``inject_error(verb, error, times)`` makes the next calls of a verb fail (fault injection);
* ``add_event_handler(kind, handler)`` calls an informer's ``ResourceEventHandler`` for every
  stored change of a kind, after an ``on_add`` per object already stored, as a watch would: a
  reconciler that keeps state from events is tested with the writes that cause them.

Not modelled (use the real API server for these): OpenAPI validation and defaulting, garbage
collection and propagation policies, strategic merge semantics (treated as a JSON merge patch),
and server-side apply field ownership (apply merges the sent fields, ``force`` is accepted).
"""

from __future__ import annotations

import builtins
import copy
import itertools
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, Unpack, cast, overload

from manager.cache import selectors
from manager.cache.interfaces import ResourceEventHandler
from manager.client import objects
from manager.client.errors import AlreadyExists, ApiError, BadRequest, Conflict, NotFound
from manager.client.interfaces import (
    ClientProtocol,
    DeleteOptions,
    FieldIndexer,
    ListQuery,
    TypedReader,
)
from manager.client.patch import Patch
from manager.client.rest import APPLY_PATCH, JSON_PATCH
from manager.meta import times
from manager.meta.object import Json as Object
from manager.scheme import GroupVersionKind, KindRef, gvk_for
from manager.webhook import jsonpatch

M = TypeVar("M")
O = TypeVar("O")  # noqa: E741
_Key = tuple[GroupVersionKind, str, str]
WRITE_VERBS = (
    "create",
    "update",
    "patch",
    "apply",
    "delete",
    "status.update",
    "status.patch",
    "status.apply",
)


@overload
def merge_patch(target: object, patch: Object) -> Object: ...


@overload
def merge_patch(target: object, patch: object) -> object: ...


def merge_patch(target: object, patch: object) -> object:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _now() -> str:
    return times.now()


def _not_found(gvk: GroupVersionKind, name: str) -> NotFound:
    return NotFound(
        f'{gvk.kind.lower()}s "{name}" not found',
        status={
            "reason": "NotFound",
            "code": 404,
            "details": {"name": name, "group": gvk.group, "kind": f"{gvk.kind.lower()}s"},
        },
        code=404,
    )


def _spec_part(obj: Object) -> Object:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


class _FakeStatusWriter:
    def __init__(self, parent: FakeClient) -> None:
        self._parent = parent

    async def update(self, obj: O, *, field_owner: str | None = None, dry_run: bool = False) -> O:
        return await self._parent._write_status("status.update", obj, lambda cur, new: new.get("status"))

    async def patch(
        self, obj: O, patch: Patch, *, field_owner: str | None = None, dry_run: bool = False
    ) -> O:
        def status_of(current: Object, _: Object) -> Any:
            return self._parent._patched(current, patch).get("status")

        return await self._parent._write_status("status.patch", obj, status_of)

    async def apply(
        self, obj: O, *, field_owner: str | None = None, force: bool = False, dry_run: bool = False
    ) -> O:
        def status_of(current: Object, new: Object) -> Any:
            return merge_patch(current.get("status") or {}, new.get("status") or {})

        return await self._parent._write_status("status.apply", obj, status_of)


class FakeClient(TypedReader):
    """An in-memory ``ClientProtocol`` and ``FieldIndexer`` (see the module docstring)."""

    def __init__(
        self,
        objects_: Iterable[object] = (),
        *,
        status_subresource: Iterable[KindRef] = (),
        cluster_scoped: Iterable[KindRef] = (),
    ) -> None:
        self._objects: dict[_Key, Object] = {}
        self._rv = itertools.count(1000)
        self._status_kinds = {gvk_for(k) for k in status_subresource}
        self._cluster_scoped = {gvk_for(k) for k in cluster_scoped}
        self._indexes: dict[tuple[GroupVersionKind, str], Callable[[Object], Iterable[str]]] = {}
        self._errors: dict[str, list[BaseException]] = {}
        self._handlers: dict[GroupVersionKind, list[ResourceEventHandler]] = {}
        self.requests: Counter[str] = Counter()
        self.status = _FakeStatusWriter(self)
        for obj in objects_:
            data = objects.to_dict(obj)
            meta = data.setdefault("metadata", {})
            meta.setdefault("resourceVersion", "999")
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("generation", 1)
            self._objects[self._key(data)] = data

    # -- helpers for tests -------------------------------------------------------------------

    @property
    def writes(self) -> int:
        return sum(self.requests[v] for v in WRITE_VERBS)

    @property
    def api_reader(self) -> FakeClient:
        return self

    def with_field_owner(self, field_owner: str) -> FakeClient:
        return self

    def inject_error(self, verb: str, error: BaseException, times: int = 1) -> None:
        """Make the next ``times`` calls of ``verb`` (e.g. "update") raise ``error``."""
        self._errors.setdefault(verb, []).extend([error] * times)

    def add_event_handler(self, kind: KindRef, handler: ResourceEventHandler) -> None:
        """Call ``handler`` for every stored change of ``kind`` (each object a copy), after an
        ``on_add(obj, True)`` for each object of the kind already stored."""
        gvk = gvk_for(kind)
        self._handlers.setdefault(gvk, []).append(handler)
        for (item_gvk, _, _), obj in sorted(self._objects.items(), key=lambda kv: (kv[0][1], kv[0][2])):
            if item_gvk == gvk:
                handler.on_add(copy.deepcopy(obj), True)

    def _store(self, key: _Key, new: Object) -> None:
        old = self._objects.get(key)
        self._objects[key] = new
        for handler in self._handlers.get(key[0], ()):
            if old is None:
                handler.on_add(copy.deepcopy(new), False)
            else:
                handler.on_update(copy.deepcopy(old), copy.deepcopy(new))

    def _remove(self, key: _Key) -> None:
        old = self._objects.pop(key)
        for handler in self._handlers.get(key[0], ()):
            handler.on_delete(copy.deepcopy(old))

    def add_index(self, kind: KindRef, field: str, extract: Callable[[Object], Iterable[str]]) -> None:
        """Register a field index while setting a test up (what ``index_field`` does, synchronously)."""
        self._indexes[(gvk_for(kind), field)] = extract

    async def index_field(
        self, kind: KindRef, field_name: str, extract: Callable[[Object], Iterable[str]]
    ) -> None:
        self.add_index(kind, field_name, extract)

    def _enter(self, verb: str) -> None:
        self.requests[verb] += 1
        pending = self._errors.get(verb)
        if pending:
            raise pending.pop(0)

    def _key(self, data: Object) -> _Key:
        gvk = objects.gvk_of(data)
        meta = data.get("metadata") or {}
        namespace = "" if gvk in self._cluster_scoped else (meta.get("namespace") or "")
        return gvk, namespace, meta.get("name") or ""

    def _next_rv(self) -> str:
        return str(next(self._rv))

    def _current(self, key: _Key) -> Object:
        found = self._objects.get(key)
        if found is None:
            raise _not_found(key[0], key[2])
        return found

    # -- reads -------------------------------------------------------------------------------

    async def _get_object(self, gvk: GroupVersionKind, name: str, namespace: str) -> Object:
        self._enter("get")
        key = (gvk, "" if gvk in self._cluster_scoped else namespace, name)
        return copy.deepcopy(self._current(key))

    async def _list_objects(self, gvk: GroupVersionKind, query: ListQuery) -> builtins.list[Object]:
        self._enter("list")
        selector = selectors.to_selector(query.label_selector)
        namespace, fields = query.namespace, query.field_selector
        out: builtins.list[Object] = []
        for (item_gvk, ns, _), obj in sorted(self._objects.items(), key=lambda kv: (kv[0][1], kv[0][2])):
            if item_gvk != gvk or (namespace and ns != namespace):
                continue
            if not selector.matches((obj.get("metadata") or {}).get("labels")):
                continue
            if fields and not self._fields_match(gvk, obj, fields):
                continue
            out.append(copy.deepcopy(obj))
        return out

    def _fields_match(self, gvk: GroupVersionKind, obj: Object, fields: Mapping[str, str]) -> bool:
        meta = obj.get("metadata") or {}
        for field, value in fields.items():
            if field == "metadata.name":
                values: Iterable[str] = [meta.get("name", "")]
            elif field == "metadata.namespace":
                values = [meta.get("namespace", "")]
            else:
                extract = self._indexes.get((gvk, field))
                if extract is None:
                    raise BadRequest(
                        f"field selector {field!r} on {gvk.kind} needs an index: call index_field first",
                        code=400,
                    )
                values = extract(obj)
            if value not in values:
                return False
        return True

    # -- writes ------------------------------------------------------------------------------

    async def create(self, obj: O, *, field_owner: str | None = None, dry_run: bool = False) -> O:
        self._enter("create")
        data = objects.to_dict(obj)
        meta = data.setdefault("metadata", {})
        if meta.get("resourceVersion"):
            raise BadRequest("resourceVersion can not be set for Create requests", code=400)
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                raise BadRequest("metadata.name or metadata.generateName is required", code=400)
            meta["name"] = prefix + uuid.uuid4().hex[:5]
        key = self._key(data)
        if key in self._objects:
            raise AlreadyExists(
                f'{key[0].kind.lower()}s "{key[2]}" already exists',
                status={"reason": "AlreadyExists", "code": 409},
                code=409,
            )
        if key[0] in self._status_kinds:
            data.pop("status", None)
        meta.update(
            uid=str(uuid.uuid4()), resourceVersion=self._next_rv(), generation=1, creationTimestamp=_now()
        )
        if not dry_run:
            self._store(key, data)
        return cast(O, objects.like(obj, copy.deepcopy(data)))

    def _store_update(self, current: Object, new: Object) -> Object:
        """Write ``new`` over ``current``: bump RV and generation, honour finalizers."""
        key = self._key(current)
        meta = new.setdefault("metadata", {})
        old_meta = current.get("metadata") or {}
        for immutable in ("uid", "creationTimestamp", "deletionTimestamp", "name", "namespace"):
            if immutable in old_meta:
                meta[immutable] = old_meta[immutable]
            else:
                meta.pop(immutable, None)
        meta["generation"] = old_meta.get("generation", 1) + (_spec_part(current) != _spec_part(new))
        meta["resourceVersion"] = self._next_rv()
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(key)
        else:
            self._store(key, new)
        return new

    async def update(self, obj: O, *, field_owner: str | None = None, dry_run: bool = False) -> O:
        self._enter("update")
        data = objects.to_dict(obj)
        current = self._current(self._key(data))
        self._check_rv(current, data)
        self._keep_status(current, data)
        return cast(O, objects.like(obj, copy.deepcopy(self._store_update(current, data))))

    def _keep_status(self, current: Object, new: Object) -> None:
        """A kind with a status subresource keeps its stored status on a write to the object."""
        if self._key(current)[0] not in self._status_kinds:
            return
        if "status" in current:
            new["status"] = copy.deepcopy(current["status"])
        else:
            new.pop("status", None)

    @staticmethod
    def _check_rv(current: Object, new: Object) -> None:
        rv = (new.get("metadata") or {}).get("resourceVersion")
        if rv and rv != current["metadata"]["resourceVersion"]:
            name = current["metadata"].get("name")
            raise Conflict(
                f'Operation cannot be fulfilled on "{name}": the object has been modified; '
                "please apply your changes to the latest version and try again",
                status={"reason": "Conflict", "code": 409},
                code=409,
            )

    def _patched(self, current: Object, patch: Patch) -> Object:
        if patch.content_type == JSON_PATCH:
            if not isinstance(patch.data, list):
                raise BadRequest("a JSON patch is a list of operations", code=400)
            try:
                result = jsonpatch.apply(current, patch.data)
            except jsonpatch.JSONPatchError as err:
                raise ApiError(str(err), code=422) from err
            if not isinstance(result, dict):
                raise ApiError("the patched document is not an object", code=422)
            return result
        if not isinstance(patch.data, dict):
            raise BadRequest("a merge patch is a JSON object", code=400)
        return merge_patch(current, patch.data)

    async def patch(
        self, obj: O, patch: Patch, *, field_owner: str | None = None, dry_run: bool = False
    ) -> O:
        self._enter("patch")
        data = objects.to_dict(obj)
        current = self._current(self._key(data))
        new = self._patched(current, patch)
        self._check_rv(current, new)  # a patch carrying a resourceVersion is an optimistic lock
        self._keep_status(current, new)
        return cast(O, objects.like(obj, copy.deepcopy(self._store_update(current, new))))

    async def apply(
        self, obj: O, *, field_owner: str | None = None, force: bool = False, dry_run: bool = False
    ) -> O:
        """Create if missing, else merge the sent fields (no field-ownership tracking)."""
        self._enter("apply")
        data = objects.to_dict(obj)
        key = self._key(data)
        if key not in self._objects:
            data.setdefault("metadata", {}).pop("resourceVersion", None)
            created = await self._create_unchecked(data)
            return cast(O, objects.like(obj, created))
        return await self.patch(obj, Patch(APPLY_PATCH, data))

    async def _create_unchecked(self, data: Object) -> Object:
        meta = data["metadata"]
        key = self._key(data)
        if key[0] in self._status_kinds:
            data.pop("status", None)
        meta.update(
            uid=str(uuid.uuid4()), resourceVersion=self._next_rv(), generation=1, creationTimestamp=_now()
        )
        self._store(key, data)
        return copy.deepcopy(data)

    async def _write_status(self, verb: str, obj: O, status_of: Callable[[Object, Object], Any]) -> O:
        self._enter(verb)
        data = objects.to_dict(obj)
        key = self._key(data)
        current = self._current(key)
        if key[0] not in self._status_kinds:
            raise NotFound(f"{key[0].kind} has no status subresource in this FakeClient", code=404)
        if verb == "status.update":
            self._check_rv(current, data)
        new = copy.deepcopy(current)
        status = status_of(current, data)
        if status is None:
            new.pop("status", None)
        else:
            new["status"] = status
        new["metadata"]["resourceVersion"] = self._next_rv()
        self._store(key, new)
        return cast(O, objects.like(obj, copy.deepcopy(new)))

    async def delete(self, obj: object, **options: Unpack[DeleteOptions]) -> None:
        gvk, namespace, name = self._key(objects.to_dict(obj))
        await self.delete_by_name(gvk, name, namespace, **options)

    async def delete_by_name(
        self, kind: KindRef, name: str, namespace: str = "", **options: Unpack[DeleteOptions]
    ) -> None:
        """Only ``preconditions`` and ``dry_run`` are honoured: there is no garbage collector."""
        self._enter("delete")
        gvk = gvk_for(kind)
        key = (gvk, "" if gvk in self._cluster_scoped else namespace, name)
        current = self._current(key)
        meta = current["metadata"]
        preconditions = options.get("preconditions")
        if preconditions is not None:
            if preconditions.uid and preconditions.uid != meta.get("uid"):
                raise Conflict(f"Precondition failed: UID in precondition: {preconditions.uid}", code=409)
            if preconditions.resource_version and preconditions.resource_version != meta.get(
                "resourceVersion"
            ):
                raise Conflict("Precondition failed: ResourceVersion in precondition", code=409)
        if options.get("dry_run"):
            return
        if meta.get("finalizers"):
            if not meta.get("deletionTimestamp"):
                marked = copy.deepcopy(current)  # a new version, so handlers see old and new
                marked["metadata"].update(deletionTimestamp=_now(), resourceVersion=self._next_rv())
                self._store(key, marked)
            return
        self._remove(key)


if TYPE_CHECKING:  # mypy proves the fake has the client's shape, not a copy of its signatures

    def _conforms(client: FakeClient) -> tuple[ClientProtocol, FieldIndexer]:
        return client, client
