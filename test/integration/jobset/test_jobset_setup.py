"""``setup()`` on a real Manager: controllers, indexes and webhooks work together on a real API server."""

from __future__ import annotations

import pytest
from conftest import Harness, make_jobset

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
