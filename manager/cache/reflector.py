"""List then watch one resource, keeping a store in step (client-go's Reflector, on asyncio).

* Initial list is paginated (``limit``/``continue``) and consistent; the watch starts from the
  list's resourceVersion with bookmarks on and a server-side ``timeoutSeconds`` drawn from
  [min, 2*min) so thousands of watches do not reconnect together.
* A normal stream end (server timeout) or an inactivity timeout re-watches from the last seen
  resourceVersion (bookmarks advance it) without listing.
* 410 Gone relists at the last resourceVersion ("not older than"); if that is gone too, a fresh
  consistent list. The relist is diffed against the store by the ``Sink``: vanished objects
  become deletes, changed ones updates — so no change made while disconnected is missed.
* Other errors back off (0.8 s .. 30 s, jittered) and then relist.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from manager.cache.backoff import ReflectorBackoff
from manager.client.client import Client
from manager.client.errors import Gone, TooManyRequests
from manager.client.restmapper import RESTMapping
from manager.meta.object import Json as Object

log = logging.getLogger(__name__)


class Sink(Protocol):
    """Where a reflector delivers what it learns (the informer)."""

    def replace(
        self,
        items: Sequence[Object | bytes],
        namespace: str | None,
        initial: bool,
        *,
        prepared: bool = False,
    ) -> None:
        """``prepared``: the items already went through the sink's optional ``prepare`` (which
        may return an object's stored form, bytes)."""
        ...

    def upsert(self, obj: Object) -> None: ...

    def remove(self, obj: Object) -> None: ...


@dataclass
class ListWatchOptions:
    namespace: str | None = None
    label_selector: str | Mapping[str, str] | None = None
    field_selector: str | Mapping[str, str] | None = None
    page_size: int = 500
    min_watch_timeout: float = 300.0
    inactivity_timeout: float | None = None
    allow_bookmarks: bool = True


class Reflector:
    def __init__(
        self,
        client: Client,
        mapping: RESTMapping,
        sink: Sink,
        options: ListWatchOptions | None = None,
        *,
        backoff: ReflectorBackoff | None = None,
    ) -> None:
        self.client = client
        self.mapping = mapping
        self.sink = sink
        self.options = options or ListWatchOptions()
        self.backoff = backoff or ReflectorBackoff()
        self.last_resource_version = ""
        self.lists = 0  # how many LISTs were made (observability and tests)
        self.watches = 0
        self.expired = 0  # how many watches ended in 410 Gone
        self._listed_once = False

    def _watch_timeout(self) -> int:
        low = self.options.min_watch_timeout
        return max(1, int(low * (1 + random.random())))

    async def _list(self, resource_version: str | None) -> None:
        o = self.options
        # A sink that transforms what it stores (the informer) does so page by page here:
        # a relist of 100k Pods then never holds 100k whole Pods at once.
        prepare = getattr(self.sink, "prepare", None)
        items, rv = await self.client.list_raw(
            self.mapping.gvk,
            namespace=o.namespace,
            label_selector=o.label_selector,
            field_selector=o.field_selector,
            limit=o.page_size,
            resource_version=resource_version,
            transform=prepare,
        )
        self.lists += 1
        namespace = o.namespace if self.mapping.namespaced else None
        self.sink.replace(items, namespace, not self._listed_once, prepared=prepare is not None)
        self._listed_once = True
        self.last_resource_version = rv
        # client-go's "Caches populated" (V(2)/info there), with structured key/values
        log.debug(
            "Caches populated",
            extra={"type": str(self.mapping.gvk), "items": len(items), "resourceVersion": rv},
        )

    async def _relist(self) -> None:
        """Relist at the last RV; if the server has compacted past it, list fresh."""
        if not self.last_resource_version:
            await self._list(None)
            return
        try:
            await self._list(self.last_resource_version)
        except Gone:
            await self._list(None)

    async def _watch(self) -> None:
        """One watch connection; returns when the server ends it."""
        o = self.options
        timeout = self._watch_timeout()
        inactivity = o.inactivity_timeout if o.inactivity_timeout is not None else timeout + 60
        self.watches += 1
        events = self.client.watch(
            self.mapping,
            namespace=o.namespace,
            resource_version=self.last_resource_version,
            label_selector=o.label_selector,
            field_selector=o.field_selector,
            timeout_seconds=timeout,
            allow_bookmarks=o.allow_bookmarks,
            inactivity_timeout=inactivity,
        )
        async for event in events:
            kind = event.get("type")
            obj = event.get("object") or {}
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if kind == "BOOKMARK":
                pass
            elif kind in ("ADDED", "MODIFIED"):
                obj.setdefault("apiVersion", self.mapping.gvk.api_version)
                obj.setdefault("kind", self.mapping.gvk.kind)
                self.sink.upsert(obj)
            elif kind == "DELETED":
                obj.setdefault("apiVersion", self.mapping.gvk.api_version)
                obj.setdefault("kind", self.mapping.gvk.kind)
                self.sink.remove(obj)
            else:
                log.warning("unexpected watch event type %r for %s", kind, self.mapping.gvk)
                continue
            if rv:
                self.last_resource_version = rv

    async def run(self) -> None:
        """List and watch until cancelled.

        A reflector that already listed resumes watching from its last resourceVersion when
        run again (a restarted informer task picks up where it left off; the server answers
        410 if it cannot, and the relist repairs the store).
        """
        need_list = not self.last_resource_version
        log.debug(
            "Listing and watching",
            extra={"type": str(self.mapping.gvk), "namespace": self.options.namespace or ""},
        )
        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                await self._watch()
            except asyncio.CancelledError:
                raise
            except Gone:
                self.expired += 1
                log.info(
                    "watch of %s expired at rv %s: relisting", self.mapping.gvk, self.last_resource_version
                )
                need_list = True
            except TimeoutError:
                log.info("watch of %s idle too long: reconnecting", self.mapping.gvk)
            except TooManyRequests as err:
                # Throttled, or the server's watch cache is (re)initializing: wait, then retry
                # the same step (a throttled watch does not need a relist).
                delay = max(self.backoff.next(), err.retry_after or 0.0)
                log.info("list/watch of %s throttled: retrying in %.1fs", self.mapping.gvk, delay)
                await asyncio.sleep(delay)
            except Exception as err:
                delay = self.backoff.next()
                log.warning("list/watch of %s failed (%s): retrying in %.1fs", self.mapping.gvk, err, delay)
                need_list = True
                await asyncio.sleep(delay)
