"""An in-memory Lease store with optimistic concurrency, for leader election tests.

It answers the ``LeaseClient`` calls like the API server would for Leases: ``get`` raises
``NotFound``, ``create`` raises ``AlreadyExists``, ``update`` raises ``Conflict`` unless the
resourceVersion is the current one. Tests can make it fail (``down``, ``fail_updates``) and act
as another replica (``write_spec``).
"""

from __future__ import annotations

import copy

from manager.client.errors import AlreadyExists, Conflict, NotFound, ServiceUnavailable
from manager.leaderelection.lease import LEASE
from manager.meta.object import Json
from manager.scheme import GroupVersionKind


class FakeLeases:
    """Leases keyed by namespace/name; update requires the resourceVersion last read."""

    def __init__(self, namespace: str, name: str) -> None:
        self.namespace, self.name = namespace, name
        self.writes: list[Json] = []  # every accepted write, in order
        self.leases: dict[tuple[str, str], Json] = {}
        self.rv = 0
        self.fail_updates: list[Exception] = []  # raised by the next updates, in order
        self.down = False

    def _key(self, obj: Json) -> tuple[str, str]:
        return obj["metadata"]["namespace"], obj["metadata"]["name"]

    async def get(self, kind: GroupVersionKind, name: str, namespace: str = "") -> Json:
        assert kind == LEASE
        if self.down:
            raise ServiceUnavailable("apiserver down")
        try:
            return copy.deepcopy(self.leases[(namespace, name)])
        except KeyError:
            raise NotFound(f"leases {name!r} not found") from None

    async def create(self, obj: Json) -> Json:
        if self.down:
            raise ServiceUnavailable("apiserver down")
        if self._key(obj) in self.leases:
            raise AlreadyExists("exists")
        return self._store(obj)

    async def update(self, obj: Json) -> Json:
        if self.down:
            raise ServiceUnavailable("apiserver down")
        if self.fail_updates:
            raise self.fail_updates.pop(0)
        current = self.leases[self._key(obj)]
        if obj["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise Conflict("the object has been modified")
        return self._store(obj)

    def _store(self, obj: Json) -> Json:
        obj = copy.deepcopy(obj)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.leases[self._key(obj)] = obj
        self.writes.append(copy.deepcopy(obj))
        return copy.deepcopy(obj)

    def spec(self) -> Json:
        """The stored Lease's spec (KeyError if there is none yet)."""
        spec: Json = self.leases[(self.namespace, self.name)]["spec"]
        return spec

    def write_spec(self, **spec: object) -> None:
        """Another replica writes the lease (e.g. its renewal)."""
        lease = self.leases.get((self.namespace, self.name)) or {
            "metadata": {"namespace": self.namespace, "name": self.name}
        }
        self._store({**lease, "spec": {**lease.get("spec", {}), **spec}})
