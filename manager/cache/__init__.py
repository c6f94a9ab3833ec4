"""The informer cache: shared informers, indexed stores, selectors, and the seams they serve."""

from manager.cache.cache import (
    ByObject,
    Cache,
    CacheError,
    CacheNotStarted,
    CacheOptions,
    CacheSyncTimeout,
    FieldSelectorError,
    ResourceNotCached,
    not_found,
)
from manager.cache.informer import SharedInformer
from manager.cache.transform import strip_last_applied, strip_managed_fields

__all__ = [
    "ByObject",
    "Cache",
    "CacheError",
    "CacheNotStarted",
    "CacheOptions",
    "CacheSyncTimeout",
    "FieldSelectorError",
    "ResourceNotCached",
    "SharedInformer",
    "not_found",
    "strip_last_applied",
    "strip_managed_fields",
]
