"""The JobSet controller against a real API server, as upstream's controller suite runs it (jobset.md 6.T).

No webhooks, no Job controller and no garbage collector: tests write Job status by hand and
clear the ``foregroundDeletion`` finalizers that foreground deletes leave behind.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from jsharness import Harness, make_jobset, rjob

from manager.client.errors import NotFound
from manager.meta.gvk import SERVICE as SERVICE_GVK
from manager.scheme import GroupVersionKind
from manager.testing import eventually
from trainer.api import jobset_constants as c
from trainer.controllers.jobset.jobs import classify_jobs
from trainer.controllers.jobset.status import replicated_jobs_statuses, sorted_statuses

Object = dict[str, Any]
A, B = "replicated-job-a", "replicated-job-b"


async def start(h: Harness, name: str = "test-js", count: int = 4, **spec: Any) -> list[Object]:
    await h.create(make_jobset(h.namespace, name, **spec))
    return await h.wait_jobs(count, name)


async def complete_all(h: Harness, jobs: list[Object]) -> None:
    for job in jobs:
        await h.complete_job(job)


def attempts(jobs: list[Object]) -> dict[str, int]:
    return dict(Counter(j["metadata"]["labels"][c.RestartsKey] for j in jobs))


async def test_suspend_update_allowed_and_four_jobs(controller: Harness) -> None:
    h = controller
    jobs = await start(h)  # spec: jobset 6.T.2
    assert [j["metadata"]["name"] for j in jobs] == [
        f"test-js-{A}-0",
        f"test-js-{B}-0",
        f"test-js-{B}-1",
        f"test-js-{B}-2",
    ]
    await h.update_js("test-js", lambda js: js["spec"].update(suspend=True))  # spec: jobset 6.T.1


async def test_complete_all(controller: Harness) -> None:  # spec: jobset 6.T.3
    h = controller
    await complete_all(h, await start(h))
    await h.wait_condition("Completed")
    assert (await h.jobset())["status"]["terminalState"] == "Completed"
    await h.wait_rjob_status({B: {"succeeded": 3}, A: {"succeeded": 1}})


async def test_all_but_last_complete_stays_active(controller: Harness) -> None:  # spec: jobset 6.T.4
    h = controller
    jobs = await start(h)
    await complete_all(h, jobs[:-1])
    await h.ready_job(jobs[-1])
    await h.wait_rjob_status({B: {"succeeded": 2, "ready": 1, "active": 1}, A: {"succeeded": 1}})
    await h.js_stays_active()


@pytest.mark.parametrize(
    ("policy", "steps"),
    [
        # spec: jobset 6.T.5
        ({"operator": "All", "targetReplicatedJobs": []}, [([0], False), ([1, 2, 3], True)]),
        # spec: jobset 6.T.6
        ({"operator": "All", "targetReplicatedJobs": [B]}, [([0], False), ([1], False), ([2, 3], True)]),
        # spec: jobset 6.T.7
        ({"operator": "Any", "targetReplicatedJobs": [B]}, [([1], True)]),
        # spec: jobset 6.T.8
        ({"operator": "Any", "targetReplicatedJobs": []}, [([3], True)]),
    ],
)
async def test_success_policies(
    controller: Harness, policy: Object, steps: list[tuple[list[int], bool]]
) -> None:
    h = controller
    jobs = await start(h, successPolicy=policy)
    for indexes, completed in steps:
        for i in indexes:
            await h.complete_job(jobs[i])
        if completed:
            await h.wait_condition("Completed")
        else:
            await h.wait_rjob_status(
                {A: {"succeeded": sum(1 for i in indexes if i == 0)}} if 0 in indexes else {}
            )
            await h.js_stays_active()


async def test_failed_job_fails_jobset_and_service(controller: Harness) -> None:
    h = controller
    jobs = await start(h)
    assert [s["metadata"]["name"] for s in await h.services()] == ["test-js"]  # spec: jobset 6.T.12
    await h.fail_job(jobs[0])  # spec: jobset 6.T.9
    await h.wait_condition("Failed")
    assert (await h.jobset())["status"]["terminalState"] == "Failed"

    async def failed_event() -> None:
        events = await h.api.list(GroupVersionKind("", "v1", "Event"), namespace=h.namespace)
        found = [e for e in events if e.get("reason") == "FailedJobs"]
        assert found, "no FailedJobs event"
        event = found[0]
        assert event["type"] == "Warning"
        assert event["message"] == (
            f"jobset failed due to one or more job failures (first failed job: {jobs[0]['metadata']['name']})"
        )
        assert event["involvedObject"]["kind"] == "JobSet" and event["involvedObject"]["name"] == "test-js"
        assert event["source"]["component"] == "jobset"

    await eventually(failed_event, timeout=20)


async def test_service_and_completion(
    controller: Harness,
) -> None:  # spec: jobset 6.T.10 / spec: jobset 6.T.11
    h = controller
    jobs = await start(h)
    assert len(await h.services()) == 1
    await complete_all(h, jobs)
    await h.wait_condition("Completed")


async def test_max_restarts_then_failed(controller: Harness) -> None:  # spec: jobset 6.T.13
    h = controller
    jobs = await start(h, failurePolicy={"maxRestarts": 1})
    await h.fail_job(jobs[0])
    await h.wait_terminating(4)
    assert (await h.jobset())["status"]["restarts"] == 1
    await h.remove_finalizers(expect=4)
    jobs = await h.wait_jobs(4)
    assert attempts(jobs) == {"1": 4}
    await h.fail_job(jobs[1])
    cond = await h.wait_condition("Failed")
    assert cond["reason"] == "ReachedMaxRestarts"


def rule(
    action: str,
    reasons: list[str] | None = None,
    targets: list[str] | None = None,
    patterns: list[str] | None = None,
    name: str = "rule",
) -> Object:
    out: Object = {"name": name, "action": action}
    if reasons is not None:
        out["onJobFailureReasons"] = reasons
    if targets is not None:
        out["targetReplicatedJobs"] = targets
    if patterns is not None:
        out["onJobFailureMessagePatterns"] = patterns
    return out


POD_FAILURE = "PodFailurePolicy"
MSG = "some critical error with a message"


@pytest.mark.parametrize(
    ("rules", "job_index", "reason", "message", "expect_failed"),
    [
        ([rule("FailJobSet", [])], 0, POD_FAILURE, "", True),  # spec: jobset 6.T.14
        ([rule("FailJobSet", ["BackoffLimitExceeded"])], 0, POD_FAILURE, "", False),  # spec: jobset 6.T.15
        ([rule("FailJobSet", patterns=["some message"])], 0, POD_FAILURE, MSG, False),  # spec: jobset 6.T.16
        (
            [rule("FailJobSet", [POD_FAILURE], patterns=["some message"])],
            0,
            POD_FAILURE,
            MSG,
            False,
        ),  # spec: jobset 6.T.17
        (
            [rule("FailJobSet", [POD_FAILURE], patterns=["some message"])],
            0,
            POD_FAILURE,
            "some message",
            True,
        ),  # spec: jobset 6.T.18
        (
            [rule("FailJobSet", [POD_FAILURE], patterns=["some message"])],
            0,
            POD_FAILURE,
            "this is some message with critical error",
            True,
        ),  # spec: jobset 6.T.19
        (
            [rule("RestartJobSet", [POD_FAILURE], name="r1"), rule("FailJobSet", name="r2")],
            0,
            POD_FAILURE,
            "",
            False,
        ),  # spec: jobset 6.T.20
        ([rule("FailJobSet", ["FailedIndexes"], [B])], 1, "FailedIndexes", "", True),  # spec: jobset 6.T.24
        (
            [rule("FailJobSet", ["BackoffLimitExceeded"], [A])],
            1,
            "BackoffLimitExceeded",
            "",
            False,
        ),  # spec: jobset 6.T.25
        (
            [
                rule("FailJobSet", ["MaxFailedIndexesExceeded"], [A], name="r1"),
                rule("RestartJobSet", ["MaxFailedIndexesExceeded"], [A], name="r2"),
            ],
            0,
            "MaxFailedIndexesExceeded",
            "",
            True,
        ),  # spec: jobset 6.T.26
        (
            [
                rule("RestartJobSet", ["MaxFailedIndexesExceeded"], [A], name="r1"),
                rule("FailJobSet", ["MaxFailedIndexesExceeded"], [A], name="r2"),
            ],
            0,
            "MaxFailedIndexesExceeded",
            "",
            False,
        ),  # spec: jobset 6.T.27
    ],
)
async def test_failure_policy_rules(
    controller: Harness, rules: list[Object], job_index: int, reason: str, message: str, expect_failed: bool
) -> None:
    h = controller
    jobs = await start(h, failurePolicy={"maxRestarts": 1, "rules": rules})
    await h.fail_job(jobs[job_index], reason, message)
    if expect_failed:
        await h.wait_condition("Failed")
        status = (await h.jobset())["status"]
        assert status.get("restarts", 0) == 0 and status.get("restartsCountTowardsMax", 0) == 0
    else:
        await h.wait_terminating(4)
        status = (await h.jobset())["status"]
        assert status["restarts"] == 1 and status["restartsCountTowardsMax"] == 1
        await h.js_stays_active()
        await h.remove_finalizers(expect=4)


@pytest.mark.parametrize(
    "strategy", ["Recreate", "BlockingRecreate"]
)  # spec: jobset 6.T.21 / spec: jobset 6.T.22
async def test_recreate_strategies(controller: Harness, strategy: str) -> None:
    h = controller
    jobs = await start(h, failurePolicy={"maxRestarts": 1, "restartStrategy": strategy})
    await h.fail_job(jobs[0])
    await h.wait_terminating(4)
    # finalize 3 of the 4 old Jobs
    for job in (await h.jobs())[:3]:
        await h.clear_finalizers(job["metadata"]["name"])
    if strategy == "Recreate":
        jobs = await h.wait_jobs(4)
        assert attempts(jobs) == {"0": 1, "1": 3}
    else:
        await h.js_stays_active()
        assert attempts(await h.jobs()) == {"0": 1}
    await h.remove_finalizers(expect=1)
    jobs = await h.wait_jobs(4)
    assert attempts(jobs) == {"1": 4}


async def test_restart_ignoring_max_three_times(controller: Harness) -> None:  # spec: jobset 6.T.23
    h = controller
    rules = [
        rule("RestartJobSetAndIgnoreMaxRestarts", [POD_FAILURE], name="r1"),
        rule("FailJobSet", name="r2"),
    ]
    jobs = await start(h, failurePolicy={"maxRestarts": 1, "rules": rules})
    for attempt in (1, 2, 3):
        await h.fail_job(jobs[0], POD_FAILURE)
        await h.wait_terminating(4)
        status = (await h.jobset())["status"]
        assert status["restarts"] == attempt and status.get("restartsCountTowardsMax", 0) == 0
        await h.remove_finalizers(expect=4)
        jobs = await h.wait_jobs(4)
        assert attempts(jobs) == {str(attempt): 4}
    await h.js_stays_active()


async def test_ignore_max_then_fail(controller: Harness) -> None:  # spec: jobset 6.T.28
    h = controller
    rules = [
        rule("RestartJobSetAndIgnoreMaxRestarts", ["MaxFailedIndexesExceeded"], [A], name="r1"),
        rule("FailJobSet", name="r2"),
    ]
    jobs = await start(h, failurePolicy={"maxRestarts": 1, "rules": rules})
    for _attempt in (1, 2, 3):
        await h.fail_job(jobs[0], "MaxFailedIndexesExceeded")
        await h.wait_terminating(4)
        await h.remove_finalizers(expect=4)
        jobs = await h.wait_jobs(4)
    await h.fail_job(jobs[1])
    await h.wait_condition("Failed")
    status = (await h.jobset())["status"]
    assert status["restarts"] == 3 and status.get("restartsCountTowardsMax", 0) == 0


async def test_failure_takes_precedence_over_success(controller: Harness) -> None:  # spec: jobset 6.T.29
    h = controller
    jobs = await start(h, failurePolicy={"maxRestarts": 1})
    await h.complete_job(jobs[0])
    await h.fail_job(jobs[1])
    await h.wait_terminating(4)
    assert (await h.jobset())["status"]["restarts"] == 1
    await h.remove_finalizers(expect=4)
    await complete_all(h, await h.wait_jobs(4))
    await h.wait_condition("Completed")


async def test_created_suspended(controller: Harness) -> None:  # spec: jobset 6.T.30
    h = controller
    jobs = await start(h, suspend=True)
    assert all(j["spec"]["suspend"] is True for j in jobs)
    await h.wait_condition("Suspended")
    await h.wait_rjob_status({B: {"suspended": 3}, A: {"suspended": 1}})


async def test_resume_propagates_pod_template_changes(controller: Harness) -> None:  # spec: jobset 6.T.31
    h = controller
    await start(h, suspend=True)
    await h.wait_rjob_status({B: {"suspended": 3}, A: {"suspended": 1}})

    def edit(js: Object) -> None:
        for r in js["spec"]["replicatedJobs"]:
            tpl = r["template"]["spec"]["template"]
            tpl.setdefault("metadata", {})["labels"] = {"label": "value"}
            tpl["metadata"]["annotations"] = {"annotation": "value"}
            tpl["spec"]["nodeSelector"] = {"node-selector-test-a": "node-selector-test-a"}
            tpl["spec"]["tolerations"] = [{"key": "key", "operator": "Exists"}]

    await h.update_js("test-js", edit)
    await h.wait_rjob_status({B: {"suspended": 3}, A: {"suspended": 1}})
    await h.update_js("test-js", lambda js: js["spec"].update(suspend=False))
    await h.wait_condition("Suspended", "False")
    jobs = await h.wait_jobs(4)

    async def resumed() -> None:
        for job in await h.jobs():
            assert job["spec"]["suspend"] is False
            tpl = job["spec"]["template"]
            assert tpl["metadata"]["labels"]["label"] == "value"
            assert tpl["metadata"]["annotations"]["annotation"] == "value"
            assert tpl["spec"]["nodeSelector"]["node-selector-test-a"] == "node-selector-test-a"
            assert {"key": "key", "operator": "Exists"} in tpl["spec"]["tolerations"]

    await eventually(resumed, timeout=20)
    cond = await h.condition("Suspended")
    assert cond is not None and cond["reason"] == "ResumeJobs"
    await complete_all(h, jobs)
    await h.wait_condition("Completed")
    await h.wait_rjob_status({B: {"succeeded": 3}, A: {"succeeded": 1}})


async def test_suspend_running_jobset(controller: Harness) -> None:  # spec: jobset 6.T.32
    h = controller
    jobs = await start(h, suspend=False)
    assert all(j["spec"]["suspend"] is False for j in jobs)
    await h.update_js("test-js", lambda js: js["spec"].update(suspend=True))
    await h.wait_condition("Suspended")
    await h.wait_rjob_status({B: {"suspended": 3}, A: {"suspended": 1}})


async def test_deleted_service_is_recreated(controller: Harness) -> None:  # spec: jobset 6.T.33
    h = controller
    await start(h)
    (svc,) = await h.services()
    await h.api.delete(svc)

    async def back() -> None:
        services = await h.services()
        assert len(services) == 1 and services[0]["metadata"]["uid"] != svc["metadata"]["uid"]

    await eventually(back, timeout=20)


@pytest.mark.parametrize("action", ["complete", "ready"])  # spec: jobset 6.T.34 / spec: jobset 6.T.35
async def test_status_matches_recomputation(controller: Harness, action: str) -> None:
    h = controller
    jobs = await start(h)
    for job in jobs:
        await (h.complete_job(job) if action == "complete" else h.ready_job(job))

    async def matches() -> None:
        js = await h.jobset()
        owned = classify_jobs(await h.jobs(), int(js["status"].get("restarts") or 0))
        expected = sorted_statuses(replicated_jobs_statuses(js, owned))
        assert js["status"]["replicatedJobsStatus"] == expected

    await eventually(matches, timeout=20)


async def test_finished_jobset_deletes_active_jobs(controller: Harness) -> None:  # spec: jobset 6.T.36
    h = controller
    jobs = await start(h, successPolicy={"operator": "Any", "targetReplicatedJobs": []})
    await h.complete_job(jobs[1])
    await h.wait_condition("Completed")
    await h.wait_terminating(3)
    await h.remove_finalizers(expect=3)
    remaining = await h.wait_jobs(1)
    assert remaining[0]["metadata"]["name"] == jobs[1]["metadata"]["name"]


async def test_failed_jobset_keeps_failed_job(controller: Harness) -> None:  # spec: jobset 6.T.37
    h = controller
    jobs = await start(h)
    await h.fail_job(jobs[0])
    await h.wait_condition("Failed")
    await h.wait_terminating(3)
    await h.remove_finalizers(expect=3)
    remaining = await h.wait_jobs(1)
    assert remaining[0]["metadata"]["name"] == jobs[0]["metadata"]["name"]


async def test_generate_name_service(controller: Harness) -> None:  # spec: jobset 6.T.38
    h = controller
    created = await h.create(make_jobset(h.namespace, "name-prefix-"))
    name = created["metadata"]["name"]

    async def service() -> None:
        try:
            await h.api.get(SERVICE_GVK, name, h.namespace)
        except NotFound as err:
            raise AssertionError(f"no Service {name}") from err

    await eventually(service, timeout=20)


@pytest.mark.parametrize("order", ["InOrder", "AnyOrder"])  # spec: jobset 6.T.39 / spec: jobset 6.T.40
async def test_suspended_startup_policies_create_everything(controller: Harness, order: str) -> None:
    h = controller
    await start(h, suspend=True, startupPolicy={"startupPolicyOrder": order})
    await h.wait_rjob_status({B: {"suspended": 3}, A: {"suspended": 1}})
    assert await h.condition("StartupPolicyInProgress") is None


async def test_any_order_resume(controller: Harness) -> None:  # spec: jobset 6.T.41
    h = controller
    await start(h, suspend=True, startupPolicy={"startupPolicyOrder": "AnyOrder"})
    await h.wait_rjob_status({B: {"suspended": 3}, A: {"suspended": 1}})
    await h.update_js("test-js", lambda js: js["spec"].update(suspend=False))
    await h.wait_rjob_status({B: {}, A: {}})


async def test_in_order_resume(controller: Harness) -> None:  # spec: jobset 6.T.42
    h = controller
    await start(h, suspend=True, startupPolicy={"startupPolicyOrder": "InOrder"})
    await h.wait_rjob_status({B: {"suspended": 3}, A: {"suspended": 1}})
    await h.update_js("test-js", lambda js: js["spec"].update(suspend=False))
    await h.wait_rjob_status({A: {}, B: {"suspended": 3}})
    jobs = await h.jobs()
    await h.ready_job(jobs[0])
    await h.wait_rjob_status({A: {"ready": 1, "active": 1}, B: {}})
    await h.wait_condition("StartupPolicyInProgress")
    for job in jobs[1:]:
        await h.ready_job(job)
    await h.wait_rjob_status({B: {"ready": 3, "active": 3}})
    await h.wait_condition("StartupPolicyCompleted")


async def in_order_startup(h: Harness) -> list[Object]:
    jobs = await h.wait_jobs(1)
    await h.wait_condition("StartupPolicyInProgress")
    await h.ready_job(jobs[0])
    await h.wait_rjob_status({A: {"ready": 1, "active": 1}})
    jobs = await h.wait_jobs(4)
    for job in jobs[1:]:
        await h.active_job(job)
    await h.wait_rjob_status({B: {"active": 3}})
    assert (await h.condition("StartupPolicyInProgress") or {}).get("status") == "True"
    for job in jobs[1:]:
        await h.ready_job(job)
    await h.wait_rjob_status({B: {"ready": 3, "active": 3}})
    await h.wait_condition("StartupPolicyCompleted")
    return jobs


async def test_in_order_running(controller: Harness) -> None:  # spec: jobset 6.T.43
    h = controller
    await h.create(make_jobset(h.namespace, startupPolicy={"startupPolicyOrder": "InOrder"}))
    await in_order_startup(h)


async def test_in_order_with_restart(controller: Harness) -> None:  # spec: jobset 6.T.44
    h = controller
    await h.create(
        make_jobset(
            h.namespace, startupPolicy={"startupPolicyOrder": "InOrder"}, failurePolicy={"maxRestarts": 1}
        )
    )
    jobs = await in_order_startup(h)
    await h.complete_job(jobs[0])
    await h.fail_job(jobs[1])
    await h.wait_terminating(4)
    await h.remove_finalizers(expect=4)
    jobs = await h.wait_jobs(1)
    assert attempts(jobs) == {"1": 1}
    await h.ready_job(jobs[0])
    await h.wait_rjob_status({A: {"ready": 1, "active": 1}, B: {}})
    assert (await h.condition("StartupPolicyInProgress") or {}).get("status") == "True"
    jobs = await h.wait_jobs(4)
    for job in jobs[1:]:
        await h.ready_job(job)
    await h.wait_condition("StartupPolicyCompleted")
    assert attempts(await h.jobs()) == {"1": 4}


async def test_coordinator_label(controller: Harness) -> None:  # spec: jobset 6.T.45
    h = controller
    jobs = await start(h, coordinator={"replicatedJob": A, "jobIndex": 0, "podIndex": 0})
    for job in jobs:
        assert job["metadata"]["labels"][c.CoordinatorKey] == "test-js-replicated-job-a-0-0.test-js"
        assert job["metadata"]["annotations"][c.CoordinatorKey] == "test-js-replicated-job-a-0-0.test-js"


def depends_js(h: Harness, rjobs: list[Object], **spec: Any) -> Object:
    return make_jobset(
        h.namespace, "depends-on", replicatedJobs=rjobs, network={"enableDNSHostnames": False}, **spec
    )


async def test_depends_on_ready(controller: Harness) -> None:  # spec: jobset 6.T.46
    h = controller
    await h.create(
        depends_js(
            h, [rjob("rjob-a", 1), rjob("rjob-b", 3, dependsOn=[{"name": "rjob-a", "status": "Ready"}])]
        )
    )
    jobs = await h.wait_jobs(1, "depends-on")
    await h.ready_job(jobs[0])
    await h.wait_rjob_status({"rjob-a": {"ready": 1, "active": 1}, "rjob-b": {}}, "depends-on")
    jobs = await h.wait_jobs(4, "depends-on")
    for job in jobs[1:]:
        await h.ready_job(job)
    await h.wait_rjob_status({"rjob-b": {"ready": 3, "active": 3}}, "depends-on")


async def test_depends_on_chain(controller: Harness) -> None:  # spec: jobset 6.T.47
    h = controller
    rjobs = [
        rjob("rjob-a", 1),
        rjob("rjob-b", 1, dependsOn=[{"name": "rjob-a", "status": "Complete"}]),
        rjob("rjob-c", 3, dependsOn=[{"name": "rjob-b", "status": "Ready"}]),
    ]
    await h.create(depends_js(h, rjobs))
    (a,) = await h.wait_jobs(1, "depends-on")
    await h.complete_job(a)
    await h.wait_rjob_status({"rjob-a": {"succeeded": 1}}, "depends-on")
    jobs = await h.wait_jobs(2, "depends-on")
    await h.ready_job(jobs[1])
    jobs = await h.wait_jobs(5, "depends-on")
    await h.wait_rjob_status({"rjob-b": {"ready": 1, "active": 1}}, "depends-on")
    await complete_all(h, jobs[1:])
    await h.wait_rjob_status(
        {"rjob-c": {"succeeded": 3}, "rjob-b": {"succeeded": 1}, "rjob-a": {"succeeded": 1}}, "depends-on"
    )


@pytest.mark.parametrize(
    "deps",
    [
        [
            {"name": "rjob-a", "status": "Complete"},
            {"name": "rjob-b", "status": "Complete"},
        ],  # spec: jobset 6.T.48
        [
            {"name": "rjob-a", "status": "Ready"},
            {"name": "rjob-b", "status": "Complete"},
        ],  # spec: jobset 6.T.49
    ],
)
async def test_depends_on_two(controller: Harness, deps: list[Object]) -> None:
    h = controller
    await h.create(depends_js(h, [rjob("rjob-a", 1), rjob("rjob-b", 1), rjob("rjob-c", 3, dependsOn=deps)]))
    a, b = await h.wait_jobs(2, "depends-on")
    if deps[0]["status"] == "Ready":
        await h.ready_job(a)
    else:
        await h.complete_job(a)
    await h.complete_job(b)
    jobs = await h.wait_jobs(5, "depends-on")
    if deps[0]["status"] == "Ready":
        await h.wait_rjob_status(
            {"rjob-a": {"ready": 1, "active": 1}, "rjob-b": {"succeeded": 1}}, "depends-on"
        )
        await h.complete_job(jobs[0])
    await complete_all(h, jobs[2:])
    await h.wait_rjob_status(
        {"rjob-c": {"succeeded": 3}, "rjob-b": {"succeeded": 1}, "rjob-a": {"succeeded": 1}}, "depends-on"
    )


async def test_depends_on_suspended(controller: Harness) -> None:  # spec: jobset 6.T.50
    h = controller
    await h.create(
        depends_js(
            h,
            [rjob("rjob-a", 1), rjob("rjob-b", 3, dependsOn=[{"name": "rjob-a", "status": "Ready"}])],
            suspend=True,
        )
    )
    await h.wait_rjob_status({"rjob-a": {"suspended": 1}, "rjob-b": {}}, "depends-on")
    await h.update_js("depends-on", lambda js: js["spec"].update(suspend=False))
    await h.wait_rjob_status({"rjob-a": {}}, "depends-on")
    (a,) = await h.wait_jobs(1, "depends-on")
    await h.ready_job(a)
    jobs = await h.wait_jobs(4, "depends-on")
    await h.wait_rjob_status({"rjob-b": {}}, "depends-on")
    for job in jobs[1:]:
        await h.ready_job(job)
    await h.wait_rjob_status(
        {"rjob-b": {"ready": 3, "active": 3}, "rjob-a": {"ready": 1, "active": 1}}, "depends-on"
    )


async def test_managed_by_other_controller(controller: Harness) -> None:
    h = controller
    created = await h.create(make_jobset(h.namespace, "managed-", managedBy="other-controller", suspend=True))
    name = created["metadata"]["name"]
    await h.js_stays_active(name)  # spec: jobset 6.T.51
    assert await h.jobs(name) == []
    await h.update_js(name, lambda js: js["spec"].update(suspend=False))
    await h.js_stays_active(name)  # spec: jobset 6.T.52
    assert await h.jobs(name) == []
    js = await h.jobset(name)  # spec: jobset 6.T.53
    js["status"] = {
        "conditions": [
            {
                "type": "Failed",
                "status": "False",
                "reason": "ByTest",
                "message": "by test",
                "lastTransitionTime": "2024-01-01T00:00:00Z",
            }
        ],
        "restarts": 1,
        "replicatedJobsStatus": [
            {"name": A, "ready": 2, "succeeded": 3, "failed": 4, "active": 5, "suspended": 6}
        ],
    }
    written = await h.api.status.update(js)
    await h.js_stays_active(name)
    assert (await h.jobset(name))["status"] == written["status"]
    assert (await h.jobset(name))["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]


async def test_ttl_after_finished(controller: Harness) -> None:  # spec: jobset 6.T.54
    h = controller
    js1_jobs = await start(h, "js1", ttlSecondsAfterFinished=2)
    js2_jobs = await start(h, "js2")
    await h.fail_job(js1_jobs[0])
    await complete_all(h, js2_jobs)
    await h.wait_condition("Failed", name="js1")
    await h.wait_condition("Completed", name="js2")

    async def three_terminating() -> None:
        jobs = await h.jobs("js1")
        assert sum(1 for j in jobs if j["metadata"].get("deletionTimestamp")) == 3

    await eventually(three_terminating, timeout=20)

    async def js1_deleting() -> None:
        assert (await h.jobset("js1"))["metadata"].get("deletionTimestamp")

    await eventually(js1_deleting, timeout=20)
    assert not (await h.jobset("js2"))["metadata"].get("deletionTimestamp")
