"""scheduling.x-k8s.io PodGroup and ElasticQuota CRDs on a real kube-apiserver: schema rules."""

from __future__ import annotations

from typing import Any

import pytest
from crdtest import Resource, assert_invalid

from manager.envtest import Environment
from manager.meta.quantity import Quantity
from trainer.api import scheduling_constants as c
from trainer.api.scheduling_v1alpha1 import ElasticQuota, PodGroup


@pytest.fixture
def podgroups(resources) -> Resource:  # type: ignore[no-untyped-def]
    return resources(c.GROUP, c.VERSION, "podgroups")


@pytest.fixture
def quotas(resources) -> Resource:  # type: ignore[no-untyped-def]
    return resources(c.GROUP, c.VERSION, "elasticquotas")


def pod_group(name: str, spec: dict[str, Any] | None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": PodGroup.api_version,
        "kind": PodGroup.kind,
        "metadata": {"name": name},
    }
    if spec is not None:
        obj["spec"] = spec
    return obj


def quota(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": ElasticQuota.api_version,
        "kind": ElasticQuota.kind,
        "metadata": {"name": name},
        "spec": spec,
    }


@pytest.mark.parametrize(
    "spec",
    [
        None,
        {},
        {"minMember": 1},
        {"minMember": 102, "minResources": {"cpu": "102", "memory": "408Gi"}, "scheduleTimeoutSeconds": 100},
        # No validation on the timeout: 0 and negatives are stored (the scheduler falls back).
        {"scheduleTimeoutSeconds": 0},
        {"scheduleTimeoutSeconds": -5},
        {"minResources": {"cpu": 2, "nvidia.com/gpu": "1", "memory": "1.5Gi", "ephemeral": "1e3"}},
    ],
)
async def test_pod_group_accepts(podgroups: Resource, spec: dict[str, Any] | None) -> None:
    status, body = await podgroups.create(pod_group("pg", spec))
    assert status == 201, body
    assert body.get("spec") == spec or (spec is None and "spec" not in body)
    # No defaults anywhere: what was sent is what is stored, and the model keeps it as is.
    assert PodGroup.from_dict(body).to_dict() == body


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"minMember": 0},
            "spec.minMember: Invalid value: 0: spec.minMember in body should be greater than or equal to 1",
        ),
        ({"minMember": -1}, "should be greater than or equal to 1"),
        ({"minResources": {"cpu": "one"}}, "spec.minResources.cpu"),
        ({"minResources": {"memory": "1GB"}}, "spec.minResources.memory"),
        ({"minMember": "3"}, 'spec.minMember: Invalid value: "string"'),
    ],
)
async def test_pod_group_rejects(podgroups: Resource, spec: dict[str, Any], message: str) -> None:
    status, body = await podgroups.create(pod_group("pg", spec))
    assert_invalid(status, body, message)


async def test_pod_group_status_is_a_subresource(podgroups: Resource) -> None:
    status, created = await podgroups.create(pod_group("pg", {"minMember": 3}))
    assert status == 201, created
    created["status"] = {"phase": "Scheduling", "running": 1}
    status, body = await podgroups.replace(created)
    assert status == 200, body
    assert "status" not in body
    created["metadata"] = body["metadata"]
    status, body = await podgroups.replace_status(created)
    assert status == 200, body
    assert body["status"] == {"phase": "Scheduling", "running": 1}
    loaded = PodGroup.from_dict(body)
    assert loaded.status is not None and loaded.status.phase == c.PodGroupScheduling


async def test_elastic_quota_quantities(quotas: Resource) -> None:
    spec = {"min": {"cpu": "3", "memory": 5}, "max": {"cpu": "5000m", "memory": "15", "nvidia.com/gpu": 1}}
    status, created = await quotas.create(quota("eq", spec))
    assert status == 201, created
    assert created["spec"] == spec
    loaded = ElasticQuota.from_dict(created)
    assert loaded.spec is not None
    assert loaded.spec.max_quantities()["cpu"] == Quantity("5")
    created["status"] = {"used": {"cpu": "1000m", "memory": 2}}
    status, body = await quotas.replace_status(created)
    assert status == 200, body
    used = ElasticQuota.from_dict(body).status.used_quantities()  # type: ignore[union-attr]
    assert used == {"cpu": Quantity("1"), "memory": Quantity("2")}
    body["status"] = {"used": {"cpu": "lots"}}
    status, bad = await quotas.replace_status(body)
    assert_invalid(status, bad, "status.used.cpu")
    status, bad = await quotas.create(quota("bad", {"min": {"cpu": "1x"}}))
    assert_invalid(status, bad, "spec.min.cpu")


async def test_discovery_names(control_plane: Environment) -> None:
    status, body = await control_plane.request("GET", f"/apis/{c.GROUP}/{c.VERSION}")
    assert status == 200, body
    found = {r["name"]: r for r in body["resources"]}
    assert found["podgroups"]["shortNames"] == ["pg", "pgs"]
    assert found["elasticquotas"]["shortNames"] == ["eq", "eqs"]
    assert found["podgroups"]["namespaced"] and found["elasticquotas"]["namespaced"]
    assert "podgroups/status" in found and "elasticquotas/status" in found
