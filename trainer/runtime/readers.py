"""The cluster view the runtime framework reads through: the informer cache, with live fallbacks.

Why: the plugins read a few kinds the Trainer does not watch (PriorityClasses in the Volcano
validator, the Volcano PodGroup when its CRD is missing). Our cache refuses reads of kinds
without an informer (``ResourceNotCached``, no silent cluster-wide informers) where upstream
would start one lazily; such reads go to the API server instead. A kind the server does not
serve becomes an API error with upstream's text (``no matches for kind "PodGroup" in version
"scheduling.volcano.sh/v1beta1"``), so plugins report it like any failed read rather than
crashing. The webhooks additionally confirm a cache miss with a live GET (docs/divergences.md
T-3): a runtime created just before its TrainJob may not be cached yet. When that GET fails (the
API server unreachable, a 5xx) the cache's miss stands, which is what upstream's cache-only read
answers: the confirmation must not turn a transient API fault into a refusal (the chaos suite found a
runtime patch refused with ``Internal error`` while the JobSet it checks did not exist yet).

Whichever way an object is missing, the NotFound reads as the Go manager's cache words it
(``TrainingRuntime.trainer.kubeflow.org "x" not found``): upstream answers every one of these
reads from its cache, so the API server's text (``trainingruntimes...``) must not leak through
the live fallbacks into conditions, events or webhook denials.
"""

from __future__ import annotations

import builtins

import structlog

from manager.cache.cache import ResourceNotCached, not_found
from manager.client.errors import ApiError, NotFound, RequestError, is_transient
from manager.client.interfaces import ListQuery, Reader, TypedReader
from manager.client.restmapper import NoKindMatch
from manager.meta.object import Json
from manager.scheme import GroupVersionKind

__all__ = ["CacheReader", "no_kind_match_error"]

log = structlog.get_logger("trainer.runtime")


def no_kind_match_error(gvk: GroupVersionKind) -> ApiError:
    """apimachinery's ``NoKindMatchError`` text, as an API error the plugins handle."""
    return ApiError(f'no matches for kind "{gvk.kind}" in version "{gvk.api_version}"')


class CacheReader(TypedReader):
    """Reads from the cache; uncached kinds live; ``confirm_misses`` re-reads a cache miss live."""

    def __init__(self, cache: Reader, live: Reader, *, confirm_misses: bool = False) -> None:
        self._cache = cache
        self._live = live
        self._confirm_misses = confirm_misses

    async def _live_get(self, gvk: GroupVersionKind, name: str, namespace: str) -> Json:
        if not name:  # a GET without a name reads the collection; no object has an empty name
            raise not_found(gvk, name)
        try:
            return await self._live.get(gvk, name, namespace)
        except NoKindMatch:
            raise no_kind_match_error(gvk) from None
        except NotFound:
            raise not_found(gvk, name) from None  # the cache's words, as upstream reads the cache

    async def _get_object(self, gvk: GroupVersionKind, name: str, namespace: str) -> Json:
        try:
            return await self._cache.get(gvk, name, namespace)
        except ResourceNotCached:
            return await self._live_get(gvk, name, namespace)
        except NotFound as miss:
            if not self._confirm_misses:
                raise not_found(gvk, name) from miss
            return await self._confirm_miss(gvk, name, namespace, miss)

    async def _confirm_miss(self, gvk: GroupVersionKind, name: str, namespace: str, miss: NotFound) -> Json:
        """The object the cache does not have, read live; the cache's miss when that read fails."""
        try:
            return await self._live_get(gvk, name, namespace)
        except RequestError as err:
            if not is_transient(err):
                raise
            log.debug(
                "live read of a cache miss failed; the cache's answer stands",
                kind=gvk.kind,
                name=name,
                error=str(err),
            )
            raise not_found(gvk, name) from miss

    async def _list_objects(self, gvk: GroupVersionKind, query: ListQuery) -> builtins.list[Json]:
        # only the selection is passed on: copies, every match (the plugins' reads are small)
        try:
            return await self._cache.list(gvk, **query.selection())
        except ResourceNotCached:
            try:
                return await self._live.list(gvk, **query.selection())
            except NoKindMatch:
                raise no_kind_match_error(gvk) from None
