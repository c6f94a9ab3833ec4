"""``setup()`` on a real Manager: controllers, indexes and webhooks work together on a real API server."""

from __future__ import annotations

from typing import Any

import pytest
from jsharness import Harness, make_jobset
from kubernetes_asyncio import client

from manager.client.errors import ApiError
from trainer.api import jobset_constants as c


async def test_setup_serves_jobsets_with_webhooks(with_webhooks: Harness) -> None:
    h = with_webhooks
    js = make_jobset(h.namespace, "web-js")
    del js["spec"]["network"]  # defaulted by the mutating webhook
    await h.create(js)
    stored = await h.jobset("web-js")
    assert stored["spec"]["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    assert stored["spec"]["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    jobs = await h.wait_jobs(4, "web-js")
    assert sorted(j["metadata"]["name"] for j in jobs) == [
        "web-js-replicated-job-a-0",
        "web-js-replicated-job-b-0",
        "web-js-replicated-job-b-1",
        "web-js-replicated-job-b-2",
    ]
    for job in jobs:
        assert job["spec"]["template"]["spec"]["subdomain"] == "web-js"
        assert job["metadata"]["labels"][c.JobSetUIDKey] == stored["metadata"]["uid"]
    services = await h.services()
    assert [s["metadata"]["name"] for s in services] == ["web-js"]
    assert services[0]["spec"]["clusterIP"] == "None"
    assert services[0]["spec"]["publishNotReadyAddresses"] is True

    bad = make_jobset(
        h.namespace, "bad-js", successPolicy={"operator": "All", "targetReplicatedJobs": ["nope"]}
    )
    with pytest.raises(ApiError) as info:
        await h.create(bad)
    assert (
        'admission webhook "vjobset.kb.io" denied the request: '
        "invalid replicatedJob name 'nope' does not appear in .spec.ReplicatedJobs"
    ) in str(info.value)


def _writes() -> float:
    """Writes this process sent to the API server so far (all hosts, all codes)."""
    from manager.client.metrics import REST_CLIENT_REQUESTS

    total = 0.0
    for metric in REST_CLIENT_REQUESTS.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total") and sample.labels.get("method") in (
                "POST",
                "PUT",
                "PATCH",
                "DELETE",
            ):
                total += sample.value
    return total


async def test_steady_jobset_causes_no_writes(controller: Harness, kube: Any) -> None:
    """Events on a settled JobSet and its Jobs make the controller reconcile, and it writes nothing."""
    h = controller
    await h.create(make_jobset(h.namespace, "steady"))
    jobs = await h.wait_jobs(4, "steady")
    await h.wait_rjob_status({"replicated-job-a": {}, "replicated-job-b": {}}, "steady")
    await h.js_stays_active("steady")
    before = _writes()
    # Touch the JobSet and a Job from another client (kubernetes-asyncio, not counted above).
    custom, batch = client.CustomObjectsApi(kube), client.BatchV1Api(kube)
    await custom.patch_namespaced_custom_object(
        "jobset.x-k8s.io",
        "v1alpha2",
        h.namespace,
        "jobsets",
        "steady",
        [{"op": "add", "path": "/metadata/labels", "value": {"touched": "1"}}],
    )
    await batch.patch_namespaced_job(
        jobs[0]["metadata"]["name"],
        h.namespace,
        [{"op": "add", "path": "/metadata/labels/touched", "value": "1"}],
    )
    await h.js_stays_active("steady")
    assert _writes() == before
