"""trainer.kubeflow.org CRDs on a real kube-apiserver: defaults, CEL rules and messages (§10 A)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from crdtest import Resource, assert_invalid

from trainer.api import trainer_constants as c
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainingRuntime, TrainJob

V = "v1alpha1"


@pytest.fixture
def trainjobs(resources) -> Resource:  # type: ignore[no-untyped-def]
    return resources(c.GROUP, V, "trainjobs")


@pytest.fixture
def runtimes(resources) -> Resource:  # type: ignore[no-untyped-def]
    return resources(c.GROUP, V, "trainingruntimes")


@pytest.fixture
def cluster_runtimes(resources) -> Resource:  # type: ignore[no-untyped-def]
    return resources(c.GROUP, V, "clustertrainingruntimes", namespaced=False)


def train_job(name: str = "job", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"runtimeRef": {"name": "testing", "kind": c.ClusterTrainingRuntimeKind}}
    body.update(spec)
    return {
        "apiVersion": TrainJob.api_version,
        "kind": TrainJob.kind,
        "metadata": {"name": name},
        "spec": body,
    }


def _rjob(name: str, ancestor: str | None, mounts: list[str]) -> dict[str, Any]:
    labels = {c.LabelTrainJobAncestor: ancestor} if ancestor else None
    metadata: dict[str, Any] = {"labels": labels} if labels else {}
    container = {
        "name": name,
        "image": "docker.io/busybox:1.36",
        "volumeMounts": [{"name": "initializer", "mountPath": path} for path in mounts],
    }
    return {
        "name": name,
        "groupName": "default",
        "replicas": 1,
        "template": {
            "metadata": metadata,
            "spec": {
                "template": {
                    "spec": {
                        "containers": [container],
                        "volumes": [
                            {"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer"}}
                        ],
                    }
                }
            },
        },
    }


def jobset_template(ancestors: bool = True) -> dict[str, Any]:
    """The catalogue's TR/CTR wrapper: dataset-initializer, model-initializer, node."""
    return {
        "spec": {
            "replicatedJobs": [
                _rjob(
                    c.DatasetInitializer, c.DatasetInitializer if ancestors else None, ["/workspace/dataset"]
                ),
                _rjob(c.ModelInitializer, c.ModelInitializer if ancestors else None, ["/workspace/model"]),
                _rjob(
                    c.Node,
                    c.AncestorTrainer if ancestors else None,
                    ["/workspace/dataset", "/workspace/model"],
                ),
            ]
        }
    }


def runtime(
    kind: type[TrainingRuntime] | type[ClusterTrainingRuntime], name: str, **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"template": jobset_template(kind is TrainingRuntime)}
    body.update(spec)
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": {"name": name}, "spec": body}


@pytest.fixture
async def testing_runtimes(runtimes: Resource, cluster_runtimes: Resource, namespace: str):  # type: ignore[no-untyped-def]
    """CTR and TR named ``testing`` (the CTR is cluster-scoped: one name per test namespace)."""
    ctr_name = f"testing-{namespace}"
    status, body = await cluster_runtimes.create(runtime(ClusterTrainingRuntime, ctr_name))
    assert status == 201, body
    status, body = await runtimes.create(runtime(TrainingRuntime, "testing"))
    assert status == 201, body
    yield ctr_name
    await cluster_runtimes.delete(ctr_name)


# -- TrainJob ---------------------------------------------------------------------------------


async def test_managed_by_values(trainjobs: Resource, testing_runtimes: str) -> None:
    # spec: trainer A1
    status, body = await trainjobs.create(train_job("a1", managedBy=c.TrainJobControllerName))
    assert status == 201, body
    # spec: trainer A2
    status, body = await trainjobs.create(train_job("a2", managedBy=c.MultiKueueControllerName))
    assert status == 201, body
    # spec: trainer A3
    status, body = await trainjobs.create(train_job("a3", managedBy="invalid"))
    assert_invalid(
        status,
        body,
        "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set",
    )


async def test_two_overrides_for_the_same_job_are_accepted(trainjobs: Resource) -> None:
    # spec: trainer A4
    overrides = [
        {"targetJobs": [{"name": "node"}], "spec": {"serviceAccountName": "custom-sa"}},
        {"targetJobs": [{"name": "node"}], "spec": {"serviceAccountName": "custom-sa-two"}},
    ]
    status, body = await trainjobs.create(train_job("a4", podTemplateOverrides=overrides))
    assert status == 201, body
    assert [o["spec"]["serviceAccountName"] for o in body["spec"]["podTemplateOverrides"]] == [
        "custom-sa",
        "custom-sa-two",
    ]


async def test_defaults(trainjobs: Resource) -> None:
    # spec: trainer A5
    status, body = await trainjobs.create(train_job("a5", managedBy=c.MultiKueueControllerName))
    assert status == 201, body
    assert body["spec"]["suspend"] is False
    # spec: trainer A6
    status, body = await trainjobs.create(train_job("a6", suspend=True))
    assert status == 201, body
    assert body["spec"]["managedBy"] == c.TrainJobControllerName
    # spec: trainer A7
    job = train_job("a7")
    job["spec"]["runtimeRef"] = {"name": "testing", "kind": c.TrainingRuntimeKind}
    status, body = await trainjobs.create(job)
    assert status == 201, body
    assert body["spec"]["runtimeRef"] == {
        "name": "testing",
        "kind": c.TrainingRuntimeKind,
        "apiGroup": c.GROUP,
    }
    assert body["spec"]["managedBy"] == c.TrainJobControllerName
    assert body["spec"]["suspend"] is False
    # spec: trainer A8
    job = train_job("a8")
    job["spec"]["runtimeRef"] = {"name": "testing", "apiGroup": c.GROUP}
    status, body = await trainjobs.create(job)
    assert status == 201, body
    assert body["spec"]["runtimeRef"]["kind"] == c.ClusterTrainingRuntimeKind
    # The stored object loads into the model and dumps back unchanged.
    assert TrainJob.from_dict(body).to_dict() == body


async def test_image_pull_secret_name_defaults_to_empty(trainjobs: Resource) -> None:
    overrides = [{"targetJobs": [{"name": "node"}], "spec": {"imagePullSecrets": [{}]}}]
    status, body = await trainjobs.create(train_job("pull", podTemplateOverrides=overrides))
    assert status == 201, body
    assert body["spec"]["podTemplateOverrides"][0]["spec"]["imagePullSecrets"] == [{"name": ""}]


async def test_immutable_fields(trainjobs: Resource) -> None:
    status, created = await trainjobs.create(train_job("immutable", managedBy=c.TrainJobControllerName))
    assert status == 201, created
    # spec: trainer A9
    changed = copy.deepcopy(created)
    changed["spec"]["managedBy"] = c.MultiKueueControllerName
    status, body = await trainjobs.replace(changed)
    assert_invalid(status, body, "ManagedBy value is immutable")
    # spec: trainer A10
    changed = copy.deepcopy(created)
    changed["spec"]["runtimeRef"]["name"] = "other"
    status, body = await trainjobs.replace(changed)
    assert_invalid(status, body, "runtimeRef is immutable")
    # Other fields stay mutable.
    changed = copy.deepcopy(created)
    changed["spec"]["suspend"] = True
    status, body = await trainjobs.replace(changed)
    assert status == 200, body


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("valid-job-name", None),  # spec: trainer A11
        ("abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk", None),  # spec: trainer A12
        ("Invalid-job-name", "metadata.name must match RFC 1035 DNS label format"),  # spec: trainer A13
        ("1jobname", "metadata.name must match RFC 1035 DNS label format"),  # spec: trainer A14
        ("jobname-", "metadata.name must match RFC 1035 DNS label format"),  # spec: trainer A15
        (
            "this-name-is-way-too-long-for-a-rfc1035-label-and-should-fail-validation",
            "metadata.name must be no more than 63 characters",
        ),  # spec: trainer A16
    ],
)
async def test_name_rules(trainjobs: Resource, name: str, message: str | None) -> None:
    status, body = await trainjobs.create(train_job(name))
    if message is None:
        assert len(name) <= 63
        assert status == 201, body
    else:
        assert_invalid(status, body, message)


async def test_status_shape_is_enforced(trainjobs: Resource) -> None:
    status, created = await trainjobs.create(train_job("status"))
    assert status == 201, created
    created["status"] = {"jobsStatus": [{"name": "node", "ready": 1}]}
    status, body = await trainjobs.replace_status(created)
    assert status == 422, body
    assert "status.jobsStatus[0].active: Required value" in body["message"]
    created["status"] = {
        "conditions": [
            {
                "type": "Suspended",
                "status": "True",
                "reason": "Suspended",
                "message": "TrainJob is suspended",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
            }
        ]
    }
    status, body = await trainjobs.replace_status(created)
    assert status == 200, body
    assert TrainJob.from_dict(body).status.conditions[0].reason == "Suspended"  # type: ignore[union-attr]


# -- runtimes ---------------------------------------------------------------------------------


async def test_runtime_wrappers_are_accepted(
    runtimes: Resource, cluster_runtimes: Resource, namespace: str
) -> None:
    # spec: trainer A17
    sent = runtime(TrainingRuntime, "wrapper")
    status, body = await runtimes.create(sent)
    assert status == 201, body
    assert body["spec"] == sent["spec"]
    assert TrainingRuntime.from_dict(body).to_dict() == body
    name = f"wrapper-{namespace}"
    status, body = await cluster_runtimes.create(runtime(ClusterTrainingRuntime, name))
    try:
        assert status == 201, body
        assert ClusterTrainingRuntime.from_dict(body).to_dict() == body
    finally:
        await cluster_runtimes.delete(name)


@pytest.mark.parametrize(
    ("ml_policy", "message"),
    [
        ({"torch": {}, "mpi": {}}, "Only one of the policy can be configured"),  # spec: trainer A18
        (
            {"numNodes": 2, "torch": {"elasticPolicy": {}}},
            "numNodes should not be set if torch.elasticPolicy is configured",
        ),  # spec: trainer A19
        ({"mpi": {"mpiImplementation": "invalid"}}, 'Unsupported value: "invalid"'),  # spec: trainer A20
        (
            {"torch": {"numProcPerNode": "tpu"}},
            "NumProcPerNode must be equal to auto, cpu, gpu, or int value",
        ),
        ({"torch": {"numProcPerNode": 0}}, "NumProcPerNode must be equal to auto, cpu, gpu, or int value"),
    ],
)
async def test_ml_policy_rules(runtimes: Resource, ml_policy: dict[str, Any], message: str) -> None:
    status, body = await runtimes.create(runtime(TrainingRuntime, "invalid", mlPolicy=ml_policy))
    assert_invalid(status, body, message)


async def test_torch_defaults(runtimes: Resource) -> None:
    # spec: trainer A21
    sent = runtime(TrainingRuntime, "torch", mlPolicy={"torch": {}})
    for rjob in sent["spec"]["template"]["spec"]["replicatedJobs"]:
        del rjob["replicas"]
    status, body = await runtimes.create(sent)
    assert status == 201, body
    assert body["spec"]["mlPolicy"]["torch"]["numProcPerNode"] == "auto"
    assert [r["replicas"] for r in body["spec"]["template"]["spec"]["replicatedJobs"]] == [1, 1, 1]


MPI = {
    "numProcPerNode": 1,
    "mpiImplementation": "OpenMPI",
    "sshAuthMountPath": "/usr/dir",
    "runLauncherAsNode": False,
}


@pytest.mark.parametrize(
    ("omit", "expected"),
    [
        (None, MPI),  # spec: trainer A22
        ("sshAuthMountPath", {**MPI, "sshAuthMountPath": "/root/.ssh"}),  # spec: trainer A23
        ("runLauncherAsNode", MPI),  # spec: trainer A24
        ("numProcPerNode", MPI),  # spec: trainer A25
    ],
)
async def test_mpi_defaults(runtimes: Resource, omit: str | None, expected: dict[str, Any]) -> None:
    mpi = {k: v for k, v in MPI.items() if k != omit}
    sent = runtime(TrainingRuntime, "mpi", mlPolicy={"mpi": mpi})
    status, body = await runtimes.create(sent)
    assert status == 201, body
    assert body["spec"]["mlPolicy"]["mpi"] == expected
    assert body["spec"]["template"] == sent["spec"]["template"]


async def test_pod_group_policy_defaults(runtimes: Resource) -> None:
    policy = {"coscheduling": {}, "volcano": {"networkTopology": {}}}
    status, body = await runtimes.create(runtime(TrainingRuntime, "pg", podGroupPolicy=policy))
    assert status == 201, body
    assert body["spec"]["podGroupPolicy"] == {
        "coscheduling": {"scheduleTimeoutSeconds": 60},
        "volcano": {"networkTopology": {"mode": "hard", "highestTierAllowed": 1}},
    }


async def test_runtime_needs_a_spec(runtimes: Resource) -> None:
    obj = runtime(TrainingRuntime, "empty")
    obj["spec"] = {}
    status, body = await runtimes.create(obj)
    assert_invalid(status, body, "should have at least 1 properties")


async def test_runtime_jobset_policies_are_immutable(runtimes: Resource) -> None:
    sent = runtime(TrainingRuntime, "policies")
    sent["spec"]["template"]["spec"]["failurePolicy"] = {"maxRestarts": 1}
    status, created = await runtimes.create(sent)
    assert status == 201, created
    assert created["spec"]["template"]["spec"]["failurePolicy"]["restartStrategy"] == "Recreate"
    created["spec"]["template"]["spec"]["failurePolicy"]["maxRestarts"] = 2
    status, body = await runtimes.replace(created)
    assert_invalid(status, body, "Value is immutable")


async def test_startup_policy_and_depends_on_are_exclusive_in_runtimes(runtimes: Resource) -> None:
    sent = runtime(TrainingRuntime, "order")
    spec = sent["spec"]["template"]["spec"]
    spec["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    spec["replicatedJobs"][2]["dependsOn"] = [{"name": c.ModelInitializer, "status": "Complete"}]
    status, body = await runtimes.create(sent)
    assert_invalid(status, body, "StartupPolicy and DependsOn APIs are mutually exclusive")


# -- embedded core schemas: defaults, pruning and server-side apply merging ----------------------


async def test_pod_template_gets_core_defaults_and_prunes_unknown_fields(runtimes: Resource) -> None:
    sent = runtime(TrainingRuntime, "core")
    node = sent["spec"]["template"]["spec"]["replicatedJobs"][2]
    container = node["template"]["spec"]["template"]["spec"]["containers"][0]
    container["ports"] = [{"containerPort": 29500}]
    container["notAPodField"] = "dropped"
    node["template"]["metadata"]["uid"] = "not kept in templates"
    status, body = await runtimes.create(sent)
    assert status == 201, body
    stored_node = body["spec"]["template"]["spec"]["replicatedJobs"][2]
    stored = stored_node["template"]["spec"]["template"]["spec"]["containers"][0]
    assert stored["ports"] == [{"containerPort": 29500, "protocol": "TCP"}]
    assert "notAPodField" not in stored
    assert "uid" not in stored_node["template"]["metadata"]


async def test_server_side_apply_merges_containers_by_name(runtimes: Resource) -> None:
    first = runtime(TrainingRuntime, "ssa")
    status, body = await runtimes.apply(first, "first")
    assert status in (200, 201), body
    second = runtime(TrainingRuntime, "ssa")
    pod = second["spec"]["template"]["spec"]["replicatedJobs"][2]["template"]["spec"]["template"]["spec"]
    pod["containers"] = [{"name": "sidecar", "image": "busybox"}]
    second["spec"]["template"]["spec"]["replicatedJobs"] = [
        second["spec"]["template"]["spec"]["replicatedJobs"][2]
    ]
    status, body = await runtimes.apply(second, "second")
    assert status == 200, body
    merged = body["spec"]["template"]["spec"]["replicatedJobs"]
    assert [r["name"] for r in merged] == [c.DatasetInitializer, c.ModelInitializer, c.Node]
    names = [x["name"] for x in merged[2]["template"]["spec"]["template"]["spec"]["containers"]]
    assert names == [c.Node, "sidecar"]
