"""The JobSet webhooks' typed decode behind a real API server: what Go's round trip writes is what
gets stored, and ill-typed objects POSTed straight to the webhook server get Go's 400."""

from __future__ import annotations

import json
import ssl
import uuid
from typing import Any

import aiohttp
from jsharness import Harness

from webhooks import jobset as jobset_webhooks

Object = dict[str, Any]


def container(name: str, script: str) -> Object:
    return {"name": name, "image": "bash:latest", "command": ["bash", "-xc", script]}


def host_maintenance(namespace: str) -> Object:
    """The shape of upstream's examples/failure-policy/host-maintenance-event-model.yaml: a Job
    podFailurePolicy rule whose onPodConditions entry names a type and no status."""
    leader_job = {
        "backoffLimit": 0,
        "completions": 2,
        "parallelism": 2,
        "template": {
            "spec": {"restartPolicy": "Never", "containers": [container("leader", "sleep 120; exit 1")]}
        },
        "podFailurePolicy": {
            "rules": [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}]
        },
    }
    worker_job = {
        "backoffLimit": 0,
        "completions": 2,
        "parallelism": 2,
        "template": {"spec": {"containers": [container("worker", "sleep 1000")]}},
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "host-maintenance", "namespace": namespace},
        "spec": {
            "failurePolicy": {
                "maxRestarts": 0,
                "rules": [
                    {
                        "action": "RestartJobSetAndIgnoreMaxRestarts",
                        "onJobFailureReasons": ["PodFailurePolicy"],
                    },
                    {"action": "RestartJobSet", "targetReplicatedJobs": ["leader"]},
                ],
            },
            "replicatedJobs": [
                {"name": "leader", "replicas": 1, "template": {"spec": leader_job}},
                {"name": "workers", "replicas": 1, "template": {"spec": worker_job}},
            ],
        },
    }


def go_written_job(script: str, name: str, restart_policy: str, **extra: Any) -> Object:
    """A replicated job's template as the Go webhook's re-encoded struct writes it."""
    return {
        "metadata": {},
        "spec": {
            "backoffLimit": 0,
            "completions": 2,
            "parallelism": 2,
            "completionMode": "Indexed",
            "template": {
                "metadata": {},
                "spec": {
                    "restartPolicy": restart_policy,
                    "containers": [{**container(name, script), "resources": {}}],
                },
            },
            **extra,
        },
    }


async def test_upstream_pod_failure_policy_example_is_admitted_as_go_writes_it(
    with_webhooks: Harness,
) -> None:
    h = with_webhooks
    stored = await h.create(host_maintenance(h.namespace))
    # The Go round trip writes onPodConditions[].status (no omitempty) as "", which satisfies
    # the CRD's required list; everything else below is the Go manager's patched object too
    # (checked against jobset v0.10.1's webhook), after the CRD defaults applied before admission.
    assert stored["spec"] == {
        "failurePolicy": {
            "maxRestarts": 0,
            "restartStrategy": "Recreate",
            "rules": [
                {
                    "action": "RestartJobSetAndIgnoreMaxRestarts",
                    "onJobFailureReasons": ["PodFailurePolicy"],
                    "name": "failurePolicyRule0",
                },
                {"action": "RestartJobSet", "targetReplicatedJobs": ["leader"], "name": "failurePolicyRule1"},
            ],
        },
        "replicatedJobs": [
            {
                "name": "leader",
                "groupName": "default",
                "replicas": 1,
                "template": go_written_job(
                    "sleep 120; exit 1",
                    "leader",
                    "Never",
                    podFailurePolicy={
                        "rules": [
                            {
                                "action": "FailJob",
                                "onPodConditions": [{"type": "DisruptionTarget", "status": ""}],
                            }
                        ]
                    },
                ),
            },
            {
                "name": "workers",
                "groupName": "default",
                "replicas": 1,
                "template": go_written_job("sleep 1000", "worker", "OnFailure"),
            },
        ],
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "successPolicy": {"operator": "All"},
        "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
    }


async def post_review(h: Harness, path: str, obj: Any) -> Object:
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"},
            "resource": {"group": "jobset.x-k8s.io", "version": "v1alpha2", "resource": "jobsets"},
            "namespace": h.namespace,
            "operation": "CREATE",
            "object": obj,
        },
    }
    ctx = ssl.create_default_context(cadata=h.webhook_ca.decode())
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session,
        session.post(
            h.webhook_url + path, data=json.dumps(body), headers={"Content-Type": "application/json"}
        ) as r,
    ):
        assert r.status == 200
        answer: Object = await r.json()
        return answer["response"]


async def test_ill_typed_jobsets_posted_to_the_running_webhook_server(with_webhooks: Harness) -> None:
    h = with_webhooks
    base = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "bad"}}
    cases = [
        (
            {**base, "spec": "x"},
            "json: cannot unmarshal string into Go struct field JobSet.spec of type v1alpha2.JobSetSpec",
        ),
        (
            {**base, "spec": {"replicatedJobs": [{"name": 5}]}},
            "json: cannot unmarshal number into Go struct field ReplicatedJob.spec.replicatedJobs.name of type string",
        ),
    ]
    for path in (jobset_webhooks.MUTATE_PATH, jobset_webhooks.VALIDATE_PATH):
        for obj, message in cases:
            response = await post_review(h, path, obj)
            assert response["allowed"] is False
            assert response["status"]["code"] == 400
            assert response["status"]["message"] == message
