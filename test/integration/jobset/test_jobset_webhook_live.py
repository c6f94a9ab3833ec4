"""JobSet webhooks behind a real API server with the CRD's schema and CEL rules (jobset.md 6.S)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from jsharness import Harness, make_jobset, rjob

from manager.client.errors import ApiError, Conflict
from trainer.controllers.jobset.reconciler import JOBSET_GVK

Object = dict[str, Any]


async def rejected(h: Harness, obj: Object, text: str, *, update: bool = False) -> None:
    """Create or update ``obj`` and expect a denial containing ``text``.

    An update that loses a race with the controller's status write (Conflict) is retried with
    the same spec on the latest object, so the denial always comes from admission.
    """
    while True:
        with pytest.raises(ApiError) as info:
            if update:
                await h.api.update(obj)
            else:
                await h.create(obj)
        if update and isinstance(info.value, Conflict):
            latest = await h.api.get(JOBSET_GVK, obj["metadata"]["name"], h.namespace)
            obj = {**latest, "spec": obj["spec"]}
            continue
        assert text in str(info.value), str(info.value)
        return


def rjob_spec(js: Object, index: int = 0) -> Object:
    result: Object = js["spec"]["replicatedJobs"][index]["template"]["spec"]
    return result


async def test_defaulting(with_webhooks: Harness) -> None:
    h = with_webhooks
    js = make_jobset(h.namespace, "defaults")
    del js["spec"]["network"], js["spec"]["successPolicy"]
    del rjob_spec(js)["template"]["spec"]["restartPolicy"]
    rjob_spec(js, 1).pop("completionMode")
    stored = await h.create(js)
    assert rjob_spec(stored, 1)["completionMode"] == "Indexed"  # spec: jobset 6.S.1
    assert stored["spec"]["network"]["enableDNSHostnames"] is True  # spec: jobset 6.S.3
    assert stored["spec"]["network"]["publishNotReadyAddresses"] is True  # spec: jobset 6.S.4
    assert rjob_spec(stored)["template"]["spec"]["restartPolicy"] == "OnFailure"  # spec: jobset 6.S.5
    assert stored["spec"]["successPolicy"] == {"operator": "All"}  # spec: jobset 6.S.9

    non_indexed = make_jobset(h.namespace, "non-indexed", network={"enableDNSHostnames": False})
    rjob_spec(non_indexed, 1)["completionMode"] = "NonIndexed"
    stored = await h.create(non_indexed)
    assert rjob_spec(stored, 1)["completionMode"] == "NonIndexed"  # spec: jobset 6.S.2

    empty_policy = await h.create(make_jobset(h.namespace, "fp", failurePolicy={}))
    assert empty_policy["spec"]["failurePolicy"] == {"restartStrategy": "Recreate"}  # spec: jobset 6.S.15


async def test_updates_while_running_and_suspended(with_webhooks: Harness) -> None:
    h = with_webhooks
    await h.create(make_jobset(h.namespace, "running"))
    running = await h.jobset("running")

    changed = copy.deepcopy(running)
    rjob_spec(changed)["template"]["spec"]["nodeSelector"] = {"zone": "a"}
    await rejected(h, changed, "field is immutable", update=True)  # spec: jobset 6.S.7

    changed = copy.deepcopy(running)
    rjob_spec(changed)["template"]["spec"]["hostname"] = "x"
    rjob_spec(changed)["template"]["spec"]["subdomain"] = "y"
    await rejected(h, changed, "field is immutable", update=True)  # spec: jobset 6.S.8

    changed = copy.deepcopy(running)
    rjob_spec(changed)["template"].setdefault("metadata", {})["annotations"] = {"a": "b"}
    await rejected(h, changed, "field is immutable", update=True)  # spec: jobset 6.S.18

    changed = copy.deepcopy(running)
    changed["spec"]["successPolicy"]["targetReplicatedJobs"] = ["replicated-job-a"]
    await rejected(h, changed, "Value is immutable", update=True)  # spec: jobset 6.S.13

    await h.update_js("running", lambda js: js["spec"].update(suspend=True))  # spec: jobset 6.S.11

    def suspended_edits(js: Object) -> None:
        tpl = rjob_spec(js)["template"]
        tpl["spec"]["nodeSelector"] = {"zone": "a"}
        tpl.setdefault("metadata", {})["annotations"] = {"kueue": "x"}
        tpl["spec"]["schedulingGates"] = [{"name": "example.com/gate"}]

    await h.update_js("running", suspended_edits)  # spec: jobset 6.S.6 / spec: jobset 6.S.17
    await h.update_js("running", lambda js: js["spec"].update(suspend=False))  # spec: jobset 6.S.12

    managed = await h.jobset("running")
    managed["spec"]["suspend"] = True
    managed["spec"]["managedBy"] = "new-manager"
    await rejected(h, managed, "spec.managedBy: Invalid value", update=True)  # spec: jobset 6.S.16


async def test_create_rejections(with_webhooks: Harness) -> None:
    h = with_webhooks
    bad_target = make_jobset(
        h.namespace, "t1", successPolicy={"operator": "All", "targetReplicatedJobs": ["does-not-exist"]}
    )
    await rejected(
        h, bad_target, "invalid replicatedJob name 'does-not-exist' does not appear in .spec.ReplicatedJobs"
    )  # spec: jobset 6.S.10

    restarts = await h.create(make_jobset(h.namespace, "t2", failurePolicy={"maxRestarts": 3}))
    restarts["spec"]["failurePolicy"]["maxRestarts"] = 21
    await rejected(h, restarts, "Value is immutable", update=True)  # spec: jobset 6.S.14

    depends = [
        rjob("replicated-job-a", 1),
        rjob("replicated-job-b", 3, dependsOn=[{"name": "replicated-job-a", "status": "Ready"}]),
    ]
    any_order = make_jobset(
        h.namespace, "t3", replicatedJobs=depends, startupPolicy={"startupPolicyOrder": "AnyOrder"}
    )
    created = await h.create(any_order)  # spec: jobset 6.S.19
    in_order = make_jobset(
        h.namespace, "t4", replicatedJobs=depends, startupPolicy={"startupPolicyOrder": "InOrder"}
    )
    await rejected(
        h, in_order, "StartupPolicy and DependsOn APIs are mutually exclusive"
    )  # spec: jobset 6.S.20

    first = make_jobset(
        h.namespace,
        "t5",
        replicatedJobs=[
            rjob("replicated-job-a", 1, dependsOn=[{"name": "replicated-job-b", "status": "Ready"}]),
            rjob("replicated-job-b", 1),
        ],
    )
    await rejected(h, first, "DependsOn can't be set for the first ReplicatedJob")  # spec: jobset 6.S.21

    wrong_status = make_jobset(
        h.namespace,
        "t6",
        replicatedJobs=[
            rjob("replicated-job-a", 1),
            rjob("replicated-job-b", 1, dependsOn=[{"name": "replicated-job-a", "status": "Failed"}]),
        ],
    )
    await rejected(h, wrong_status, "Unsupported value")  # spec: jobset 6.S.22

    created["spec"]["replicatedJobs"][1]["dependsOn"][0]["status"] = "Complete"
    await rejected(h, created, "Value is immutable", update=True)  # spec: jobset 6.S.23

    assert (await h.create(make_jobset(h.namespace, "t7", replicatedJobs=[])))["metadata"][
        "name"
    ] == "t7"  # spec: jobset 6.S.24
