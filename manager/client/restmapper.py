"""GVK -> resource (plural) and scope, discovered lazily from the API server.

Like controller-runtime's dynamic REST mapper: a group-version is fetched the first time one
of its kinds is asked for, and fetched again when a kind is unknown (a CRD may have just been
installed); only then does the lookup fail with ``NoKindMatch``.

A discovery request that gets no answer or a transient one (connection refused while the API
server restarts, 429, 5xx) is retried with backoff for up to ``retry_seconds`` before the error
is raised: a manager starting while the API server is briefly away waits for it instead of
exiting (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Protocol

from manager import loops
from manager.client.errors import NotFound, RequestError, is_transient
from manager.errors import Error
from manager.meta.object import Json
from manager.scheme import GroupVersionKind

log = logging.getLogger(__name__)


class DiscoveryTransport(Protocol):
    """What discovery needs from the HTTP layer (``RestTransport`` is one)."""

    async def request(self, method: str, path: str) -> Json:
        """The decoded JSON body; ``NotFound`` for a group-version the server does not serve."""
        ...


class NoKindMatch(Error, LookupError):
    """The API server does not serve this kind (CRD missing, or a typo)."""

    def __init__(self, gvk: GroupVersionKind) -> None:
        super().__init__(f"no matches for kind {gvk.kind!r} in version {gvk.api_version!r}")
        self.gvk = gvk


@dataclass(frozen=True, slots=True)
class RESTMapping:
    gvk: GroupVersionKind
    plural: str
    namespaced: bool

    def base_path(self) -> str:
        """``/api/v1`` or ``/apis/<group>/<version>``."""
        g = self.gvk
        return f"/apis/{g.group}/{g.version}" if g.group else f"/api/{g.version}"

    def collection_path(self, namespace: str | None) -> str:
        if self.namespaced and namespace:
            return f"{self.base_path()}/namespaces/{namespace}/{self.plural}"
        return f"{self.base_path()}/{self.plural}"

    def object_path(self, name: str, namespace: str | None, subresource: str = "") -> str:
        path = f"{self.collection_path(namespace if self.namespaced else None)}/{name}"
        return f"{path}/{subresource}" if subresource else path


class RESTMapper:
    """Caches discovery per group-version; safe to share between clients and caches."""

    def __init__(self, transport: DiscoveryTransport, *, retry_seconds: float = 60.0) -> None:
        self._transport = transport
        self.retry_seconds = retry_seconds
        self._by_gv: dict[tuple[str, str], dict[str, RESTMapping]] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def add(self, mapping: RESTMapping) -> None:
        """Register a mapping without discovery (tests, or kinds known in advance)."""
        self._by_gv.setdefault((mapping.gvk.group, mapping.gvk.version), {})[mapping.gvk.kind] = mapping

    async def mapping(self, gvk: GroupVersionKind) -> RESTMapping:
        gv = (gvk.group, gvk.version)
        known = self._by_gv.get(gv)
        if known is not None and gvk.kind in known:
            return known[gvk.kind]
        if loops.in_guest():  # discovery runs where its locks and the HTTP session live
            return await loops.on_host(self.mapping(gvk))
        lock = self._locks.setdefault(gv, asyncio.Lock())
        async with lock:
            known = self._by_gv.get(gv)
            if known is not None and gvk.kind in known:
                return known[gvk.kind]  # another task discovered it meanwhile
            await self._discover(gvk)
        found = self._by_gv.get(gv, {}).get(gvk.kind)
        if found is None:
            raise NoKindMatch(gvk)
        return found

    async def _discover(self, gvk: GroupVersionKind) -> None:
        path = f"/apis/{gvk.group}/{gvk.version}" if gvk.group else f"/api/{gvk.version}"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry_seconds
        delay = 0.5
        while True:
            try:
                body = await self._transport.request("GET", path)
                break
            except NotFound:
                raise NoKindMatch(gvk) from None
            except RequestError as err:
                if not is_transient(err) or loop.time() + delay > deadline:
                    raise
                log.info("discovery of %s failed, retrying in %.1fs: %s", path, delay, err)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        mappings: dict[str, RESTMapping] = {}
        for resource in body.get("resources", []):
            if "/" in resource["name"]:
                continue  # subresources such as pods/status
            kgvk = GroupVersionKind(gvk.group, gvk.version, resource["kind"])
            mappings[resource["kind"]] = RESTMapping(kgvk, resource["name"], bool(resource["namespaced"]))
        self._by_gv[(gvk.group, gvk.version)] = mappings
