"""List then watch one resource, keeping a store in step (client-go's Reflector, on asyncio).

* The state is read as client-go v0.35+ reads it by default (``WatchListClient``): one watch
  with ``sendInitialEvents`` whose first events are every object, then a bookmark annotated
  ``k8s.io/initial-events-end``; the store is replaced with what came before it and the same
  watch goes on with the changes. The API server streams it from its watch cache while this
  process decodes it (no page round trips, no separate watch). A server that refuses it, or
  ends the stream before the bookmark, is read with a paged (``limit``/``continue``) consistent
  LIST instead, then watched from the list's resourceVersion.
* Watches have bookmarks on and a server-side ``timeoutSeconds`` drawn from [min, 2*min) so
  thousands of watches do not reconnect together.
* A normal stream end (server timeout) or an inactivity timeout re-watches from the last seen
  resourceVersion (bookmarks advance it) without reading the state again.
* 410 Gone reads the state again at the last resourceVersion ("not older than"); if that is
  gone too, fresh. The new state is diffed against the store by the ``Sink``: vanished objects
  become deletes, changed ones updates — so no change made while disconnected is missed.
* Other errors back off (0.8 s .. 30 s, jittered) and then read the state again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from manager.cache.backoff import ReflectorBackoff
from manager.client.client import Client
from manager.client.errors import ApiError, Gone, TooManyRequests
from manager.client.restmapper import RESTMapping
from manager.meta.object import Json as Object

log = logging.getLogger(__name__)

#: The annotation of the bookmark that ends a watch-list's initial events (metav1.InitialEventsAnnotationKey).
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class _NoInitialEventsEnd(Exception):
    """A watch-list stream ended before its initial-events-end bookmark."""


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
    watch_list: bool = True
    """Read the state as a watch-list stream (client-go's default since v0.35); False: a paged LIST."""


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
        self.lists = 0  # how many paged LISTs were made (observability and tests)
        self.streamed = 0  # how many times the state came as a watch-list stream
        self.watches = 0  # how many watches were opened (a watch-list's included)
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
        self._replace(items, rv, prepare is not None, "list")

    @property
    def syncs(self) -> int:
        """How many times the whole state was read, by LIST or watch-list."""
        return self.lists + self.streamed

    def _replace(self, items: Sequence[Object | bytes], rv: str, prepared: bool, how: str) -> None:
        namespace = self.options.namespace if self.mapping.namespaced else None
        self.sink.replace(items, namespace, not self._listed_once, prepared=prepared)
        self._listed_once = True
        self.last_resource_version = rv
        # client-go's "Caches populated" (V(2)/info there), with structured key/values
        log.debug(
            "Caches populated",
            extra={"type": str(self.mapping.gvk), "items": len(items), "resourceVersion": rv, "by": how},
        )

    def _expired(self) -> None:
        self.expired += 1
        log.info("watch of %s expired at rv %s: relisting", self.mapping.gvk, self.last_resource_version)

    async def _sync(self) -> AsyncIterator[Object] | None:
        """Read the whole state into the sink: as a watch-list stream when the server serves one
        (returns that watch, to be followed), else by a paged LIST (returns None)."""
        if self.options.watch_list:
            try:
                return await self._stream_state(self.last_resource_version)
            except Gone:
                # the last resourceVersion is compacted away (or the stream was expired on its
                # way): the current state instead
                self._expired()
                return await self._stream_state("")
            except TooManyRequests:
                raise  # throttled: run() waits and retries the watch-list, no LIST
            except (ApiError, _NoInitialEventsEnd) as err:
                # client-go falls back to a LIST the same way ("expected if watchlist is not
                # supported or disabled in kube-apiserver")
                log.info("watch-list of %s not served (%s): listing instead", self.mapping.gvk, err)
        await self._relist()
        return None

    async def _stream_state(self, resource_version: str) -> AsyncIterator[Object]:
        """One watch-list: collect the initial events (each through the sink's ``prepare`` as it
        arrives, as a paged LIST does per page), replace the store with them at the
        initial-events-end bookmark, and return the watch to follow from there."""
        prepare = getattr(self.sink, "prepare", None)
        api_version, kind = self.mapping.gvk.api_version, self.mapping.gvk.kind
        events = self._open_watch(resource_version, send_initial_events=True)
        items: list[Object | bytes] = []
        try:
            async for event in events:
                obj = event.get("object") or {}
                if event.get("type") == "ADDED":
                    obj.setdefault("apiVersion", api_version)
                    obj.setdefault("kind", kind)
                    items.append(prepare(obj) if prepare is not None else obj)
                elif event.get("type") == "BOOKMARK":
                    meta = obj.get("metadata") or {}
                    if (meta.get("annotations") or {}).get(INITIAL_EVENTS_END) == "true":
                        self.streamed += 1
                        self._replace(
                            items, meta.get("resourceVersion") or "", prepare is not None, "watch-list"
                        )
                        return events
                else:  # before the initial state is complete the server sends only ADDED
                    log.warning(
                        "unexpected %r event in %s's initial events", event.get("type"), self.mapping.gvk
                    )
        except BaseException:
            await events.aclose()  # type: ignore[attr-defined]
            raise
        raise _NoInitialEventsEnd("the stream ended before the initial-events-end bookmark")

    async def _relist(self) -> None:
        """Relist at the last RV; if the server has compacted past it, list fresh."""
        if not self.last_resource_version:
            await self._list(None)
            return
        try:
            await self._list(self.last_resource_version)
        except Gone:
            await self._list(None)

    def _open_watch(
        self, resource_version: str, *, send_initial_events: bool = False
    ) -> AsyncIterator[Object]:
        o = self.options
        timeout = self._watch_timeout()
        inactivity = o.inactivity_timeout if o.inactivity_timeout is not None else timeout + 60
        self.watches += 1
        return self.client.watch(
            self.mapping,
            namespace=o.namespace,
            resource_version=resource_version or None,
            label_selector=o.label_selector,
            field_selector=o.field_selector,
            timeout_seconds=timeout,
            # a watch-list's end is a bookmark: asked for whatever allow_bookmarks says
            allow_bookmarks=o.allow_bookmarks or send_initial_events,
            inactivity_timeout=inactivity,
            send_initial_events=send_initial_events,
        )

    async def _follow(self, events: AsyncIterator[Object]) -> None:
        """Apply one watch's events to the sink; returns when the server ends it."""
        async with contextlib.aclosing(events):  # type: ignore[type-var]
            async for event in events:
                self._apply(event)

    def _apply(self, event: Object) -> None:
        """One watch event into the sink; the last RV advances past it."""
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
            return
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
                events = None
                if need_list:
                    events = await self._sync()
                    need_list = False
                await self._follow(events or self._open_watch(self.last_resource_version))
            except asyncio.CancelledError:
                raise
            except Gone:
                self._expired()
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
