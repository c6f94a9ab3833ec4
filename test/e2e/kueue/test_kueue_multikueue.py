"""MultiKueue at each API level: a TrainJob or a JobSet queued on a management cluster runs on the
worker cluster, and what the worker's managers make of it comes back.

Two stacks per level (conftest ``multikueue_stack``): the management cluster, with its own manager
and Kueue, whose ClusterQueue has MultiKueue's admission check (controller
``kueue.x-k8s.io/multikueue``; a MultiKueueConfig naming one MultiKueueCluster, ``worker``, whose
kubeconfig is in a Secret), and the worker, the Kueue stack the other tests use (pool flavor,
quota, its own manager). What Kueue does, by the Go code of v0.15.0 and v0.17.0: its webhook on
the management cluster gives the queued object ``spec.managedBy: kueue.x-k8s.io/multikueue``; the
management Workload reserves quota, MultiKueue copies it to the worker, where Kueue admits it;
then MultiKueue creates the object on the worker (``managedBy`` cleared, labelled with the
prebuilt Workload and the origin; at v0.17.0 without Kueue's runtime patch), marks the check Ready,
and the management Kueue admits and unsuspends its own copy. From then on it copies the worker
object's status into the management one; once the worker Workload is finished it finishes the
management Workload and deletes the worker's copies. Deleting the management object deletes them
too.

What the managers must do: on the management cluster nothing (no JobSet, no Job, no pod, no
status write: the TrainJob's ``managedBy`` early return, at v2.1 divergence T-18; the JobSet
controller's ``managedBy`` check); on the worker, run what Kueue admitted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from kueuee2e import (
    GO_MANAGERS,
    JS_API,
    POOL,
    POOL_LABEL,
    WAIT,
    WORKER,
    Api,
    Json,
    MultiKueue,
    MultiKueueApi,
    Stack,
    Watch,
    assert_no_reconciler_errors,
    condition,
    delete_queue_objects,
    full_only,
    has_pool_placement,
    is_true,
    log_size,
    management_queue_objects,
    queue_objects,
    trainjob,
)

from manager.envtest.kwokstages import RUN_SECONDS_ANNOTATION
from manager.testing import eventually
from trainer.conformance import kueue as kq

RUN_SECONDS = 10
"""How long the worker's pods of the finishing tests run (their annotation) before they succeed:
long enough to see their status mirrored while they run."""

OWN_CONTROLLER = {"TrainJob": "trainer.kubeflow.org/trainjob-controller", "JobSet": None}
"""What a copy's ``managedBy`` reads once MultiKueue cleared it (the TrainJob CRD's default)."""

GO_T16_LEVELS = {"v2.1"}
"""The levels whose Go trainer reconciles a TrainJob of ``managedBy: kueue.x-k8s.io/multikueue``
(trainer v2.1.0; divergence T-18): its JobSet is built, and runs, on the management cluster."""


def _xfail_t18_on_go(request: pytest.FixtureRequest, stack: MultiKueue) -> None:
    if GO_MANAGERS and stack.management.level.name in GO_T16_LEVELS:
        request.applymarker(
            pytest.mark.xfail(
                strict=True,
                reason="T-18 (docs/divergences.md): the Go trainer v2.1.0 builds and runs the JobSet of a "
                "MultiKueue TrainJob on the management cluster too",
            )
        )


class NothingRuns:
    """Watches of the JobSets, Jobs and pods of the management namespace from its creation on:
    what a manager there made of the queued objects, however briefly it existed (the JobSets the
    test itself creates, ``users_jobsets``, aside)."""

    def __init__(
        self, api: Api, resource_version: str, *, users_jobsets: frozenset[str] = frozenset()
    ) -> None:
        self.users_jobsets = users_jobsets
        self.watches = {
            "JobSet": Watch(api.env, api.jobset(), resource_version),
            "Job": Watch(api.env, f"/apis/batch/v1/namespaces/{api.ns}/jobs", resource_version),
            "Pod": Watch(api.env, api.pods(), resource_version),
        }

    async def __aenter__(self) -> NothingRuns:
        for watch in self.watches.values():
            await watch.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for watch in self.watches.values():
            await watch.__aexit__(*exc)

    def assert_nothing(self) -> None:
        seen = {
            kind: sorted(
                {
                    obj["metadata"]["name"]
                    for _, obj in watch.events
                    if kind != "JobSet" or obj["metadata"]["name"] not in self.users_jobsets
                }
            )
            for kind, watch in self.watches.items()
        }
        assert all(not names for names in seen.values()), f"made on the management cluster: {seen}"


async def assert_no_manager_events(api: Api) -> None:
    """No event of a trainer or JobSet controller in the namespace (Kueue's own events aside)."""
    events = await api.items(f"/api/v1/namespaces/{api.ns}/events")
    by_managers = []
    for event in events:
        component = (event.get("source") or {}).get("component") or event.get("reportingComponent") or ""
        # Kueue's own job controllers are named after the kinds they queue (``...-kueue-controller``)
        if any(word in component for word in ("trainer", "jobset")) and "kueue" not in component:
            by_managers.append((event["involvedObject"].get("name"), event.get("reason"), component))
    assert by_managers == [], by_managers


async def _namespace_version(api: Api) -> str:
    return str((await api.must_get(f"/api/v1/namespaces/{api.ns}"))["metadata"]["resourceVersion"])


async def _queues(mk: MultiKueueApi) -> tuple[dict[str, str], dict[str, str]]:
    """The worker's pool ClusterQueue and the management's MultiKueue one, both with LocalQueue ``lq``."""
    return await management_queue_objects(mk.management, mk.management.ns), await queue_objects(
        mk.worker, mk.worker.ns
    )


async def _delete_queues(mk: MultiKueueApi, management: dict[str, str], worker: dict[str, str]) -> None:
    await delete_queue_objects(mk.management, management)
    await delete_queue_objects(mk.worker, worker)


async def assert_dispatched(mk: MultiKueueApi, kind: str, name: str) -> tuple[Json, Json]:
    """``kind`` ``name`` of the management cluster runs on the worker: the management Workload
    admitted with MultiKueue's check Ready and ``clusterName: worker``, the object itself
    unsuspended and still ``managedBy`` MultiKueue; the worker's copy created by MultiKueue
    (prebuilt Workload, origin label, no ``managedBy``), its own Workload admitted, unsuspended.
    Returns both Workloads."""
    plural = "trainjobs" if kind == "TrainJob" else "jobsets"
    local = await mk.management.workload_of(kind, name)
    assert is_true(local, "Admitted"), local.get("status")
    assert local["status"].get("clusterName") == WORKER, local["status"]
    checks = local["status"].get("admissionChecks") or []
    assert [(c["name"], c["state"]) for c in checks] == [("multikueue", "Ready")], checks
    obj = await mk.management.must_get(f"{_api(kind)}/namespaces/{mk.management.ns}/{plural}/{name}")
    assert obj["spec"].get("managedBy") == kq.MULTIKUEUE_CONTROLLER, obj["spec"].get("managedBy")
    assert obj["spec"].get("suspend") is False, obj["spec"].get("suspend")
    copy = await mk.worker.must_get(f"{_api(kind)}/namespaces/{mk.worker.ns}/{plural}/{name}")
    labels = copy["metadata"].get("labels") or {}
    assert labels.get(kq.PREBUILT_WORKLOAD_LABEL) == local["metadata"]["name"], labels
    assert labels.get(kq.MULTIKUEUE_ORIGIN_LABEL) == "multikueue", labels
    # cleared by MultiKueue; a TrainJob's CRD then defaults it to the Trainer's own controller
    assert copy["spec"].get("managedBy") in (None, OWN_CONTROLLER[kind]), copy["spec"].get("managedBy")
    assert copy["spec"].get("suspend") is False, copy["spec"].get("suspend")
    remote = await mk.worker.must_get(f"{mk.worker.workloads()}/{local['metadata']['name']}")
    assert is_true(remote, "Admitted"), remote.get("status")
    return local, remote


def _api(kind: str) -> str:
    return "/apis/trainer.kubeflow.org/v1alpha1" if kind == "TrainJob" else JS_API


async def assert_running_on_pool(api: Api, jobset: str, pods: int) -> None:
    """The worker's JobSet ``jobset`` unsuspended with the pool flavor's placement and ``pods``
    Running pods on pool nodes."""
    js = await api.must_get(api.jobset(jobset))
    assert js["spec"].get("suspend") is False, js["spec"].get("suspend")
    for rjob in js["spec"]["replicatedJobs"]:
        assert has_pool_placement(rjob["template"]["spec"]["template"]["spec"]), rjob["name"]
    running = [p for p in await api.jobset_pods(jobset) if not p["metadata"].get("deletionTimestamp")]
    assert len(running) == pods, [p["metadata"]["name"] for p in running]
    for pod in running:
        assert (pod["spec"].get("nodeName") or "").startswith("pool-node-"), pod["spec"].get("nodeName")
        assert (pod["spec"].get("nodeSelector") or {}).get(POOL_LABEL) == POOL, pod["spec"]
        assert pod["status"].get("phase") == "Running", pod["status"].get("phase")


def _set_fields(status: Json) -> Json:
    """``status`` without its top-level zero values: Kueue copies a status into the management
    object through Go structs and a merge patch against the object as read, so a field the
    management copy lacks and the worker has at its zero value (a JobSet's ``restarts: 0``) is
    never sent (the same with any manager)."""
    return {k: v for k, v in status.items() if v not in (0, "", None)}


async def assert_status_mirrored(mk: MultiKueueApi, path_of: str, *, active: int) -> None:
    """The management object's status is the worker copy's, taken while ``active`` Jobs run."""
    local = await mk.management.must_get(path_of.format(ns=mk.management.ns))
    remote = await mk.worker.must_get(path_of.format(ns=mk.worker.ns))
    statuses = remote.get("status") or {}
    jobs = statuses.get("jobsStatus") or statuses.get("replicatedJobsStatus") or []
    assert sum(j.get("active", 0) for j in jobs) == active, statuses
    assert _set_fields(local.get("status") or {}) == _set_fields(statuses), (local.get("status"), statuses)


async def assert_finished_and_cleaned_up(
    mk: MultiKueueApi, kind: str, name: str, path_of: str, done: str, workload: str
) -> None:
    """The management object carries the worker's terminal condition ``done``, its Workload is
    Finished (with the worker Workload's reason: Kueue v0.15.0 finishes a TrainJob's prebuilt
    Workload as ``OutOfSync`` when the TrainJob completes, with the Go managers alike), and
    MultiKueue deleted the worker's copy and its Workload (the JobSet, Jobs and pods go with them)."""
    local = await mk.management.must_get(path_of.format(ns=mk.management.ns))
    finished = condition(local, done)
    assert finished and finished["status"] == "True", local.get("status")
    wl = await mk.management.workload_of(kind, name)
    assert is_true(wl, "Finished"), wl.get("status")
    print(f"kueue-e2e: {kind} {name}: management Workload Finished, reason {condition(wl, 'Finished')}")
    assert await mk.worker.get(path_of.format(ns=mk.worker.ns)) is None, "the worker's copy is still there"
    assert await mk.worker.get(f"{mk.worker.workloads()}/{workload}") is None, "the worker's Workload stayed"
    assert await mk.worker.get(mk.worker.jobset(name)) is None, "the worker's JobSet stayed"
    pods = [p["metadata"]["name"] for p in await mk.worker.jobset_pods(name)]
    assert pods == [], pods


async def assert_runs_on_the_worker_then_completes(
    mk: MultiKueueApi,
    kind: str,
    name: str,
    path_of: str,
    *,
    pods: int,
    completed: str,
    first: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """``kind`` ``name`` dispatched to the worker and running there on ``pods`` pool pods (after
    ``first``, checked on each try), its status mirrored back while it runs, then ``completed``
    on the management copy and the worker's copy gone."""

    async def running() -> str:
        if first is not None:
            await first()
        _, remote = await assert_dispatched(mk, kind, name)
        await assert_running_on_pool(mk.worker, name, pods)
        return str(remote["metadata"]["name"])

    workload = await eventually(running, timeout=WAIT, message=f"{kind} {name} never ran on the worker")
    await eventually(
        lambda: assert_status_mirrored(mk, path_of, active=pods),
        timeout=WAIT,
        message=f"the worker's status of {name} never came back to the management cluster",
    )
    await eventually(
        lambda: assert_finished_and_cleaned_up(mk, kind, name, path_of, completed, workload),
        timeout=WAIT + RUN_SECONDS,
        message=f"{name} never completed on the management cluster, or its worker copy stayed",
    )


async def assert_quiet(mk: MultiKueueApi, stacks: tuple[Stack, ...], since: list[int]) -> None:
    """No manager event on the management cluster, no reconciler error in either stack's log
    since ``since``."""
    await assert_no_manager_events(mk.management)
    for stack, offset in zip(stacks, since, strict=True):
        assert_no_reconciler_errors(stack, mk.management.ns, offset)


def _finishing_trainjob(api: Api, name: str) -> Json:
    """A TrainJob of one node and 1 CPU whose pod runs ``RUN_SECONDS`` (a user's entry of the
    level's field carries the annotation: ``podTemplateOverrides`` or ``runtimePatches``)."""
    body = trainjob(name, api.ns, nodes=1, cpu="1")
    body["spec"][api.writes.field] = [
        api.writes.user_entry(annotations={RUN_SECONDS_ANNOTATION: f"{RUN_SECONDS}"})
    ]
    return body


async def test_trainjob_runs_on_the_worker_and_its_status_comes_back(
    multikueue_stack: MultiKueue, mk: MultiKueueApi, request: pytest.FixtureRequest
) -> None:
    """A TrainJob queued on the management cluster: given ``managedBy`` MultiKueue, dispatched to
    the worker, where this manager runs it on the pool flavor's nodes; its status while running and
    its completion come back to the management copy, then MultiKueue removes the worker's copy.
    The management cluster never has a JobSet, Job or pod of it."""
    _xfail_t18_on_go(request, multikueue_stack)
    stacks = (multikueue_stack.management, multikueue_stack.worker)
    since = [log_size(s.manager.log) for s in stacks]
    management, worker = await _queues(mk)
    path_of = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/t"
    try:
        async with NothingRuns(mk.management, await _namespace_version(mk.management)) as nothing:
            created = await mk.management.create(
                mk.management.trainjob(), _finishing_trainjob(mk.management, "t")
            )
            assert created["spec"].get("managedBy") == kq.MULTIKUEUE_CONTROLLER, created["spec"]
            assert created["spec"].get("suspend") is True, created["spec"]

            async def no_management_jobset() -> None:
                # first, so that a manager that builds one fails for that reason
                assert await mk.management.get(mk.management.jobset("t")) is None, (
                    "a JobSet t on the management cluster"
                )

            await assert_runs_on_the_worker_then_completes(
                mk, "TrainJob", "t", path_of, pods=1, completed="Complete", first=no_management_jobset
            )
        nothing.assert_nothing()
        await assert_quiet(mk, stacks, since)
    finally:
        await mk.management.delete(mk.management.trainjob("t"))
        await _delete_queues(mk, management, worker)


def _finishing_jobset(name: str, namespace: str, *, replicas: int) -> Json:
    """A plain JobSet of ``replicas`` one-pod Jobs of 1 CPU, each pod running ``RUN_SECONDS``."""
    pod = {
        "metadata": {"annotations": {RUN_SECONDS_ANNOTATION: f"{RUN_SECONDS}"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
        },
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {kq.QUEUE_LABEL: "lq"}},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "w",
                    "replicas": replicas,
                    "template": {
                        "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": pod}
                    },
                }
            ]
        },
    }


@full_only
async def test_jobset_runs_on_the_worker_and_its_status_comes_back(
    multikueue_stack: MultiKueue, mk: MultiKueueApi
) -> None:
    """A plain JobSet queued on the management cluster: ``managedBy`` MultiKueue, its Jobs made only
    on the worker (pods on the pool), its status mirrored, ``Completed`` on the management copy
    once the worker's completes, and the worker's copy removed."""
    stacks = (multikueue_stack.management, multikueue_stack.worker)
    since = [log_size(s.manager.log) for s in stacks]
    management, worker = await _queues(mk)
    path_of = f"{JS_API}/namespaces/{{ns}}/jobsets/js"
    try:
        async with NothingRuns(
            mk.management, await _namespace_version(mk.management), users_jobsets=frozenset({"js"})
        ) as nothing:
            created = await mk.management.create(
                mk.management.jobset(), _finishing_jobset("js", mk.management.ns, replicas=2)
            )
            assert created["spec"].get("managedBy") == kq.MULTIKUEUE_CONTROLLER, created["spec"]

            await assert_runs_on_the_worker_then_completes(
                mk, "JobSet", "js", path_of, pods=2, completed="Completed"
            )
        nothing.assert_nothing()
        await assert_quiet(mk, stacks, since)
    finally:
        await mk.management.delete(mk.management.jobset("js"))
        await _delete_queues(mk, management, worker)


@full_only
async def test_deleting_on_the_management_cluster_removes_the_worker_copies(
    multikueue_stack: MultiKueue, mk: MultiKueueApi, request: pytest.FixtureRequest
) -> None:
    """A TrainJob and a JobSet running on the worker (pods that would run for minutes), deleted on
    the management cluster: MultiKueue deletes the worker's copies and Workloads, and the worker's
    managers and garbage collector take the JobSets, Jobs and pods with them."""
    _xfail_t18_on_go(request, multikueue_stack)
    stacks = (multikueue_stack.management, multikueue_stack.worker)
    since = [log_size(s.manager.log) for s in stacks]
    management, worker = await _queues(mk)
    try:
        async with NothingRuns(
            mk.management, await _namespace_version(mk.management), users_jobsets=frozenset({"js"})
        ) as nothing:
            await mk.management.create(
                mk.management.trainjob(), trainjob("t", mk.management.ns, nodes=1, cpu="1")
            )
            jobset = _finishing_jobset("js", mk.management.ns, replicas=1)
            del jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]
            await mk.management.create(mk.management.jobset(), jobset)

            async def running() -> list[str]:
                assert await mk.management.get(mk.management.jobset("t")) is None, (
                    "a JobSet t on the management cluster"
                )
                names = []
                for kind, name in (("TrainJob", "t"), ("JobSet", "js")):
                    _, remote = await assert_dispatched(mk, kind, name)
                    await assert_running_on_pool(mk.worker, name, 1)
                    names.append(str(remote["metadata"]["name"]))
                return names

            workloads = await eventually(running, timeout=WAIT, message="t and js never ran on the worker")
            await mk.management.delete(mk.management.trainjob("t"))
            await mk.management.delete(mk.management.jobset("js"))

            async def gone() -> None:
                for path in (mk.management.trainjob("t"), mk.management.jobset("js")):
                    assert await mk.management.get(path) is None, f"{path} is still there"
                assert await mk.management.items(mk.management.workloads()) == []
                for path in (mk.worker.trainjob("t"), mk.worker.jobset("t"), mk.worker.jobset("js")):
                    assert await mk.worker.get(path) is None, f"the worker's {path} is still there"
                for workload in workloads:
                    assert await mk.worker.get(f"{mk.worker.workloads()}/{workload}") is None, workload
                pods = [p["metadata"]["name"] for p in await mk.worker.items(mk.worker.pods())]
                assert pods == [], pods

            await eventually(
                gone, timeout=WAIT, message="the worker's copies outlived the management objects"
            )
        nothing.assert_nothing()
        jobsets = await mk.management.items(f"{JS_API}/namespaces/{mk.management.ns}/jobsets")
        assert jobsets == [], [j["metadata"]["name"] for j in jobsets]
        await assert_quiet(mk, stacks, since)
    finally:
        await mk.management.delete(mk.management.trainjob("t"))
        await mk.management.delete(mk.management.jobset("js"))
        await _delete_queues(mk, management, worker)
