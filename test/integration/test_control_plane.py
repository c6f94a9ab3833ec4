"""The local control plane is a real Kubernetes API: CRDs, CRUD, watch, conflicts, validation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from manager.envtest import Environment

GROUP, VERSION, PLURAL = "envtest.example.com", "v1", "widgets"
MERGE = "application/merge-patch+json"
TESTDATA = Path(__file__).parent / "testdata"


@pytest.fixture
async def widgets(control_plane: Environment, kube: client.ApiClient) -> client.CustomObjectsApi:
    await control_plane.install_crds([TESTDATA / "widgets-crd.yaml"])
    return client.CustomObjectsApi(kube)


def widget(name: str, size: int) -> dict[str, object]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": size},
    }


async def test_custom_object_lifecycle(widgets: client.CustomObjectsApi, namespace: str) -> None:
    created = await widgets.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, widget("w1", 3)
    )
    # The CRD's structural schema default was applied by the server.
    assert created["spec"] == {"size": 3, "color": "red"}
    rv = created["metadata"]["resourceVersion"]

    got = await widgets.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "w1")
    assert got["metadata"]["uid"] == created["metadata"]["uid"]

    await widgets.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, widget("w2", 5))
    listed = await widgets.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    assert sorted(i["metadata"]["name"] for i in listed["items"]) == ["w1", "w2"]

    got["spec"]["size"] = 4
    updated = await widgets.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "w1", got)
    assert updated["spec"]["size"] == 4
    assert updated["metadata"]["resourceVersion"] != rv

    stale = dict(got, metadata={**got["metadata"], "resourceVersion": rv})
    stale["spec"] = {"size": 6}
    with pytest.raises(ApiException) as conflict:
        await widgets.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "w1", stale)
    assert conflict.value.status == 409

    await widgets.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "w1")
    with pytest.raises(ApiException) as missing:
        await widgets.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "w1")
    assert missing.value.status == 404


async def test_watch_delivers_events(widgets: client.CustomObjectsApi, namespace: str) -> None:
    listed = await widgets.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    since = listed["metadata"]["resourceVersion"]
    seen: list[tuple[str, str]] = []

    async def consume() -> None:
        w = watch.Watch()
        async with w.stream(
            widgets.list_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            resource_version=since,
            timeout_seconds=30,
        ) as stream:
            async for event in stream:
                seen.append((event["type"], event["object"]["metadata"]["name"]))
                if len(seen) == 3:
                    return

    task = asyncio.create_task(consume())
    await widgets.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, widget("watched", 1))
    await widgets.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "watched", {"spec": {"size": 2}}, _content_type=MERGE
    )
    await widgets.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "watched")
    await asyncio.wait_for(task, 30)
    assert seen == [("ADDED", "watched"), ("MODIFIED", "watched"), ("DELETED", "watched")]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"size": 0}, "spec.size"),
        ({"size": 11}, "spec.size"),
        ({"size": 2, "color": "pink"}, "spec.color"),
        ({}, "spec.size"),
    ],
)
async def test_schema_rejects_invalid_objects(
    widgets: client.CustomObjectsApi, namespace: str, spec: dict[str, object], field: str
) -> None:
    bad = {**widget("bad", 1), "spec": spec}
    with pytest.raises(ApiException) as rejected:
        await widgets.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, bad)
    assert rejected.value.status == 422
    assert field in rejected.value.body


async def test_status_subresource_is_separate(widgets: client.CustomObjectsApi, namespace: str) -> None:
    await widgets.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, widget("s", 1))
    # A status written through the main resource is ignored ...
    await widgets.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "s", {"status": {"phase": "X"}}, _content_type=MERGE
    )
    got = await widgets.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "s")
    assert "status" not in got
    # ... and lands through /status.
    await widgets.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, "s", {"status": {"phase": "Ready"}}, _content_type=MERGE
    )
    got = await widgets.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "s")
    assert got["status"] == {"phase": "Ready"}
