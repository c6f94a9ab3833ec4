"""Level v2.3's runtime features against a kube-apiserver with the v2.3 CRDs
(docs/behaviour/trainer.md §12.14), with ``python -m trainer --api-level=v2.3`` running: torch
``envInjection`` puts the ``PET_*`` env into the target containers of the stored JobSet (a
runtime naming a container it lacks fails the reconcile with upstream's words), a TrainJob's
``resourcesPerNode`` is merged into the runtime's per resource name (the PodGroup counts the
merged requests), and an MPI hostfile names the pods of every replica while the JobSet's
parallelism follows the PodSets by job name.

The control plane and the manager are those of ``test_trainer_level_v2_3_runtimes_live.py``'s
fixtures (this module starts its own instance of them).
"""

from __future__ import annotations

from typing import Any

import test_trainer_level_v2_3_runtimes_live as base
from trainer_process import RunningManager

from manager.client import Client, NotFound
from manager.envtest import Environment
from manager.meta.gvk import CONFIGMAP
from manager.testing import eventually
from trainer.runtime.objects import JOBSET_GVK, PODGROUP_GVK

Json = dict[str, Any]

env_v2_3 = base.env_v2_3
api = base.api
namespace = base.namespace
manager = base.manager

ANCESTOR = {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
INDEX = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}


def rjob(name: str, containers: list[Json], *, trainer: bool = True, **extra: Any) -> Json:
    job_spec: Json = {"template": {"spec": {"containers": containers, **extra.pop("pod", {})}}}
    job_spec.update(extra.pop("job", {}))
    template: Json = {"spec": job_spec}
    if trainer:
        template["metadata"] = {"labels": dict(ANCESTOR)}
    return {"name": name, "template": template, **extra}


def runtime(namespace: str, name: str, ml_policy: Json, rjobs: list[Json], **spec: Any) -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"mlPolicy": ml_policy, **spec, "template": {"spec": {"replicatedJobs": rjobs}}},
    }


def train_job(namespace: str, name: str, runtime: str, **trainer: Any) -> Json:
    spec: Json = {"runtimeRef": {"name": runtime, "kind": "TrainingRuntime"}}
    if trainer:
        spec["trainer"] = trainer
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


async def stored_jobset(api: Client, name: str, namespace: str) -> Json:
    jobset: Json = await eventually(
        lambda: api.get(JOBSET_GVK, name, namespace), retry_on=(NotFound,), message=f"no JobSet {name}"
    )
    return jobset


def pod_spec(jobset: Json, job: str) -> Json:
    (found,) = [r for r in jobset["spec"]["replicatedJobs"] if r["name"] == job]
    return found["template"]["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def env(container: Json) -> list[Json]:
    return list(container.get("env") or [])


async def test_env_injection_targets_get_the_pet_env_and_a_missing_target_fails_the_reconcile(
    api: Client, env_v2_3: Environment, namespace: str, manager: RunningManager
) -> None:
    targets = [
        {"jobName": "node", "containerNames": ["preflight", "monitor"]},
        {"jobName": "aux", "containerNames": ["helper"]},
    ]
    await api.create(
        runtime(
            namespace,
            "inject",
            {"numNodes": 1, "torch": {"envInjection": {"targets": targets}}},
            [
                rjob(
                    "node",
                    [{"name": "node", "image": "busybox"}, {"name": "monitor", "image": "busybox"}],
                    pod={
                        "initContainers": [
                            {
                                "name": "preflight",
                                "image": "busybox",
                                "env": [{"name": "PET_NNODES", "value": "x"}],
                            }
                        ]
                    },
                ),
                rjob("aux", [{"name": "helper", "image": "busybox"}], trainer=False),
            ],
        )
    )
    await api.create(train_job(namespace, "inject", "inject", numNodes=2, numProcPerNode=4))

    jobset = await stored_jobset(api, "inject", namespace)
    pet = [
        {"name": "PET_NNODES", "value": "2"},
        {"name": "PET_NPROC_PER_NODE", "value": "4"},
        {"name": "PET_NODE_RANK", "valueFrom": INDEX},
        {"name": "PET_MASTER_ADDR", "value": "inject-node-0-0.inject"},
        {"name": "PET_MASTER_PORT", "value": "29500"},
    ]
    node = pod_spec(jobset, "node")
    assert env(node["initContainers"][0]) == pet
    assert env(node["containers"][1]) == pet
    assert env(node["containers"][0]) == pet
    assert env(pod_spec(jobset, "aux")["containers"][0]) == pet
    assert "ports" not in node["containers"][1]

    # no webhook here: a runtime naming a container it lacks reaches the reconcile, which fails
    await api.create(
        runtime(
            namespace,
            "missing",
            {
                "numNodes": 1,
                "torch": {"envInjection": {"targets": [{"jobName": "node", "containerNames": ["gone"]}]}},
            },
            [rjob("node", [{"name": "node", "image": "busybox"}])],
        )
    )
    await api.create(train_job(namespace, "missing", "missing", numNodes=1))

    expected_note = (
        "TrainJob resources reconciliation failed: "
        'envInjection target podSet "node" container "gone" not found in runtime template'
    )

    async def reported() -> Json:
        code, answer = await env_v2_3.request("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
        assert code == 200, answer
        # A first pass may run before the manager's cache holds the runtime created just before
        # the TrainJob and report it not found (as Go's would); the next pass reports the target.
        events = [
            e
            for e in answer["items"]
            if e["regarding"].get("name") == "missing" and e.get("note") == expected_note
        ]
        assert events, f"no event for the missing target yet: {[e.get('note') for e in answer['items']]}"
        return dict(events[0])

    event = await eventually(reported, message="the failed reconcile was not reported")
    assert (event["type"], event["reason"]) == ("Warning", "TrainJobResourcesCreationFailed")
    assert event["note"] == expected_note
    try:
        await api.get(JOBSET_GVK, "missing", namespace)
    except NotFound:
        pass
    else:
        raise AssertionError("a JobSet was applied for a TrainJob that cannot be built")


async def test_resources_per_node_is_merged_per_name_and_counted_by_the_pod_group(
    api: Client, namespace: str, manager: RunningManager
) -> None:
    node = {
        "name": "node",
        "image": "busybox",
        "resources": {"limits": {"cpu": "8", "memory": "32Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}},
    }
    await api.create(
        runtime(
            namespace,
            "res",
            {"numNodes": 1, "torch": {}},
            [rjob("node", [node])],
            podGroupPolicy={"coscheduling": {"scheduleTimeoutSeconds": 60}},
        )
    )
    await api.create(
        train_job(
            namespace,
            "res",
            "res",
            numNodes=2,
            resourcesPerNode={
                "limits": {"cpu": "6", "example.com/gpu": "2"},
                "requests": {"memory": "2Gi", "example.com/gpu": "2"},
            },
        )
    )
    jobset = await stored_jobset(api, "res", namespace)
    assert pod_spec(jobset, "node")["containers"][0]["resources"] == {
        "limits": {"cpu": "6", "example.com/gpu": "2", "memory": "32Gi"},
        "requests": {"cpu": "1", "example.com/gpu": "2", "memory": "2Gi"},
    }
    group = await eventually(
        lambda: api.get(PODGROUP_GVK, "res", namespace), retry_on=(NotFound,), message="no PodGroup"
    )
    assert group["spec"]["minMember"] == 2
    assert group["spec"]["minResources"] == {"cpu": "2", "example.com/gpu": "4", "memory": "4Gi"}


async def test_the_hostfile_names_every_replica_and_parallelism_follows_the_job_names(
    api: Client, namespace: str, manager: RunningManager
) -> None:
    await api.create(
        runtime(
            namespace,
            "mpi",
            {
                "numNodes": 1,
                "mpi": {
                    "mpiImplementation": "OpenMPI",
                    "numProcPerNode": 2,
                    "sshAuthMountPath": "/root/.ssh",
                },
            },
            [
                rjob("launcher", [{"name": "node", "image": "busybox"}], trainer=False),
                rjob("node", [{"name": "node", "image": "busybox"}], replicas=2),
                rjob(
                    "aux",
                    [{"name": "helper", "image": "busybox"}],
                    trainer=False,
                    replicas=2,
                    job={"parallelism": 3},
                ),
            ],
        )
    )
    await api.create(train_job(namespace, "mpi", "mpi", numNodes=2))

    hostfile = await eventually(
        lambda: api.get(CONFIGMAP, "mpi-mpi-hostfile", namespace), retry_on=(NotFound,), message="no hostfile"
    )
    assert hostfile["data"]["hostfile"] == "".join(
        f"mpi-node-{r}-{k}.mpi slots=2\n" for r in range(2) for k in range(2)
    )
    jobset = await stored_jobset(api, "mpi", namespace)
    jobs = {r["name"]: r for r in jobset["spec"]["replicatedJobs"]}
    assert jobs["node"]["replicas"] == 1
    assert (
        jobs["node"]["template"]["spec"]["parallelism"],
        jobs["node"]["template"]["spec"]["completions"],
    ) == (
        2,
        2,
    )
    assert jobs["aux"]["replicas"] == 2
    assert (
        jobs["aux"]["template"]["spec"]["parallelism"],
        jobs["aux"]["template"]["spec"]["completions"],
    ) == (
        3,
        3,
    )
