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


def with_uid(uid: str, rv: str = "5", name: str = "a") -> dict[str, object]:
    o = obj(rv, name=name)
    o["metadata"]["uid"] = uid  # type: ignore[index]
    return o


def test_an_object_the_server_deleted_stays_deleted_until_the_cache_drops_it() -> None:
    writes = StatusWrites()
    writes.wrote(with_uid("u1", rv="10"))
    writes.deleted(with_uid("u1", rv="9"))
    assert writes.deleted_on_server(with_uid("u1", rv="9"))
    assert writes.deleted_on_server(with_uid("u1", rv="10"))  # whatever version the cache holds
    assert not writes.cache_is_behind(with_uid("u1", rv="9"))  # the write is no longer waited for
    assert not writes.deleted_on_server(with_uid("u1", name="b"))  # another object
    writes.forget("ns", "a")  # the cache saw the delete
    assert not writes.deleted_on_server(with_uid("u1"))
    assert len(writes) == 0


def test_a_new_object_of_the_same_name_is_not_the_deleted_one() -> None:
    writes = StatusWrites()
    writes.deleted(with_uid("u1"))
    assert not writes.deleted_on_server(with_uid("u2"))
    assert len(writes) == 0  # and the old uid is forgotten
    writes.deleted(obj("5"))  # no uid: nothing to tell it by, nothing kept
    assert len(writes) == 0
