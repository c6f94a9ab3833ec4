"""jobset.x-k8s.io JobSet CRD on a real kube-apiserver: the CRD/CEL parts of jobset §6.S.

No webhooks run here, so only what the CRD itself enforces is checked: structural defaults,
enums, CEL rules and their messages. (Webhook defaults such as completionMode are not CRD work.)
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from crdtest import Resource, assert_invalid

from trainer.api import jobset_constants as c
from trainer.api.jobset_v1alpha2 import JobSet


@pytest.fixture
def jobsets(resources) -> Resource:  # type: ignore[no-untyped-def]
    return resources(c.GROUP, c.VERSION, "jobsets")


def rjob(name: str, replicas: int = 1, **extra: Any) -> dict[str, Any]:
    pod = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
    return {"name": name, "replicas": replicas, "template": {"spec": {"template": {"spec": pod}}}, **extra}


def jobset(name: str = "js", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"replicatedJobs": [rjob("replicated-job-a"), rjob("replicated-job-b", 3)]}
    body.update(spec)
    return {"apiVersion": JobSet.api_version, "kind": JobSet.kind, "metadata": {"name": name}, "spec": body}


async def test_success_policy_is_immutable(jobsets: Resource) -> None:
    # spec: jobset 6.S.13
    sent = jobset(successPolicy={"operator": "All", "targetReplicatedJobs": ["replicated-job-a"]})
    status, created = await jobsets.create(sent)
    assert status == 201, created
    created["spec"]["successPolicy"]["targetReplicatedJobs"] = ["replicated-job-b"]
    status, body = await jobsets.replace(created)
    assert_invalid(status, body, "Value is immutable")


async def test_failure_policy_is_immutable_once_set(jobsets: Resource) -> None:
    # spec: jobset 6.S.14
    status, created = await jobsets.create(jobset(failurePolicy={"maxRestarts": 3}))
    assert status == 201, created
    changed = copy.deepcopy(created)
    changed["spec"]["failurePolicy"]["maxRestarts"] = 21
    status, body = await jobsets.replace(changed)
    assert_invalid(status, body, "Value is immutable")
    # Transition rules run only when the field exists on both sides: removing it is allowed.
    del changed["spec"]["failurePolicy"]
    status, body = await jobsets.replace(changed)
    assert status == 200, body


async def test_empty_failure_policy_gets_recreate(jobsets: Resource) -> None:
    # spec: jobset 6.S.15
    status, body = await jobsets.create(jobset(failurePolicy={}))
    assert status == 201, body
    assert body["spec"]["failurePolicy"] == {"restartStrategy": "Recreate"}


async def test_structural_defaults(jobsets: Resource) -> None:
    sent = jobset()
    del sent["spec"]["replicatedJobs"][0]["replicas"]
    status, body = await jobsets.create(sent)
    assert status == 201, body
    first = body["spec"]["replicatedJobs"][0]
    assert first["groupName"] == "default"
    assert first["replicas"] == 1
    assert JobSet.from_dict(body).to_dict() == body


async def test_depends_on_with_any_order_is_allowed(jobsets: Resource) -> None:
    # spec: jobset 6.S.19
    sent = jobset(startupPolicy={"startupPolicyOrder": "AnyOrder"})
    sent["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": "replicated-job-a", "status": "Ready"}]
    status, body = await jobsets.create(sent)
    assert status == 201, body


async def test_depends_on_with_in_order_is_rejected(jobsets: Resource) -> None:
    # spec: jobset 6.S.20
    sent = jobset(startupPolicy={"startupPolicyOrder": "InOrder"})
    sent["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": "replicated-job-a", "status": "Ready"}]
    status, body = await jobsets.create(sent)
    assert_invalid(status, body, "StartupPolicy and DependsOn APIs are mutually exclusive")


async def test_depends_on_status_enum(jobsets: Resource) -> None:
    # spec: jobset 6.S.22
    sent = jobset()
    sent["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": "replicated-job-a", "status": "Failed"}]
    status, body = await jobsets.create(sent)
    assert_invalid(status, body, 'Unsupported value: "Failed"')


async def test_depends_on_is_immutable(jobsets: Resource) -> None:
    # spec: jobset 6.S.23
    sent = jobset()
    sent["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": "replicated-job-a", "status": "Ready"}]
    status, created = await jobsets.create(sent)
    assert status == 201, created
    created["spec"]["replicatedJobs"][1]["dependsOn"][0]["status"] = "Complete"
    status, body = await jobsets.replace(created)
    assert_invalid(status, body, "Value is immutable")


async def test_depends_on_allows_at_most_five(jobsets: Resource) -> None:
    sent = jobset()
    sent["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": f"j{i}", "status": "Ready"} for i in range(6)]
    status, body = await jobsets.create(sent)
    assert_invalid(status, body, "must have at most 5 items")


async def test_no_replicated_jobs_is_allowed(jobsets: Resource) -> None:
    # spec: jobset 6.S.24
    status, body = await jobsets.create(jobset(replicatedJobs=[]))
    assert status == 201, body


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"successPolicy": {"operator": "Some"}}, 'Unsupported value: "Some"'),
        ({"successPolicy": {}}, "spec.successPolicy.operator: Required value"),
        ({"startupPolicy": {}}, "spec.startupPolicy.startupPolicyOrder: Required value"),
        ({"failurePolicy": {"restartStrategy": "Later"}}, 'Unsupported value: "Later"'),
        ({"failurePolicy": {"rules": [{"name": "r"}]}}, "spec.failurePolicy.rules[0].action: Required value"),
        ({"failurePolicy": {"rules": [{"name": "r", "action": "Retry"}]}}, 'Unsupported value: "Retry"'),
        ({"coordinator": {}}, "spec.coordinator.replicatedJob: Required value"),
        ({"ttlSecondsAfterFinished": -1}, "should be greater than or equal to 0"),
        ({"replicatedJobs": [{"name": "x"}]}, "spec.replicatedJobs[0].template: Required value"),
    ],
)
async def test_schema_rules(jobsets: Resource, spec: dict[str, Any], message: str) -> None:
    status, body = await jobsets.create(jobset(**spec))
    assert_invalid(status, body, message)


async def test_replicated_job_names_are_unique(jobsets: Resource) -> None:
    status, body = await jobsets.create(jobset(replicatedJobs=[rjob("a"), rjob("a")]))
    assert_invalid(status, body, "Duplicate value")


async def test_status_subresource(jobsets: Resource) -> None:
    status, created = await jobsets.create(jobset("status"))
    assert status == 201, created
    created["status"] = {"restarts": 0, "terminalState": "Completed"}
    status, body = await jobsets.replace(created)
    assert status == 200, body
    assert "status" not in body  # the main endpoint ignores status
    status, body = await jobsets.replace_status({**created, "metadata": body["metadata"]})
    assert status == 200, body
    assert body["status"] == {"restarts": 0, "terminalState": "Completed"}
