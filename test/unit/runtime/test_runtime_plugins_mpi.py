"""MPI plugin (docs/behaviour/trainer.md §10 F38-F55): node counts, slots, SSH/hostfile volumes, Secret, ConfigMap, validation."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from runtime_fixtures import FakeReader, owner_ref, redact_ssh_secret, sort_objects, tj_model

from manager.client.errors import InternalError
from manager.meta.field import FieldError
from trainer.api.trainer_v1alpha1 import MLPolicy
from trainer.runtime.errors import RuntimeFailure
from trainer.runtime.info import ContainerInfo, Info, PodSet, RuntimePolicy, TemplateSpec
from trainer.runtime.plugins.base import PluginContext
from trainer.runtime.plugins.mpi import MPI
from trainer.runtime.readers import CacheReader

Json = dict[str, Any]

SSH_VOLUME = {
    "name": "mpi-ssh-auth",
    "secret": {
        "secretName": "trainJob-mpi-ssh-auth",
        "items": [
            {"key": "ssh-privatekey", "path": "id_rsa"},
            {"key": "ssh-publickey", "path": "id_rsa.pub"},
            {"key": "ssh-publickey", "path": "authorized_keys"},
        ],
    },
}
HOSTFILE_VOLUME = {
    "name": "mpi-hostfile",
    "configMap": {
        "name": "trainJob-mpi-hostfile",
        "items": [{"key": "hostfile", "path": "hostfile", "mode": 292}],
    },
}


def mpi_policy(run_launcher_as_node: bool | None = None, num_proc: int = 1) -> Json:
    mpi: Json = {"numProcPerNode": num_proc, "mpiImplementation": "OpenMPI", "sshAuthMountPath": "/root/.ssh"}
    if run_launcher_as_node is not None:
        mpi["runLauncherAsNode"] = run_launcher_as_node
    return {"mpi": mpi}


def mpi_info(policy: Json | None, pod_sets: list[PodSet]) -> Info:
    ml = MLPolicy.from_dict(policy) if policy is not None else None
    return Info(runtime_policy=RuntimePolicy(ml_policy=ml), template_spec=TemplateSpec(pod_sets=pod_sets))


def launcher(containers: bool = False) -> PodSet:
    return PodSet(
        name="launcher",
        count=1,
        endpoints=["trainJob-launcher-0-0.trainJob"],
        containers=[ContainerInfo(name="node")] if containers else [],
    )


def node(endpoints: int = 2, containers: bool = False) -> PodSet:
    return PodSet(
        name="node",
        ancestor="trainer",
        count=1,
        endpoints=[f"trainJob-node-1-{k}.trainJob" for k in range(endpoints)],
        containers=[ContainerInfo(name="node")] if containers else [],
    )


def mpi_trainjob(**trainer: Any) -> Any:
    return tj_model(name="trainJob", uid="trainJob", trainer=trainer)


def secret() -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "trainJob-mpi-ssh-auth",
            "namespace": "default",
            "ownerReferences": [owner_ref("trainJob", "trainJob")],
        },
        "type": "kubernetes.io/ssh-auth",
        "immutable": True,
        "data": {"ssh-privatekey": "<private key>", "ssh-publickey": "<public key>"},
    }


def hostfile(text: str) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "trainJob-mpi-hostfile",
            "namespace": "default",
            "ownerReferences": [owner_ref("trainJob", "trainJob")],
        },
        "data": {"hostfile": text},
    }


async def enforce_and_build(info: Info | None, tj: Any, reader: FakeReader | None = None) -> list[Json]:
    plugin = MPI(PluginContext(reader or FakeReader()))
    plugin.enforce_ml_policy(info, tj)
    return redact_ssh_secret(sort_objects(await plugin.build(info, tj)))


async def test_f38_nil_info() -> None:
    # spec: trainer F38
    assert await enforce_and_build(None, mpi_trainjob(numNodes=2)) == []


@pytest.mark.parametrize(
    "policy",
    [
        None,  # spec: trainer F39
        {},  # spec: trainer F40
    ],
)
async def test_f39_f40_without_mpi_policy(policy: Json | None) -> None:
    info = mpi_info(policy, [launcher(), node()])
    before = copy.deepcopy(info)
    assert await enforce_and_build(info, mpi_trainjob(numNodes=2)) == []
    assert info == before


async def test_f41_node_count_volumes_secret_and_hostfile() -> None:
    # spec: trainer F41
    info = mpi_info(mpi_policy(), [launcher(), node()])
    objects = await enforce_and_build(info, mpi_trainjob(numNodes=2))
    launcher_set, node_set = info.template_spec.pod_sets
    assert node_set.count == 2
    assert launcher_set.volumes == [SSH_VOLUME, HOSTFILE_VOLUME]
    assert node_set.volumes == [SSH_VOLUME]
    assert objects == [
        hostfile("trainJob-node-1-0.trainJob slots=1\ntrainJob-node-1-1.trainJob slots=1\n"),
        secret(),
    ]


async def test_f42_trainjob_num_proc_per_node_sets_slots() -> None:
    # spec: trainer F42
    info = mpi_info(mpi_policy(), [launcher(), node(endpoints=1)])
    objects = await enforce_and_build(info, mpi_trainjob(numNodes=1, numProcPerNode=2))
    assert info.runtime_policy.ml_policy is not None and info.runtime_policy.ml_policy.mpi is not None
    assert info.runtime_policy.ml_policy.mpi.num_proc_per_node == 2
    assert objects == [hostfile("trainJob-node-1-0.trainJob slots=2\n"), secret()]


async def test_f43_gpu_count_sets_slots() -> None:
    # spec: trainer F43
    info = mpi_info(mpi_policy(), [launcher(), node(endpoints=1)])
    objects = await enforce_and_build(
        info, mpi_trainjob(numNodes=1, resourcesPerNode={"limits": {"custom.com/gpu": "5"}})
    )
    assert info.runtime_policy.ml_policy is not None and info.runtime_policy.ml_policy.mpi is not None
    assert info.runtime_policy.ml_policy.mpi.num_proc_per_node == 5
    assert objects == [hostfile("trainJob-node-1-0.trainJob slots=5\n"), secret()]


async def test_f44_launcher_as_node() -> None:
    # spec: trainer F44
    info = mpi_info(
        mpi_policy(run_launcher_as_node=True), [launcher(containers=True), node(endpoints=1, containers=True)]
    )
    objects = await enforce_and_build(info, mpi_trainjob(numNodes=10))
    launcher_set, node_set = info.template_spec.pod_sets
    assert node_set.count == 9
    assert launcher_set.containers == [
        ContainerInfo(
            name="node",
            env=[
                {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
                {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
                {"name": "OMPI_MCA_orte_set_default_slots", "value": "1"},
                {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
            ],
            volume_mounts=[
                {"name": "mpi-ssh-auth", "mountPath": "/root/.ssh"},
                {"name": "mpi-hostfile", "mountPath": "/etc/mpi"},
            ],
        )
    ]
    assert node_set.containers == [
        ContainerInfo(name="node", volume_mounts=[{"name": "mpi-ssh-auth", "mountPath": "/root/.ssh"}])
    ]
    assert objects == [
        hostfile("trainJob-launcher-0-0.trainJob slots=1\ntrainJob-node-1-0.trainJob slots=1\n"),
        secret(),
    ]


async def test_f45_existing_secret_is_not_regenerated() -> None:
    # spec: trainer F45
    existing = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "trainJob-mpi-ssh-auth", "namespace": "default"},
    }
    info = mpi_info(mpi_policy(run_launcher_as_node=True), [launcher()])
    objects = await enforce_and_build(info, mpi_trainjob(), FakeReader([existing]))
    assert objects == [hostfile("trainJob-launcher-0-0.trainJob slots=1\n")]


async def test_a_secret_the_cache_has_not_seen_yet_is_not_built_again() -> None:
    # docs/divergences.md T-20: the miss is confirmed live before new keys are built
    existing = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "trainJob-mpi-ssh-auth", "namespace": "default"},
    }
    confirmed = CacheReader(FakeReader(), FakeReader([existing]), confirm_misses=True)
    plugin = MPI(PluginContext(FakeReader(), confirmed_reader=confirmed))
    info = mpi_info(mpi_policy(run_launcher_as_node=True), [launcher()])
    plugin.enforce_ml_policy(info, mpi_trainjob())
    assert await plugin.build(info, mpi_trainjob()) == [hostfile("trainJob-launcher-0-0.trainJob slots=1\n")]


async def test_f46_secret_read_error_is_returned() -> None:
    # spec: trainer F46
    info = mpi_info(mpi_policy(), [launcher(), node()])
    with pytest.raises(InternalError, match="etcd is down"):
        await enforce_and_build(
            info, mpi_trainjob(numNodes=2), FakeReader(errors={"Secret": InternalError("etcd is down")})
        )
    assert info.template_spec.pod_sets[0].volumes == [SSH_VOLUME, HOSTFILE_VOLUME]


async def test_unsupported_mpi_implementation_is_an_error_not_a_crash() -> None:
    policy = mpi_policy()
    policy["mpi"]["mpiImplementation"] = ""
    info = mpi_info(policy, [launcher(containers=True), node()])
    with pytest.raises(RuntimeFailure, match='MPI implementation for "" doesn\'t supported'):
        MPI(PluginContext(FakeReader())).enforce_ml_policy(info, mpi_trainjob())


# -- Validate ---------------------------------------------------------------------------------


async def mpi_validate(info: Info | None, **trainer: Any) -> list[FieldError]:
    warnings, errors = await MPI(PluginContext(FakeReader())).validate(info, None, mpi_trainjob(**trainer))
    assert warnings == []
    return errors


async def test_f47_validate_nil_info() -> None:
    # spec: trainer F47
    assert await mpi_validate(None, numProcPerNode="invalid") == []


@pytest.mark.parametrize(
    "policy",
    [
        None,  # spec: trainer F48
        {},  # spec: trainer F49
    ],
)
async def test_f48_f49_validate_without_mpi(policy: Json | None) -> None:
    assert await mpi_validate(mpi_info(policy, []), numProcPerNode="invalid") == []


async def test_f50_num_proc_must_be_int() -> None:
    # spec: trainer F50
    errors = await mpi_validate(mpi_info(mpi_policy(), []), numProcPerNode="invalid")
    assert errors == [
        FieldError.invalid(
            "spec.trainer.numProcPerNode", "invalid", "must have an int value for MPI TrainJob"
        )
    ]


async def test_f51_int_num_proc_is_valid() -> None:
    # spec: trainer F51
    assert await mpi_validate(mpi_info(mpi_policy(), []), numProcPerNode=8) == []


async def test_f52_single_node_without_launcher_is_valid() -> None:
    # spec: trainer F52
    assert await mpi_validate(mpi_info(mpi_policy(run_launcher_as_node=True), [node()]), numNodes=1) == []


LAUNCHER_AS_NODE_ERROR = FieldError.invalid(
    "spec.trainer.numNodes",
    2,
    "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have either launcher and node",
)


@pytest.mark.parametrize(
    "pod_sets",
    [
        [node()],  # spec: trainer F53
        [launcher()],  # spec: trainer F54
        [],  # spec: trainer F55
    ],
)
async def test_f53_to_f55_launcher_as_node_needs_both_jobs(pod_sets: list[PodSet]) -> None:
    info = mpi_info(mpi_policy(run_launcher_as_node=True), pod_sets)
    assert await mpi_validate(info, numNodes=2) == [LAUNCHER_AS_NODE_ERROR]
