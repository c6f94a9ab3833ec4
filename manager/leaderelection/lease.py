"""The ``coordination.k8s.io/v1`` Lease lock: read and write a leader election record.

Writes are optimistic: ``update`` sends the Lease as last read (its resourceVersion), so two
candidates racing for one expired lease cannot both win -- the loser gets a ``Conflict``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from manager.meta.object import Json
from manager.meta.times import format_micro_time, parse_time
from manager.scheme import GroupVersionKind

LEASE = GroupVersionKind("coordination.k8s.io", "v1", "Lease")


@dataclass(frozen=True)
class LeaderElectionRecord:
    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: datetime | None = None
    renew_time: datetime | None = None
    leader_transitions: int = 0

    def to_spec(self) -> Json:
        spec: Json = {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.leader_transitions,
        }
        if self.acquire_time is not None:
            spec["acquireTime"] = format_micro_time(self.acquire_time)
        if self.renew_time is not None:
            spec["renewTime"] = format_micro_time(self.renew_time)
        return spec

    @classmethod
    def from_spec(cls, spec: Json) -> LeaderElectionRecord:
        return cls(
            holder_identity=spec.get("holderIdentity") or "",
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=parse_time(spec.get("acquireTime")),
            renew_time=parse_time(spec.get("renewTime")),
            leader_transitions=int(spec.get("leaseTransitions") or 0),
        )


class LeaseClient(Protocol):
    """The part of the client the lock needs (errors from ``manager.client.errors``)."""

    async def get(self, kind: GroupVersionKind, name: str, namespace: str = "") -> Json: ...

    async def create(self, obj: Json) -> Json: ...

    async def update(self, obj: Json) -> Json: ...


class LeaseLock:
    def __init__(
        self,
        client: LeaseClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        labels: dict[str, str] | None = None,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.labels = dict(labels or {})
        self._lease: Json | None = None

    async def get(self) -> tuple[LeaderElectionRecord, bytes]:
        """The current record and its raw bytes (to notice any change); raises ``NotFound``."""
        lease = await self.client.get(LEASE, self.name, self.namespace)
        self._lease = lease
        spec = lease.get("spec") or {}
        return LeaderElectionRecord.from_spec(spec), json.dumps(spec, sort_keys=True).encode()

    async def create(self, record: LeaderElectionRecord) -> None:
        metadata: Json = {"name": self.name, "namespace": self.namespace}
        if self.labels:
            metadata["labels"] = dict(self.labels)
        body = {
            "apiVersion": LEASE.api_version,
            "kind": LEASE.kind,
            "metadata": metadata,
            "spec": record.to_spec(),
        }
        self._lease = await self.client.create(body)

    async def update(self, record: LeaderElectionRecord) -> None:
        """Write ``record`` over the Lease last read; ``Conflict`` if someone wrote since."""
        if self._lease is None:
            raise RuntimeError("lease not initialized, call get or create first")
        metadata = dict(self._lease.get("metadata") or {})
        if self.labels:
            metadata["labels"] = {**(metadata.get("labels") or {}), **self.labels}
        body = {**self._lease, "metadata": metadata, "spec": record.to_spec()}
        self._lease = await self.client.update(body)

    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"
