"""JobSet v0.12.0's feature gates against a real kube-apiserver (docs/behaviour/jobset-v0.12.md
§1.9-1.11): a RestartJob rule recreating only the failed Job and counting its restarts, in-place
restart attempts read from the pods into the status, an elastic scale of a running JobSet's
Jobs; and with each gate off, none of it.

As in upstream's controller suite (``test/integration/controller``, whose scenarios these are)
there are no webhooks, no Job controller and no garbage collector: the tests write Job and Pod
status themselves, create the pods an in-place restart reads (with the annotation upstream's
agent writes) and clear the ``foregroundDeletion`` finalizers. The module's control plane has
the v2.3 JobSet CRD; the JobSet component runs at JobSet v0.12.0 in this process, its gates set
for each test before the component is set up (the Pod watch is registered at setup).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from jsharness import Harness, JobSetReconciles, make_jobset, rjob
from module_env import V2_3_JOBSET_CRD, module_control_plane

from manager import Manager, Options
from manager.cache.cache import CacheOptions
from manager.client.errors import NotFound
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.meta.gvk import POD as POD_GVK
from manager.scheme import GroupVersionKind
from manager.testing import eventually
from trainer import features
from trainer.api import jobset_constants as c
from trainer.api.v2_3 import jobset_constants as c23
from trainer.components import component
from trainer.controllers import podcache
from trainer.jobset.levels.v0_12 import V0_12
from trainer.runtime.context import SetupContext

EVENT_V1_GVK = GroupVersionKind("events.k8s.io", "v1", "Event")
MAX_INT32 = 2147483647
Object = dict[str, Any]


@pytest.fixture(scope="module")
def env_v0_12(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    """etcd + kube-apiserver with JobSet v0.12.0's CRD, for this module only."""
    with module_control_plane(tmp_path_factory, "jobset-v0.12-gates", [V2_3_JOBSET_CRD]) as env:
        yield env


@pytest.fixture
async def h(env_v0_12: Environment, request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    """The JobSet component at JobSet v0.12.0 with the gates of the test's ``gates`` mark on,
    in a namespace of its own; its reconciles are recorded (``Harness.settled``)."""
    mark = request.node.get_closest_marker("gates")
    gates: tuple[str, ...] = mark.args if mark else ()
    config = await load_kubeconfig(env_v0_12.kubeconfig)
    namespace = f"jsg-{uuid.uuid4().hex[:8]}"
    namespace_obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    options = CacheOptions(default_namespaces=[namespace])
    reconciles = JobSetReconciles()
    with contextlib.ExitStack() as stack:
        for name in gates:
            stack.enter_context(features.override(name, True))
        async with Cluster(config, field_owner="jobset-test", cache_options=options) as cluster:
            await cluster.api_reader.create(namespace_obj)
            mgr = Manager(cluster, Options(metrics_bind_address="0"))
            assert await podcache.configure(mgr, None, ["jobset"]) == "Minimal/label-selected"
            undo = reconciles.install()
            try:
                assert await component("jobset").setup(SetupContext(mgr, None, jobset_level=V0_12)) is True
            finally:
                undo()
            task = asyncio.create_task(mgr.run())
            try:
                await eventually(lambda: mgr.elected.is_set(), timeout=30, message="the manager leads")
                yield Harness(
                    cluster.api_reader, namespace, reconciles=reconciles, flush_events=cluster.flush_events
                )
            finally:
                mgr.stop()
                await asyncio.gather(task, return_exceptions=True)
                with contextlib.suppress(NotFound):
                    await cluster.api_reader.delete(namespace_obj)


async def events_of(h: Harness, name: str, reason: str) -> list[Object]:
    assert h.flush_events is not None
    await h.flush_events()
    items = await h.api.list(EVENT_V1_GVK, namespace=h.namespace)
    return [e for e in items if (e.get("regarding") or {}).get("name") == name and e["reason"] == reason]


def by_name(jobs: list[Object]) -> dict[str, Object]:
    return {j["metadata"]["name"]: j for j in jobs}


# -- RestartJob -----------------------------------------------------------------------------------


def restart_job_policy(action: str, max_restarts: int) -> Object:
    return {
        "maxRestarts": max_restarts,
        "rules": [
            {"name": "perJob", "action": action, "onJobFailureReasons": ["PodFailurePolicy"]},
            {"name": "otherwise", "action": "FailJobSet"},
        ],
    }


@pytest.mark.gates("RestartJob")
async def test_restart_job_recreates_only_the_failed_job_and_counts_it(h: Harness) -> None:
    name = "per-job"
    await h.create(make_jobset(h.namespace, name, failurePolicy=restart_job_policy("RestartJob", 1)))
    jobs = by_name(await h.wait_jobs(4, name))
    assert {j["metadata"]["labels"][c23.JobRestartAttemptKey] for j in jobs.values()} == {"0"}
    failing = f"{name}-replicated-job-b-1"
    await h.fail_job(jobs[failing], reason="PodFailurePolicy")

    async def counted() -> None:
        status = (await h.jobset(name))["status"]
        assert status["restarts"] == 0 and "restartsCountTowardsMax" not in status
        b = next(s for s in status["replicatedJobsStatus"] if s["name"] == "replicated-job-b")
        assert (b.get("jobRestarts"), b.get("jobRestartsCountTowardsMax")) == ([0, 1, 0], [0, 1, 0])

    await eventually(counted, timeout=20, message="job b-1's restart counted in replicatedJobsStatus")
    (event,) = await eventually(
        lambda: events_of(h, name, "RestartJobFailurePolicyAction"), timeout=10, message="the Warning"
    )
    assert (event["type"], event["action"]) == ("Warning", "Reconciling")
    assert event["note"] == f"applying RestartJob failure policy action (first failed job: {failing})"
    assert await h.condition("RestartingJobSet", name) is None  # a Job's restart is not a JobSet's

    # only b-1 is deleted (foreground; the garbage collector's part is ours), then made again
    await h.wait_terminating(1, name)
    await h.remove_finalizers(expect=1, name=name)

    async def recreated() -> Object:
        current = by_name(await h.jobs(name))
        job = current.get(failing)
        assert job is not None and job["metadata"]["uid"] != jobs[failing]["metadata"]["uid"]
        return current

    current = await eventually(recreated, timeout=20, message=f"{failing} made again")
    assert current[failing]["metadata"]["labels"][c23.JobRestartAttemptKey] == "1"
    assert current[failing]["spec"]["template"]["metadata"]["annotations"][c23.JobRestartAttemptKey] == "1"
    for other in set(jobs) - {failing}:  # the others ran on: the same Jobs
        assert current[other]["metadata"]["uid"] == jobs[other]["metadata"]["uid"]
        assert current[other]["metadata"]["labels"][c23.JobRestartAttemptKey] == "0"

    # the JobSet's and every Job's restarts count towards maxRestarts (1): the next failure fails it
    await h.fail_job(current[failing], reason="PodFailurePolicy")
    failed = await h.wait_condition("Failed", name=name)
    assert (failed["reason"], failed["message"]) == (
        "ReachedMaxRestarts",
        f"jobset failed due to reaching max number of restarts (first failed job: {failing})",
    )


@pytest.mark.gates("RestartJob")
async def test_restart_job_and_ignore_max_restarts_does_not_count_towards_max(h: Harness) -> None:
    name = "ignore-max"
    await h.create(
        make_jobset(h.namespace, name, failurePolicy=restart_job_policy("RestartJobAndIgnoreMaxRestarts", 0))
    )
    jobs = by_name(await h.wait_jobs(4, name))
    failing = f"{name}-replicated-job-a-0"
    await h.fail_job(jobs[failing], reason="PodFailurePolicy")

    async def counted() -> None:
        status = (await h.jobset(name))["status"]
        a = next(s for s in status["replicatedJobsStatus"] if s["name"] == "replicated-job-a")
        assert a.get("jobRestarts") == [1] and "jobRestartsCountTowardsMax" not in a

    await eventually(counted, timeout=20, message="job a-0's restart counted, not towards max")
    await h.wait_terminating(1, name)
    await h.remove_finalizers(expect=1, name=name)
    await eventually(
        lambda: _attempt_is(h, name, failing, "1"), timeout=20, message=f"{failing} made again at attempt 1"
    )
    assert await h.condition("Failed", name) is None


async def _attempt_is(h: Harness, name: str, job_name: str, attempt: str) -> None:
    job = by_name(await h.jobs(name)).get(job_name)
    assert job is not None and job["metadata"]["labels"].get(c23.JobRestartAttemptKey) == attempt


async def test_without_the_gate_jobs_carry_no_attempt_and_restart_job_set_restarts_all(h: Harness) -> None:
    """Gate off (the default): no ``job-restart-attempt`` label; RestartJobSet as before."""
    name = "gate-off"
    await h.create(make_jobset(h.namespace, name, failurePolicy={"maxRestarts": 1}))
    jobs = await h.wait_jobs(4, name)
    assert all(c23.JobRestartAttemptKey not in j["metadata"]["labels"] for j in jobs)
    await h.fail_job(jobs[0])
    await h.wait_terminating(4, name)
    status = (await h.jobset(name))["status"]
    assert status["restarts"] == 1
    assert all("jobRestarts" not in s for s in status["replicatedJobsStatus"])


# -- InPlaceRestart -------------------------------------------------------------------------------


def in_place_jobset(namespace: str, name: str, max_restarts: int = 2) -> Object:
    """Two Jobs of two pods each (upstream's webhook rules for the strategy met)."""
    job = rjob("workers", 2, indexed=True)
    job["template"]["spec"].update(
        parallelism=2, completions=2, backoffLimit=MAX_INT32, podReplacementPolicy="Failed"
    )
    return make_jobset(
        namespace,
        name,
        replicatedJobs=[job],
        failurePolicy={"maxRestarts": max_restarts, "restartStrategy": "InPlaceRestart"},
    )


async def agent_pods(h: Harness, name: str, count: int) -> list[str]:
    """The JobSet's pods as the Job controller would make them (labelled with the JobSet's
    name), each with the in-place restart attempt its agent would write: 0."""
    names = []
    for i in range(count):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-workers-{i // 2}-{i % 2}",
                "namespace": h.namespace,
                "labels": {c.JobSetNameKey: name},
                "annotations": {c23.InPlaceRestartAttemptKey: "0"},
            },
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }
        names.append((await h.create(pod))["metadata"]["name"])
    return names


async def set_attempt(h: Harness, pod_name: str, attempt: str) -> None:
    pod = await h.api.get(POD_GVK, pod_name, h.namespace)
    pod["metadata"]["annotations"][c23.InPlaceRestartAttemptKey] = attempt
    await h.api.update(pod)


async def status_is(h: Harness, name: str, **expected: int | None) -> None:
    status = (await h.jobset(name)).get("status") or {}
    got = {key: status.get(key) for key in expected}
    assert got == expected, got


@pytest.mark.gates("InPlaceRestart")
async def test_in_place_restart_attempts_reach_the_status(h: Harness) -> None:
    name = "in-place"
    await h.create(in_place_jobset(h.namespace, name))
    await h.wait_jobs(2, name)
    pods = await agent_pods(h, name, 4)
    # every pod at attempt 0: the agents may lift their barriers
    await eventually(
        lambda: status_is(h, name, currentInPlaceRestartAttempt=0, previousInPlaceRestartAttempt=None),
        timeout=20,
        message="currentInPlaceRestartAttempt 0 once all four pods report 0",
    )
    # one pod restarted in place (a pod's change reconciles its JobSet: the Pod watch)
    await set_attempt(h, pods[0], "1")
    await eventually(
        lambda: status_is(h, name, currentInPlaceRestartAttempt=0, previousInPlaceRestartAttempt=0),
        timeout=20,
        message="previousInPlaceRestartAttempt 0: the other pods must restart in place",
    )
    for pod in pods[1:]:
        await set_attempt(h, pod, "1")
    await eventually(
        lambda: status_is(h, name, currentInPlaceRestartAttempt=1, previousInPlaceRestartAttempt=0),
        timeout=20,
        message="currentInPlaceRestartAttempt 1 once all are in sync again",
    )
    # beyond maxRestarts (2): the JobSet fails
    for pod in pods:
        await set_attempt(h, pod, "3")
    failed = await h.wait_condition("Failed", name=name)
    assert (failed["reason"], failed["message"]) == (
        "ReachedMaxRestarts",
        "jobset failed due to reaching max number of restarts",
    )


@pytest.mark.gates("InPlaceRestart")
async def test_a_container_restarting_past_max_restarts_fails_the_jobset(h: Harness) -> None:
    name = "crashing"
    await h.create(in_place_jobset(h.namespace, name, max_restarts=1))
    await h.wait_jobs(2, name)
    pods = await agent_pods(h, name, 4)
    pod = await h.api.get(POD_GVK, pods[2], h.namespace)
    pod["status"] = {
        "phase": "Running",
        "containerStatuses": [
            {"name": "c", "image": "busybox", "imageID": "", "ready": False, "restartCount": 2, "started": False,
             "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
        ],
    }  # fmt: skip
    await h.api.status.update(pod)
    failed = await h.wait_condition("Failed", name=name)
    assert failed["reason"] == "ReachedMaxRestarts"


async def test_without_the_gate_the_pods_are_not_read(h: Harness) -> None:
    name = "in-place-off"
    await h.create(in_place_jobset(h.namespace, name))
    await h.wait_jobs(2, name)
    await agent_pods(h, name, 4)
    await h.settled(name)
    await status_is(h, name, currentInPlaceRestartAttempt=None, previousInPlaceRestartAttempt=None)


# -- ElasticJobSet --------------------------------------------------------------------------------


def elastic_jobset(namespace: str, name: str) -> Object:
    job = rjob("workers", 1, indexed=True)
    job["template"]["spec"].update(parallelism=2, completions=2)
    return make_jobset(namespace, name, replicatedJobs=[job])


def scale_to(n: int) -> Any:
    def mutate(js: Object) -> None:
        spec = js["spec"]["replicatedJobs"][0]["template"]["spec"]
        spec["parallelism"] = spec["completions"] = n

    return mutate


async def job_scale(h: Harness, name: str, expected: tuple[int, int]) -> None:
    (job,) = await h.jobs(name)
    assert (job["spec"]["parallelism"], job["spec"]["completions"]) == expected


@pytest.mark.gates("ElasticJobSet")
async def test_a_scaled_jobset_patches_its_running_jobs(h: Harness) -> None:
    """upstream: dynamic horizontal pod scaling propagates parallelism and completions."""
    name = "elastic"
    await h.create(elastic_jobset(h.namespace, name))
    (job,) = await h.wait_jobs(1, name)
    await h.active_job(job)
    await h.update_js(name, scale_to(4))
    await eventually(lambda: job_scale(h, name, (4, 4)), timeout=20, message="the Job scaled up to 4")
    await h.update_js(name, scale_to(1))
    await eventually(lambda: job_scale(h, name, (1, 1)), timeout=20, message="the Job scaled down to 1")
    (scaled,) = await h.jobs(name)
    assert scaled["metadata"]["uid"] == job["metadata"]["uid"], "patched in place, not recreated"


async def test_without_the_gate_the_jobs_keep_their_scale(h: Harness) -> None:
    name = "elastic-off"
    await h.create(elastic_jobset(h.namespace, name))
    await h.wait_jobs(1, name)
    # no webhook here: the API server takes the change, the controller leaves the Job alone
    await h.update_js(name, scale_to(4))
    await h.settled(name)
    await job_scale(h, name, (2, 2))
