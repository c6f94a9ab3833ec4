"""The client against a real kube-apiserver: CRUD, status, patch types, SSA, delete options."""

from __future__ import annotations

import pytest

from manager.client import AlreadyExists, Conflict, Invalid, NotFound, Patch, Preconditions, merge_from
from manager.client.metrics import requests_count
from manager.cluster import Cluster
from manager.scheme import GroupVersionKind

WIDGET = GroupVersionKind("envtest.example.com", "v1", "Widget")
CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")


def widget(name: str, namespace: str, size: int = 3) -> dict[str, object]:
    return {
        "apiVersion": "envtest.example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"size": size},
    }


def configmap(name: str, namespace: str, **data: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": dict(data),
    }


async def test_crud_and_errors(cluster: Cluster, widgets_crd: None, namespace: str) -> None:
    c = cluster.api_reader
    created = await c.create(widget("w1", namespace))
    assert created["spec"] == {"size": 3, "color": "red"}  # server-side default
    with pytest.raises(AlreadyExists):
        await c.create(widget("w1", namespace))
    with pytest.raises(Invalid) as invalid:
        await c.create(widget("w2", namespace, size=99))
    assert any("spec.size" in cause.get("field", "") for cause in invalid.value.causes)

    got = await c.get(WIDGET, "w1", namespace)
    assert got["metadata"]["uid"] == created["metadata"]["uid"]

    got["spec"]["size"] = 4
    updated = await c.update(got)
    assert updated["spec"]["size"] == 4
    assert updated["metadata"]["generation"] == 2
    stale = dict(created, spec={"size": 5})
    with pytest.raises(Conflict) as conflict:
        await c.update(stale)
    assert not isinstance(conflict.value, AlreadyExists)

    await c.delete(updated)
    with pytest.raises(NotFound):
        await c.get(WIDGET, "w1", namespace)
    with pytest.raises(NotFound):
        await c.delete(updated)


async def test_status_subresource_is_separate(cluster: Cluster, widgets_crd: None, namespace: str) -> None:
    c = cluster.api_reader
    created = await c.create(widget("s1", namespace))
    created["status"] = {"phase": "Running"}
    created["spec"]["size"] = 7
    after = await c.status.update(created)
    assert after["status"] == {"phase": "Running"}
    assert after["spec"]["size"] == 3  # spec changes through /status are ignored
    assert after["metadata"]["generation"] == 1
    patched = await c.status.patch(after, Patch.merge({"status": {"phase": "Done"}}))
    assert patched["status"]["phase"] == "Done"
    # A plain update does not touch status.
    patched["status"] = {"phase": "Ignored"}
    plain = await c.update(patched)
    assert plain["status"]["phase"] == "Done"


async def test_patch_types(cluster: Cluster, namespace: str) -> None:
    c = cluster.api_reader
    cm = await c.create(configmap("p1", namespace, a="1", b="2"))
    merged = await c.patch(cm, Patch.merge({"data": {"a": None, "c": "3"}}))
    assert merged["data"] == {"b": "2", "c": "3"}
    jsonp = await c.patch(cm, Patch.json([{"op": "replace", "path": "/data/b", "value": "20"}]))
    assert jsonp["data"] == {"b": "20", "c": "3"}
    strategic = await c.patch(cm, Patch.strategic({"metadata": {"labels": {"x": "y"}}}))
    assert strategic["metadata"]["labels"] == {"x": "y"}

    modified = {**strategic, "data": {"b": "21"}}
    computed = await c.patch(strategic, merge_from(strategic, modified))
    assert computed["data"] == {"b": "21"}
    # The optimistic lock makes a patch from a stale base fail instead of overwriting.
    with pytest.raises(Conflict):
        await c.patch(
            strategic, merge_from(strategic, {**strategic, "data": {"z": "1"}}, optimistic_lock=True)
        )


async def test_server_side_apply_with_field_managers(cluster: Cluster, namespace: str) -> None:
    c = cluster.api_reader
    mine = configmap("a1", namespace, owned="mine")
    applied = await c.apply(mine, field_owner="alpha")
    assert applied["data"] == {"owned": "mine"}
    managers = {m["manager"] for m in applied["metadata"]["managedFields"]}
    assert managers == {"alpha"}
    # Another manager changing alpha's field conflicts unless it forces.
    with pytest.raises(Conflict):
        await c.apply(configmap("a1", namespace, owned="theirs"), field_owner="beta")
    forced = await c.apply(configmap("a1", namespace, owned="theirs"), field_owner="beta", force=True)
    assert forced["data"] == {"owned": "theirs"}
    # Re-applying without a field alpha owned removes that field only if alpha still owns it.
    with pytest.raises(ValueError, match="field_owner"):
        await cluster.api_reader.with_field_owner("").apply(mine)


async def test_delete_preconditions_and_propagation(cluster: Cluster, namespace: str) -> None:
    c = cluster.api_reader
    owner = await c.create(configmap("owner", namespace))
    child = configmap("child", namespace)
    child["metadata"]["ownerReferences"] = [  # type: ignore[index]
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    ]
    await c.create(child)
    with pytest.raises(Conflict):
        await c.delete(owner, preconditions=Preconditions(uid="00000000-0000-0000-0000-000000000000"))
    with pytest.raises(Conflict):
        await c.delete(owner, preconditions=Preconditions(resource_version="1"))
    # Foreground: the owner gets the foregroundDeletion finalizer and stays until the garbage
    # collector (not running here) deletes the children.
    await c.delete(
        owner,
        propagation_policy="Foreground",
        preconditions=Preconditions(
            uid=owner["metadata"]["uid"], resource_version=owner["metadata"]["resourceVersion"]
        ),
    )
    pending = await c.get(CONFIGMAP, "owner", namespace)
    assert "foregroundDeletion" in pending["metadata"]["finalizers"]
    assert pending["metadata"]["deletionTimestamp"]


async def test_paged_list_and_request_metric(cluster: Cluster, namespace: str) -> None:
    c = cluster.api_reader
    for i in range(7):
        await c.create(configmap(f"l{i}", namespace, i=str(i)))
    host = cluster.transport.host
    before = requests_count("200", "GET", host)
    items, rv = await c.list_raw(CONFIGMAP, namespace=namespace, limit=2)
    names = sorted(i["metadata"]["name"] for i in items if i["metadata"]["name"].startswith("l"))
    assert names == [f"l{i}" for i in range(7)]
    assert rv
    # 8 objects (7 + kube-root-ca.crt may or may not exist) in pages of 2: at least 4 GETs.
    assert requests_count("200", "GET", host) - before >= 4
    selected = await c.list(CONFIGMAP, namespace=namespace, label_selector=None, limit=3)
    assert {i["metadata"]["name"] for i in selected} >= set(names)
