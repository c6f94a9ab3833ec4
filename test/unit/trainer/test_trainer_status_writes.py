"""StatusWrites: which of our status writes the cache has not seen yet."""

from __future__ import annotations

from trainer.controllers.status_writes import StatusWrites


def obj(rv: str, name: str = "a", namespace: str = "ns") -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": rv}}


def test_only_an_older_copy_of_an_object_we_wrote_is_behind() -> None:
    writes = StatusWrites()
    assert not writes.cache_is_behind(obj("5"))  # never written by us
    writes.wrote(obj("10"))
    assert writes.cache_is_behind(obj("9"))
    assert not writes.cache_is_behind(obj("9", name="b"))  # another object
    assert not writes.cache_is_behind(obj("9", namespace="other"))
    assert not writes.cache_is_behind(obj("12"))  # newer (another writer's): go on, and forget
    assert len(writes) == 0
    assert not writes.cache_is_behind(obj("9"))


def test_caught_up_forgets_and_gone_forgets() -> None:
    writes = StatusWrites()
    writes.wrote(obj("10"))
    assert not writes.cache_is_behind(obj("10"))
    assert len(writes) == 0
    writes.wrote(obj("11"))
    writes.forget("ns", "a")
    assert not writes.cache_is_behind(obj("3"))


def test_resource_versions_that_are_not_numbers_are_never_older() -> None:
    writes = StatusWrites()
    writes.wrote(obj("abc"))
    assert not writes.cache_is_behind(obj("1"))
    writes.wrote(obj("10"))
    assert not writes.cache_is_behind(obj("x9"))
    writes.wrote({"metadata": {"name": "a", "namespace": "ns"}})  # no resourceVersion: nothing kept
    writes.wrote("not an object")
    assert len(writes) == 1
