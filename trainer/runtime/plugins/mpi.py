"""MPI plugin (docs/behaviour/trainer.md §2.9): SSH keys, hostfile, OpenMPI environment, node counts.

Why: ``mpirun`` on the launcher reaches every node over SSH with a shared key (a Secret the
plugin generates once) and reads the hosts and slots from a hostfile (a ConfigMap rebuilt
every reconcile from the PodSet endpoints).
"""

from __future__ import annotations

import base64

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from manager.client.errors import NotFound
from manager.meta.field import FieldError
from manager.meta.object import Json
from trainer.api import trainer_constants as tc
from trainer.api.trainer_v1alpha1 import MPIMLPolicySource, TrainJob
from trainer.runtime.apply import upsert_env_vars, upsert_volume_mounts, upsert_volumes
from trainer.runtime.errors import RuntimeFailure
from trainer.runtime.info import Info
from trainer.runtime.levels import MPISSHAuthModes
from trainer.runtime.objects import (
    CONFIGMAP_GVK,
    SECRET_GVK,
    name_of,
    namespace_of,
    owner_reference,
)
from trainer.runtime.plugins.base import PluginContext, Watch
from trainer.runtime.plugins.watches import by_controller_owner
from trainer.runtime.resources import gpu_count, trainer_resources_from_runtime

__all__ = ["MPI", "hostfile", "ssh_auth_secret_data"]

SSH_AUTH_VOLUME = "mpi-ssh-auth"
SSH_AUTH_SECRET_SUFFIX = "-mpi-ssh-auth"
SSH_PRIVATE_KEY = "ssh-privatekey"
SSH_PUBLIC_KEY = "ssh-publickey"
SSH_AUTH_SECRET_TYPE = "kubernetes.io/ssh-auth"
HOSTFILE_VOLUME = "mpi-hostfile"
HOSTFILE_CONFIGMAP_SUFFIX = "-mpi-hostfile"
HOSTFILE_KEY = "hostfile"
HOSTFILE_DIR = "/etc/mpi"
HOSTFILE_MODE = 0o444


def _ssh_volume(trainjob_name: str, modes: MPISSHAuthModes | None) -> Json:
    """The SSH key Secret volume; the level's file modes when it sets them (v2.3)."""
    items: list[Json] = [
        {"key": SSH_PRIVATE_KEY, "path": "id_rsa"},
        {"key": SSH_PUBLIC_KEY, "path": "id_rsa.pub"},
        {"key": SSH_PUBLIC_KEY, "path": "authorized_keys"},
    ]
    secret: Json = {"secretName": f"{trainjob_name}{SSH_AUTH_SECRET_SUFFIX}", "items": items}
    if modes is not None:
        secret["defaultMode"] = modes.default
        items[0]["mode"] = modes.private_key
        items[1]["mode"] = modes.public_key
        items[2]["mode"] = modes.public_key
    return {"name": SSH_AUTH_VOLUME, "secret": secret}


def _hostfile_volume(trainjob_name: str) -> Json:
    return {
        "name": HOSTFILE_VOLUME,
        "configMap": {
            "name": f"{trainjob_name}{HOSTFILE_CONFIGMAP_SUFFIX}",
            "items": [{"key": HOSTFILE_KEY, "path": HOSTFILE_KEY, "mode": HOSTFILE_MODE}],
        },
    }


def _openmpi_env(slots: int) -> list[Json]:
    return [
        {"name": "OMPI_MCA_orte_default_hostfile", "value": f"{HOSTFILE_DIR}/{HOSTFILE_KEY}"},
        {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
        {"name": "OMPI_MCA_orte_set_default_slots", "value": str(slots)},
        {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
    ]


def _slots_from_trainjob(value: int | str) -> int:
    """Upstream's ``IntValue``: an int as is, a numeric string parsed, anything else 0."""
    if isinstance(value, int):
        return value
    try:
        return int(value)
    except ValueError:
        return 0


def ssh_auth_secret_data() -> dict[str, str]:
    """A fresh ECDSA P-521 key pair: SEC1 PEM private key and an authorized_keys line, base64."""
    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return {
        SSH_PRIVATE_KEY: base64.b64encode(private).decode(),
        SSH_PUBLIC_KEY: base64.b64encode(public + b"\n").decode(),
    }


def hostfile(info: Info, mpi: MPIMLPolicySource) -> str:
    """One ``<endpoint> slots=<n>`` line per node pod (and the launcher when it runs as a node)."""
    lines: list[str] = []
    slots = mpi.num_proc_per_node
    for pod_set in info.template_spec.pod_sets:
        if pod_set.name == tc.Node or (pod_set.name == tc.Launcher and mpi.run_launcher_as_node):
            lines.extend(f"{endpoint} slots={slots}\n" for endpoint in pod_set.endpoints or ())
    return "".join(lines)


class MPI:
    name = "MPI"

    def __init__(self, context: PluginContext) -> None:
        # the Secret is immutable: a cache miss is confirmed live before new keys are built (a
        # pass woken before the Secret's own event would otherwise apply other keys, refused; T-20)
        self._secret_reader = context.confirmed_reader or context.reader
        self._level = context.level

    @staticmethod
    def _mpi(info: Info | None) -> MPIMLPolicySource | None:
        if info is None or info.runtime_policy.ml_policy is None:
            return None
        return info.runtime_policy.ml_policy.mpi

    async def validate(
        self, info: Info | None, old: TrainJob | None, new: TrainJob
    ) -> tuple[list[str], list[FieldError]]:
        """The level's rules (v2.1: numProcPerNode an int; v2.3: reserved OpenMPI env names) around
        the shared one: a launcher-as-node runtime needs both jobs for more than one node."""
        mpi = self._mpi(info)
        trainer = new.spec.trainer if new.spec is not None else None
        if info is None or mpi is None or trainer is None:
            return [], []
        before, after = self._level.validate_mpi(trainer)
        errors = list(before)
        num_nodes = 1 if trainer.num_nodes is None else trainer.num_nodes
        if (
            num_nodes >= 2
            and mpi.run_launcher_as_node
            and (info.find_pod_set_by_name(tc.Launcher) is None or info.find_pod_set_by_name(tc.Node) is None)
        ):
            errors.append(
                FieldError.invalid(
                    "spec.trainer.numNodes",
                    trainer.num_nodes,
                    "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have either "
                    "launcher and node",
                )
            )
        return [], errors + after

    def enforce_ml_policy(self, info: Info | None, trainjob: TrainJob | None) -> None:
        """Node count, slots, SSH and hostfile volumes/mounts, OpenMPI env on the launcher."""
        mpi = self._mpi(info)
        if info is None or mpi is None or trainjob is None or trainjob.spec is None:
            return
        trainer = trainjob.spec.trainer
        node = info.find_pod_set_by_name(tc.Node)
        if trainer is not None and trainer.num_nodes is not None and node is not None:
            node.count = max(trainer.num_nodes - 1, 1) if mpi.run_launcher_as_node else trainer.num_nodes
        self._resolve_slots(info, trainjob, mpi)
        tj_name = name_of(trainjob)
        for pod_set in info.template_spec.pod_sets:
            if pod_set.name not in (tc.Node, tc.Launcher):
                continue
            upsert_volumes(pod_set.volumes, [_ssh_volume(tj_name, self._level.mpi_ssh_auth_modes)])
            is_launcher = pod_set.name == tc.Launcher
            if is_launcher:
                upsert_volumes(pod_set.volumes, [_hostfile_volume(tj_name)])
            for container in pod_set.containers:
                if container.name != tc.Node:
                    continue
                upsert_volume_mounts(
                    container.volume_mounts, [{"name": SSH_AUTH_VOLUME, "mountPath": mpi.ssh_auth_mount_path}]
                )
                if not is_launcher:
                    continue
                upsert_volume_mounts(
                    container.volume_mounts, [{"name": HOSTFILE_VOLUME, "mountPath": HOSTFILE_DIR}]
                )
                if mpi.mpi_implementation != tc.MPIImplementationOpenMPI:
                    # Upstream prints a pointer address here; we print the value.
                    raise RuntimeFailure(
                        f'MPI implementation for "{mpi.mpi_implementation}" doesn\'t supported'
                    )
                upsert_env_vars(container.env, _openmpi_env(mpi.num_proc_per_node))

    @staticmethod
    def _resolve_slots(info: Info, trainjob: TrainJob, mpi: MPIMLPolicySource) -> None:
        trainer = trainjob.spec.trainer if trainjob.spec else None
        if trainer is not None and trainer.num_proc_per_node is not None:
            mpi.num_proc_per_node = _slots_from_trainjob(trainer.num_proc_per_node)
            return
        if mpi.num_proc_per_node != 1:
            return
        resources = (
            trainer.resources_per_node
            if trainer is not None and trainer.resources_per_node is not None
            else trainer_resources_from_runtime(info.template_spec.obj_apply)
        )
        gpus = gpu_count(resources)
        if gpus > 1:
            mpi.num_proc_per_node = gpus

    async def build(self, info: Info | None, trainjob: TrainJob | None) -> list[Json]:
        """The SSH Secret (only when absent; never rotated) and the hostfile ConfigMap (always)."""
        mpi = self._mpi(info)
        if info is None or mpi is None or trainjob is None:
            return []
        objects: list[Json] = []
        tj_name, namespace = name_of(trainjob), namespace_of(trainjob)
        secret_name = f"{tj_name}{SSH_AUTH_SECRET_SUFFIX}"
        try:
            await self._secret_reader.get(SECRET_GVK, secret_name, namespace)
        except NotFound:
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {
                        "name": secret_name,
                        "namespace": namespace,
                        "ownerReferences": [owner_reference(trainjob)],
                    },
                    "type": SSH_AUTH_SECRET_TYPE,
                    "immutable": True,
                    "data": ssh_auth_secret_data(),
                }
            )
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": f"{tj_name}{HOSTFILE_CONFIGMAP_SUFFIX}",
                    "namespace": namespace,
                    "ownerReferences": [owner_reference(trainjob)],
                },
                "data": {HOSTFILE_KEY: hostfile(info, mpi)},
            }
        )
        return objects

    def watches(self) -> list[Watch]:
        """ConfigMaps and Secrets controlled by a TrainJob requeue it."""
        return [Watch(CONFIGMAP_GVK, by_controller_owner), Watch(SECRET_GVK, by_controller_owner)]
