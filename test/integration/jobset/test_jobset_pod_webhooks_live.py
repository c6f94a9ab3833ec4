"""Exclusive-placement pod webhooks behind a real API server (jobset.md 3.2, 3.3)."""

from __future__ import annotations

from typing import Any

import pytest
from jsharness import Harness

from manager.client.errors import ApiError
from manager.scheme import GroupVersionKind
from manager.testing import eventually
from trainer.api import jobset_constants as c

Object = dict[str, Any]
NODE = GroupVersionKind("", "v1", "Node")
TOPOLOGY = "cloud.google.com/gke-nodepool"


def pod(
    namespace: str, name: str, index: str, job_index: str, *, node: str | None = None, owner_uid: str
) -> Object:
    spec: Object = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                c.JobSetNameKey: "js",
                c.ReplicatedJobNameKey: "rjob",
                c.JobIndexKey: job_index,
                c.JobKey: f"key-{job_index}",
            },
            "annotations": {
                c.JobSetNameKey: "js",
                c.ExclusiveKey: TOPOLOGY,
                c.JobCompletionIndexAnnotation: index,
            },
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": f"js-rjob-{job_index}",
                    "uid": owner_uid,
                    "controller": True,
                }
            ],
        },
        "spec": spec,
    }


async def test_leader_affinity_and_follower_pinning(with_webhooks: Harness) -> None:
    h = with_webhooks
    node_name = f"pool-node-{h.namespace}"
    await h.api.create(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name, "labels": {TOPOLOGY: "pool-a"}}}
    )
    try:
        uid0 = "00000000-0000-0000-0000-000000000000"
        leader = await h.create(
            pod(h.namespace, "js-rjob-0-0-aaaaa", "0", "0", node=node_name, owner_uid=uid0)
        )
        anti = leader["spec"]["affinity"]["podAntiAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ][0]
        affinity = leader["spec"]["affinity"]["podAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ][0]
        assert affinity["labelSelector"] == {
            "matchExpressions": [{"key": c.JobKey, "operator": "In", "values": ["key-0"]}]
        }
        assert affinity["topologyKey"] == TOPOLOGY and anti["topologyKey"] == TOPOLOGY
        assert anti["labelSelector"]["matchExpressions"][:2] == [
            {"key": c.JobKey, "operator": "Exists"},
            {"key": c.JobKey, "operator": "NotIn", "values": ["key-0"]},
        ]

        async def follower_pinned() -> Object:
            # the webhook reads the leader from the manager's cache, which may lag a moment
            try:
                created: Object = await h.create(
                    pod(h.namespace, "js-rjob-0-1-bbbbb", "1", "0", owner_uid=uid0)
                )
            except ApiError as err:
                raise AssertionError(str(err)) from err
            return created

        follower = await eventually(follower_pinned, timeout=20)
        assert follower["spec"]["nodeSelector"] == {TOPOLOGY: "pool-a"}

        uid1 = "11111111-1111-1111-1111-111111111111"
        await h.create(
            pod(h.namespace, "js-rjob-1-0-ccccc", "0", "1", owner_uid=uid1)
        )  # leader, not scheduled

        async def follower_denied() -> str:
            with pytest.raises(ApiError) as info:
                await h.create(pod(h.namespace, "js-rjob-1-1-ddddd", "1", "1", owner_uid=uid1))
            text = str(info.value)
            assert "leader pod not yet scheduled" in text or "follower pod node selector not set" in text, (
                text
            )
            return text

        text = await eventually(follower_denied, timeout=20)
        assert 'admission webhook "vpod.kb.io" denied the request' in text
    finally:
        await h.api.delete_by_name(NODE, node_name)
