"""Trainer controllers on a real API server with the webhooks installed (docs/behaviour/trainer.md §10 L)."""

from __future__ import annotations

from typing import Any

import pytest
from trainer_wrappers import RES4, containers_of, rjob, rjob_of, runtime, trainjob, wrapper_rjobs

from manager.client import NotFound
from manager.controller.reconcile import Request
from manager.controller_util import retry_on_conflict
from manager.scheme import GroupVersionKind
from manager.testing.eventually import eventually

Json = dict[str, Any]
TJ = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainJob")
TR = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainingRuntime")
CTR = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "ClusterTrainingRuntime")
JOBSET = GroupVersionKind("jobset.x-k8s.io", "v1alpha2", "JobSet")
PODGROUP = GroupVersionKind("scheduling.x-k8s.io", "v1alpha1", "PodGroup")
FINALIZER = "trainer.kubeflow.org/resource-in-use"
RUNTIME_CONTAINER = {"image": "test:runtime", "command": ["runtime"], "args": ["runtime"], "resources": RES4}


def l1_runtime(namespace: str) -> Json:
    return runtime(
        "alpha",
        namespace,
        rjobs=wrapper_rjobs(container=RUNTIME_CONTAINER),
        ml_policy={"numNodes": 100},
        pod_group_policy={"coscheduling": {"scheduleTimeoutSeconds": 100}},
    )


def l1_trainjob(namespace: str, *, image: str = "test:trainjob") -> Json:
    return trainjob(
        "alpha",
        namespace,
        "alpha",
        suspend=True,
        labels={"testingKey": "testingVal"},
        annotations={"testingKey": "testingVal"},
        trainer={"image": image, "command": ["trainjob"], "args": ["trainjob"], "resourcesPerNode": RES4},
        initializer={
            "dataset": {"storageUri": "hf://trainjob-dataset"},
            "model": {"storageUri": "hf://trainjob-model"},
        },
    )


def owner_of(tj: Json) -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "name": tj["metadata"]["name"],
        "uid": tj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


async def _get(client: Any, gvk: GroupVersionKind, name: str, namespace: str = "") -> Json:
    obj: Json = await client.get(gvk, name, namespace)
    return obj


async def _exists(client: Any, gvk: GroupVersionKind, name: str, namespace: str = "") -> Json:
    """For ``eventually``: the object, or an AssertionError while it is missing."""
    try:
        return await _get(client, gvk, name, namespace)
    except NotFound as err:
        raise AssertionError(str(err)) from err


async def _edit_trainjob(client: Any, ns: str, **spec: Any) -> Json:
    """Update TrainJob ``alpha``: ``image`` sets the trainer image, other keys set spec fields.

    Re-read and retried on a Conflict, as any client must: the controller writes the TrainJob's
    status at the same time."""

    async def attempt() -> Json:
        current = await _get(client, TJ, "alpha", ns)
        for key, value in spec.items():
            if key == "image":
                current["spec"]["trainer"]["image"] = value
            else:
                current["spec"][key] = value
        updated: Json = await client.update(current)
        return updated

    return await retry_on_conflict(attempt)


def assert_l1_jobset(jobset: Json, tj: Json, *, suspend: bool, image: str) -> None:
    assert jobset["metadata"]["ownerReferences"] == [owner_of(tj)]
    assert jobset["metadata"]["labels"] == {"testingKey": "testingVal"}
    assert jobset["metadata"]["annotations"] == {"testingKey": "testingVal"}
    assert jobset["spec"]["suspend"] is suspend
    counts = {"dataset-initializer": 1, "model-initializer": 1, "node": 100}
    for name, count in counts.items():
        job = rjob_of(jobset, name)
        assert job["replicas"] == 1
        assert job["template"]["spec"]["parallelism"] == count
        assert job["template"]["spec"]["completions"] == count
        assert (
            job["template"]["spec"]["template"]["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"]
            == "alpha"
        )
    [dataset] = containers_of(jobset, "dataset-initializer")
    assert dataset["env"] == [{"name": "STORAGE_URI", "value": "hf://trainjob-dataset"}]
    assert dataset["image"] == "test:runtime"
    [model] = containers_of(jobset, "model-initializer")
    assert model["env"] == [{"name": "STORAGE_URI", "value": "hf://trainjob-model"}]
    [node] = containers_of(jobset, "node")
    assert (node["image"], node["command"], node["args"]) == (image, ["trainjob"], ["trainjob"])
    assert node["resources"] == RES4


async def test_trainjob_creates_jobset_and_podgroup(trainer: Any) -> None:
    # spec: trainer L1  # spec: scheduling 46
    client, ns = trainer.client, trainer.namespace
    await client.create(l1_runtime(ns))
    tj = await client.create(l1_trainjob(ns))

    async def jobset_built() -> None:
        try:
            jobset = await _get(client, JOBSET, "alpha", ns)
        except NotFound as err:
            raise AssertionError("no JobSet yet") from err
        assert_l1_jobset(jobset, tj, suspend=True, image="test:trainjob")

    await eventually(jobset_built, timeout=30)
    podgroup = await _get(client, PODGROUP, "alpha", ns)
    assert podgroup["metadata"]["ownerReferences"] == [owner_of(tj)]
    assert podgroup["spec"]["minMember"] == 102
    assert podgroup["spec"]["minResources"] == {"cpu": "102", "memory": "408Gi"}
    assert podgroup["spec"]["scheduleTimeoutSeconds"] == 100
    # every generated object is owned by the field manager "trainer"
    managers = {m["manager"] for m in (await _get(client, JOBSET, "alpha", ns))["metadata"]["managedFields"]}
    assert managers == {"trainer"}


async def test_suspended_edits_propagate_running_edits_do_not(trainer: Any) -> None:
    # spec: trainer L2
    client, ns = trainer.client, trainer.namespace
    await client.create(l1_runtime(ns))
    tj = await client.create(l1_trainjob(ns))
    await eventually(lambda: _exists(client, JOBSET, "alpha", ns), timeout=30)

    async def edit(**spec: Any) -> Json:
        return await _edit_trainjob(client, ns, **spec)

    async def jobset_is(*, suspend: bool, image: str) -> None:
        assert_l1_jobset(await _get(client, JOBSET, "alpha", ns), tj, suspend=suspend, image=image)

    await edit(image="updated-trainer-image")
    await eventually(lambda: jobset_is(suspend=True, image="updated-trainer-image"), timeout=30)
    podgroup = await _get(client, PODGROUP, "alpha", ns)
    assert podgroup["spec"]["minMember"] == 102

    await edit(suspend=False)
    await eventually(lambda: jobset_is(suspend=False, image="updated-trainer-image"), timeout=30)

    edited = await edit(image="test:trainjob")
    # a running JobSet is never re-applied: not once the controller has reconciled the edit
    await trainer.reconciles.trainjob_read(ns, "alpha", edited["metadata"]["resourceVersion"])
    await jobset_is(suspend=False, image="updated-trainer-image")

    await edit(suspend=True, image="test:trainjob")
    await eventually(lambda: jobset_is(suspend=True, image="test:trainjob"), timeout=30)


async def test_podgroup_is_reapplied_only_while_suspended(trainer: Any) -> None:
    # spec: scheduling 47
    # "Re-applied" is made visible by another field manager taking scheduleTimeoutSeconds:
    # a re-apply by "trainer" (force) takes it back, no re-apply leaves it.
    client, ns = trainer.client, trainer.namespace
    await client.create(l1_runtime(ns))
    await client.create(l1_trainjob(ns))
    await eventually(lambda: _exists(client, PODGROUP, "alpha", ns), timeout=30)

    async def edit(**spec: Any) -> Json:
        return await _edit_trainjob(client, ns, **spec)

    async def tamper() -> None:
        podgroup = {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "alpha", "namespace": ns},
            "spec": {"scheduleTimeoutSeconds": 5},
        }
        await client.apply(podgroup, field_owner="someone-else", force=True)

    async def timeout_is(seconds: int) -> None:
        podgroup = await _get(client.api_reader, PODGROUP, "alpha", ns)
        assert podgroup["spec"]["scheduleTimeoutSeconds"] == seconds
        assert (podgroup["spec"]["minMember"], podgroup["spec"]["minResources"]) == (
            102,
            {"cpu": "102", "memory": "408Gi"},
        )

    # Suspended: an edit of the TrainJob re-applies the PodGroup with the same values.
    await tamper()
    await edit(image="updated-trainer-image")
    await eventually(lambda: timeout_is(100), timeout=30, message="suspended: PodGroup re-applied")

    # Running: the JobSet follows the unsuspend, the PodGroup is no longer re-applied.
    await edit(suspend=False)
    await eventually(lambda: _jobset_suspend_is(client, ns, False), timeout=30)
    await tamper()
    edited = await edit(image="test:trainjob")
    # not re-applied: not once the controller has reconciled the edit (and the PodGroup event)
    await trainer.reconciles.trainjob_read(ns, "alpha", edited["metadata"]["resourceVersion"])
    await timeout_is(5)


async def _jobset_suspend_is(client: Any, ns: str, suspend: bool) -> None:
    assert (await _get(client, JOBSET, "alpha", ns))["spec"]["suspend"] is suspend


async def test_torch_runtime_env_and_port(trainer: Any) -> None:
    # spec: trainer L3
    client, ns = trainer.client, trainer.namespace
    node_only = [rjob("node", container={"image": "test:runtime", "resources": RES4})]
    await client.create(runtime("alpha", ns, rjobs=node_only, ml_policy={"numNodes": 100, "torch": {}}))
    await client.create(
        trainjob(
            "alpha",
            ns,
            "alpha",
            trainer={
                "image": "test:trainjob",
                "resourcesPerNode": RES4,
                "env": [{"name": "TRAIN_JOB", "value": "value"}],
            },
        )
    )

    async def torch_jobset() -> None:
        try:
            jobset = await _get(client, JOBSET, "alpha", ns)
        except NotFound as err:
            raise AssertionError("no JobSet yet") from err
        [node] = containers_of(jobset, "node")
        assert node["env"] == [
            {"name": "TRAIN_JOB", "value": "value"},
            {"name": "PET_NNODES", "value": "100"},
            {"name": "PET_NPROC_PER_NODE", "value": "1"},
            {
                "name": "PET_NODE_RANK",
                "valueFrom": {
                    "fieldRef": {
                        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']",
                    }
                },
            },
            {"name": "PET_MASTER_ADDR", "value": "alpha-node-0-0.alpha"},
            {"name": "PET_MASTER_PORT", "value": "29500"},
        ]
        assert node["ports"] == [{"containerPort": 29500, "protocol": "TCP"}]
        assert jobset["spec"]["suspend"] is False
        assert rjob_of(jobset, "node")["template"]["spec"]["parallelism"] == 100

    await eventually(torch_jobset, timeout=30)


def _jobs_status(**counts: dict[str, int]) -> list[Json]:
    keys = ("ready", "succeeded", "failed", "active", "suspended")
    return [{"name": name, **{k: c.get(k, 0) for k in keys}} for name, c in counts.items()]


async def _set_jobset_status(client: Any, ns: str, condition: Json | None, jobs: list[Json]) -> None:
    jobset = await _get(client, JOBSET, "alpha", ns)
    status: Json = {"replicatedJobsStatus": jobs}
    if condition is not None:
        status["conditions"] = [{**condition, "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"}]
    jobset["status"] = status
    await client.status.update(jobset)


def _conditions(tj: Json) -> list[tuple[str, str, str, str]]:
    return [
        (c["type"], c["status"], c["reason"], c["message"])
        for c in (tj.get("status") or {}).get("conditions", [])
    ]


SUSPENDED = ("Suspended", "True", "Suspended", "TrainJob is suspended")
RESUMED = ("Suspended", "False", "Resumed", "TrainJob is resumed")


async def _suspend_then_resume(client: Any, ns: str) -> None:
    async def conditions_are(expected: list[tuple[str, str, str, str]]) -> None:
        assert _conditions(await _get(client, TJ, "alpha", ns)) == expected

    await eventually(lambda: conditions_are([SUSPENDED]), timeout=30)
    await _edit_trainjob(client, ns, suspend=False)
    await eventually(lambda: conditions_are([RESUMED]), timeout=30)


async def test_conditions_follow_suspension_and_jobset_completion(trainer: Any) -> None:
    # spec: trainer L4
    client, ns = trainer.client, trainer.namespace
    await client.create(l1_runtime(ns))
    await client.create(l1_trainjob(ns))
    await _suspend_then_resume(client, ns)
    jobs = _jobs_status(
        **{
            "dataset-initializer": {"succeeded": 1},
            "model-initializer": {"succeeded": 1},
            "node": {"succeeded": 1},
        }
    )
    completed = {
        "type": "Completed",
        "reason": "AllJobsCompleted",
        "message": "jobset completed successfully",
    }
    await _set_jobset_status(client, ns, completed, jobs)

    async def complete() -> None:
        tj = await _get(client, TJ, "alpha", ns)
        assert _conditions(tj) == [
            RESUMED,
            ("Complete", "True", "AllJobsCompleted", "jobset completed successfully"),
        ]
        assert tj["status"].get("jobsStatus") == jobs
        assert tj["status"]["conditions"][1]["lastTransitionTime"] == "2025-01-01T00:00:00Z"

    await eventually(complete, timeout=30)


async def test_jobset_failure_fails_the_trainjob(trainer: Any) -> None:
    # spec: trainer L5
    client, ns = trainer.client, trainer.namespace
    await client.create(l1_runtime(ns))
    await client.create(l1_trainjob(ns))
    await _suspend_then_resume(client, ns)
    jobs = _jobs_status(
        **{
            "dataset-initializer": {"succeeded": 1},
            "model-initializer": {"succeeded": 1},
            "node": {"failed": 1},
        }
    )
    failed = {
        "type": "Failed",
        "reason": "FailedJobs",
        "message": "jobset failed due to one or more job failures",
    }
    await _set_jobset_status(client, ns, failed, jobs)

    async def is_failed() -> None:
        tj = await _get(client, TJ, "alpha", ns)
        assert _conditions(tj) == [
            RESUMED,
            ("Failed", "True", "FailedJobs", "jobset failed due to one or more job failures"),
        ]
        assert tj["status"].get("jobsStatus") == jobs

    await eventually(is_failed, timeout=30)


async def test_jobs_status_mirrors_the_jobset(trainer: Any) -> None:
    # spec: trainer L6
    client, ns = trainer.client, trainer.namespace
    await client.create(l1_runtime(ns))
    await client.create(l1_trainjob(ns))
    await _suspend_then_resume(client, ns)
    for node in ({"ready": 1, "active": 1}, {"failed": 1}):
        jobs = _jobs_status(
            **{"dataset-initializer": {"succeeded": 1}, "model-initializer": {"succeeded": 1}, "node": node}
        )
        await _set_jobset_status(client, ns, None, jobs)

        async def mirrored(expected: list[Json] = jobs) -> None:
            tj = await _get(client, TJ, "alpha", ns)
            assert tj["status"].get("jobsStatus") == expected
            assert _conditions(tj) == [RESUMED]

        await eventually(mirrored, timeout=30)


async def test_pod_template_overrides_reach_the_jobset(trainer: Any) -> None:
    # spec: trainer L7
    client, ns = trainer.client, trainer.namespace
    node = rjob("node", container={"image": "test:runtime", "resources": RES4})
    node["template"]["spec"]["template"]["spec"]["initContainers"] = [
        {
            "name": "override-init-container",
            "image": "test:runtime",
            "env": [
                {"name": "INIT_ENV", "value": "original_init"},
                {"name": "DATASET_PATH", "value": "runtime"},
            ],
        }
    ]
    await client.create(runtime("alpha", ns, rjobs=[node], ml_policy={"numNodes": 100, "torch": {}}))
    override = {
        "targetJobs": [{"name": "node"}],
        "metadata": {
            "labels": {"override-label-key": "override-label-value", "custom-label": "custom-value"},
            "annotations": {"override-annotation-key": "override-annotation-value", "custom-annotation": "a"},
        },
        "spec": {
            "serviceAccountName": "override-sa",
            "initContainers": [
                {
                    "name": "override-init-container",
                    "env": [
                        {"name": "INIT_ENV", "value": "override_init"},
                        {"name": "NEW_VALUE", "value": "from_overrides"},
                    ],
                }
            ],
        },
    }
    await client.create(
        trainjob(
            "alpha",
            ns,
            "alpha",
            trainer={"image": "test:trainjob", "env": [{"name": "TRAIN_JOB", "value": "value"}]},
            podTemplateOverrides=[override],
        )
    )

    async def overridden() -> None:
        try:
            jobset = await _get(client, JOBSET, "alpha", ns)
        except NotFound as err:
            raise AssertionError("no JobSet yet") from err
        pod = rjob_of(jobset, "node")["template"]["spec"]["template"]
        assert pod["metadata"]["labels"]["override-label-key"] == "override-label-value"
        assert pod["metadata"]["labels"]["custom-label"] == "custom-value"
        assert pod["metadata"]["annotations"]["custom-annotation"] == "a"
        assert pod["spec"]["serviceAccountName"] == "override-sa"
        assert pod["spec"]["initContainers"][0]["env"] == [
            {"name": "INIT_ENV", "value": "override_init"},
            {"name": "NEW_VALUE", "value": "from_overrides"},
            {"name": "DATASET_PATH", "value": "runtime"},
        ]
        [container] = pod["spec"]["containers"]
        assert [e["name"] for e in container["env"]][:2] == ["TRAIN_JOB", "PET_NNODES"]
        assert container["ports"] == [{"containerPort": 29500, "protocol": "TCP"}]

    await eventually(overridden, timeout=30)


async def test_mpi_runtime_builds_hostfile_and_ssh_secret(trainer: Any) -> None:
    # spec: trainer L8
    client, ns = trainer.client, trainer.namespace
    launcher = {
        "name": "launcher",
        "template": {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "node", "image": "test:mpi", "command": ["mpirun"], "args": ["echo.sh"]}
                        ]
                    }
                }
            }
        },
    }
    node = rjob("node", container={"image": "test:trainjob", "resources": RES4})
    mpi = {
        "numProcPerNode": 8,
        "mpiImplementation": "OpenMPI",
        "sshAuthMountPath": "/root/.ssh",
        "runLauncherAsNode": False,
    }
    await client.create(runtime("alpha", ns, rjobs=[launcher, node], ml_policy={"numNodes": 1, "mpi": mpi}))
    tj = await client.create(
        trainjob(
            "alpha",
            ns,
            "alpha",
            trainer={
                "numNodes": 2,
                "image": "test:trainjob",
                "resourcesPerNode": RES4,
                "env": [{"name": "TRAIN_JOB", "value": "value"}],
            },
        )
    )

    async def built() -> None:
        try:
            jobset = await _get(client, JOBSET, "alpha", ns)
            hostfile = await _get(client, GroupVersionKind("", "v1", "ConfigMap"), "alpha-mpi-hostfile", ns)
            secret = await _get(client, GroupVersionKind("", "v1", "Secret"), "alpha-mpi-ssh-auth", ns)
        except NotFound as err:
            raise AssertionError(str(err)) from err
        assert rjob_of(jobset, "launcher")["template"]["spec"]["parallelism"] == 1
        assert rjob_of(jobset, "node")["template"]["spec"]["parallelism"] == 2
        [launcher_container] = containers_of(jobset, "launcher")
        env = {e["name"]: e.get("value") for e in launcher_container["env"]}
        assert env["OMPI_MCA_orte_set_default_slots"] == "8"
        [node_container] = containers_of(jobset, "node")
        assert node_container["env"] == [{"name": "TRAIN_JOB", "value": "value"}]
        assert hostfile["data"] == {
            "hostfile": "alpha-node-0-0.alpha slots=8\nalpha-node-0-1.alpha slots=8\n"
        }
        assert hostfile["metadata"]["ownerReferences"] == [owner_of(tj)]
        assert secret["immutable"] is True
        assert secret["type"] == "kubernetes.io/ssh-auth"
        assert secret["data"]["ssh-privatekey"] and secret["data"]["ssh-publickey"]
        assert secret["metadata"]["ownerReferences"] == [owner_of(tj)]

    await eventually(built, timeout=30)


async def _finalizers(client: Any, gvk: GroupVersionKind, name: str, ns: str) -> list[str]:
    obj = await _get(client, gvk, name, ns)
    return list(obj["metadata"].get("finalizers") or [])


async def _runtime_finalizer_lifecycle(trainer: Any, gvk: GroupVersionKind, namespaced: bool) -> None:
    client, ns = trainer.client, trainer.namespace
    name = "alpha" if namespaced else f"alpha-{ns}"
    runtime_ns = ns if namespaced else ""
    created = await client.create(runtime(name, ns if namespaced else None))
    request = Request(runtime_ns, name)
    # no TrainJob, no finalizer: not once the runtime controller has reconciled the new runtime
    rv = int(created["metadata"]["resourceVersion"])
    await trainer.reconciles.processed(
        "runtime", request, lambda o: (o["runtime"] or 0) >= rv, what=f"the new {gvk.kind} {name}"
    )
    assert await _finalizers(client, gvk, name, runtime_ns) == []
    await client.create(trainjob("alpha", ns, name, kind=gvk.kind))

    async def has_finalizer() -> None:
        assert await _finalizers(client, gvk, name, runtime_ns) == [FINALIZER]

    await eventually(has_finalizer, timeout=30)
    # From here on every reconcile of the runtime sees the TrainJob until its delete is cached.
    with_trainjob = trainer.reconciles.mark()
    # The finalizer write is upstream's typed Update of the whole runtime: the stored runtime
    # now has Go's zero fields (the JobSet template's metadata) and, its spec changed, generation 2.
    stored = await _get(client, gvk, name, runtime_ns)
    assert stored["metadata"]["generation"] == 2
    assert stored["spec"]["template"]["metadata"] == {}

    await client.delete_by_name(TJ, "alpha", ns)

    async def trainjob_gone() -> None:
        try:
            await _get(client, TJ, "alpha", ns)
        except NotFound:
            return
        raise AssertionError("TrainJob still exists")

    await eventually(trainjob_gone, timeout=30)
    # the TrainJob's delete notifies the runtime controller (after NOTIFY_DELAY): once it has
    # reconciled the runtime without TrainJobs, the finalizer must still be on the live runtime
    await trainer.reconciles.processed(
        "runtime",
        request,
        lambda o: o["trainjobs"] == 0,
        since=with_trainjob,
        what=f"{gvk.kind} {name} after its TrainJob's delete",
    )
    await has_finalizer()

    await client.delete_by_name(gvk, name, runtime_ns)

    async def runtime_gone() -> None:
        try:
            await _get(client, gvk, name, runtime_ns)
        except NotFound:
            return
        raise AssertionError("runtime still exists")

    await eventually(runtime_gone, timeout=30)


async def test_training_runtime_finalizer(trainer: Any) -> None:
    # spec: trainer L11
    # spec: trainer L12
    await _runtime_finalizer_lifecycle(trainer, TR, namespaced=True)


async def test_cluster_training_runtime_finalizer(trainer: Any) -> None:
    # spec: trainer L13
    # spec: trainer L14
    await _runtime_finalizer_lifecycle(trainer, CTR, namespaced=False)


async def test_status_copies_every_replicated_job_of_the_jobset(trainer: Any) -> None:
    # spec: trainer L9
    # spec: trainer L10
    # statuses are copied in JobSet order even for replicated jobs the JobSet spec does not have
    client, ns = trainer.client, trainer.namespace
    await client.create(l1_runtime(ns))
    await client.create(l1_trainjob(ns))
    await _suspend_then_resume(client, ns)
    succeeded = {"succeeded": 1}
    for condition, node, launcher in (
        (
            {"type": "Completed", "reason": "AllJobsCompleted", "message": "jobset completed successfully"},
            {},
            succeeded,
        ),
        (
            {
                "type": "Failed",
                "reason": "FailedJobs",
                "message": "jobset failed due to one or more job failures",
            },
            {},
            {"failed": 1},
        ),
    ):
        jobs = _jobs_status(
            **{
                "dataset-initializer": succeeded,
                "model-initializer": succeeded,
                "launcher": launcher,
                "node": node,
            }
        )
        await _set_jobset_status(client, ns, condition, jobs)
        expected_type = "Complete" if condition["type"] == "Completed" else "Failed"

        async def mirrored(
            expected: list[Json] = jobs, kind: str = expected_type, cond: Json = condition
        ) -> None:
            tj = await _get(client, TJ, "alpha", ns)
            assert _conditions(tj)[0] == RESUMED
            assert (kind, "True", cond["reason"], cond["message"]) in _conditions(tj)
            assert tj["status"].get("jobsStatus") == expected

        await eventually(mirrored, timeout=30)


async def test_group_kind_concurrency_applies_to_the_trainer_controllers(control_plane: Any) -> None:
    # Upstream builds the TrainJob controller without For(), so groupKindConcurrency is ignored
    # and every controller runs one worker; here the shipped values take effect (divergence).
    from manager import Manager, Options
    from manager.cluster import Cluster
    from manager.config import load_kubeconfig
    from manager.controller.controller import Controller
    from manager.manager import Group
    from trainer.controllers.trainer_setup import setup_controllers
    from trainer.runtime.context import SetupContext

    config = await load_kubeconfig(control_plane.kubeconfig)
    async with Cluster(config, field_owner="trainer") as cluster:
        concurrency = {
            "TrainJob.trainer.kubeflow.org": 5,
            "TrainingRuntime.trainer.kubeflow.org": 1,
            "ClusterTrainingRuntime.trainer.kubeflow.org": 2,
        }
        mgr = Manager(cluster, Options(metrics_bind_address="0", group_kind_concurrency=concurrency))
        await setup_controllers(SetupContext(mgr))
        workers = {
            c.name: c.options.max_concurrent_reconciles
            for c in mgr.members(Group.LEADER_ELECTION)
            if isinstance(c, Controller)
        }
        assert workers == {
            "trainjob_controller": 5,
            "trainingruntime_controller": 1,
            "clustertrainingruntime_controller": 2,
        }


async def test_steady_trainjob_changes_nothing_on_the_server(trainer: Any) -> None:
    # Re-reconciling a settled TrainJob (suspended: the JobSet and PodGroup are re-applied; running:
    # nothing is applied) leaves every object's resourceVersion as it was.
    client, ns = trainer.client, trainer.namespace
    await client.create(l1_runtime(ns))
    await client.create(l1_trainjob(ns))

    async def settled(suspended: bool) -> dict[str, str]:
        tj = await _get(client, TJ, "alpha", ns)
        assert _conditions(tj) == [SUSPENDED if suspended else RESUMED]
        jobset = await _exists(client, JOBSET, "alpha", ns)
        assert jobset["spec"]["suspend"] is suspended
        podgroup = await _exists(client, PODGROUP, "alpha", ns)
        return {o["kind"]: o["metadata"]["resourceVersion"] for o in (tj, jobset, podgroup)}

    for suspended in (True, False):
        if not suspended:
            await _edit_trainjob(client, ns, suspend=False)
        before = await eventually(lambda s=suspended: settled(s), timeout=30)
        # the controller's own reconciles of the last change are done: one read this TrainJob
        await trainer.reconciles.trainjob_read(ns, "alpha", before["TrainJob"])
        before = await settled(suspended)
        for _ in range(3):
            await trainer.controllers.trainjob.reconcile(Request(ns, "alpha"))
        assert await settled(suspended) == before


async def test_finished_trainjob_keeps_no_jobset_and_a_running_one_gets_it_back(trainer: Any) -> None:
    # Upstream v2.1.0 drops Failed each reconcile and re-applies a JobSet that was deleted
    # (by hand or its TTL), running a failed training again (#3737, #3779): fixed here.
    client, ns = trainer.client, trainer.namespace
    await client.create(l1_runtime(ns))
    tj = l1_trainjob(ns)
    tj["spec"]["suspend"] = False
    await client.create(tj)
    first = await eventually(lambda: _exists(client, JOBSET, "alpha", ns), timeout=30)
    await client.delete(first)  # running: the reconciler puts it back

    async def recreated() -> Json:
        again = await _exists(client, JOBSET, "alpha", ns)
        assert again["metadata"]["uid"] != first["metadata"]["uid"]
        return again

    await eventually(recreated, timeout=30)
    failed = {
        "type": "Failed",
        "reason": "FailedJobs",
        "message": "jobset failed due to one or more job failures",
    }
    await _set_jobset_status(client, ns, failed, _jobs_status(node={"failed": 1}))

    async def is_failed() -> None:
        assert ("Failed", "True", "FailedJobs", failed["message"]) in _conditions(
            await _get(client, TJ, "alpha", ns)
        )

    await eventually(is_failed, timeout=30)
    # the controller has read the failed JobSet from its cache: a later reconcile that finds no
    # JobSet there has seen the delete
    deleted = trainer.reconciles.mark()
    await client.delete(await _get(client, JOBSET, "alpha", ns))
    await trainer.reconciles.processed(
        "trainjob",
        Request(ns, "alpha"),
        lambda o: o["trainjob"] is not None and o["jobset"] is None,
        since=deleted,
        what="the JobSet's delete",
    )
    with pytest.raises(NotFound):
        await _get(client, JOBSET, "alpha", ns)
    await is_failed()
