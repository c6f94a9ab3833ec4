"""Which status writes of ours the cache has not seen yet (one per object, by resourceVersion).

Why: a reconcile reads the object from the cache. Right after this process wrote an object's
status, another watch event (its Job created a moment before, the owned JobSet's update) can
start a reconcile while the cache still holds the object as it was before that write. That pass
computes the status again from the old object and PUTs it with the old resourceVersion: a 409
Conflict every time (98 per 300 suspended TrainJobs with 5 JobSet workers, docs/bench.md). Our
own write's watch event is on its way and reconciles the object again from the newer state, so
the stale pass can skip its status write: the write the 409 would have refused anyway. The
TrainJob reconciler skips the whole pass (level v2.3 merge-patches its status, so there is no 409
to stop it, and a pass from before a deadline failure would re-create the deleted JobSet); the
JobSet reconciler skips only its status write.

Only our own writes are remembered, and only their resourceVersion: a cache that holds the same
or a newer version (another writer's), a resourceVersion that is not a number, or an object this
process never wrote goes on as before.
"""

from __future__ import annotations

from manager.meta.object import Json, meta_of


def _key(obj: Json) -> tuple[str, str]:
    meta = meta_of(obj)
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _rv(obj: Json) -> str:
    return str(meta_of(obj).get("resourceVersion") or "")


class StatusWrites:
    """The resourceVersion each of our last status writes returned, per (namespace, name)."""

    def __init__(self) -> None:
        self._written: dict[tuple[str, str], str] = {}

    def wrote(self, stored: object) -> None:
        """Remember the object the server returned for a status write of ours."""
        if isinstance(stored, dict) and _rv(stored):
            self._written[_key(stored)] = _rv(stored)

    def cache_is_behind(self, cached: Json) -> bool:
        """Whether ``cached`` is older than our last status write of it (the write's own watch
        event will reconcile it again). resourceVersions are compared as numbers, which the API
        server's are; anything else is never called older."""
        written = self._written.get(_key(cached))
        seen = _rv(cached)
        if written is None or not (written.isdigit() and seen.isdigit()):
            return False
        if int(seen) >= int(written):
            del self._written[_key(cached)]  # caught up: nothing to wait for any more
            return False
        return True

    def forget(self, namespace: str, name: str) -> None:
        """The object is gone."""
        self._written.pop((namespace or "", name), None)

    def __len__(self) -> int:
        return len(self._written)
