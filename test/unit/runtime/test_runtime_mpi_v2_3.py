"""The MPI plugin at level v2.3 (Trainer v2.3.0 ``EnforceMLPolicy``; docs/behaviour/trainer.md
§12.6): the SSH key Secret volume of the launcher's and the nodes' pods carries file modes --
``defaultMode`` 0400, ``id_rsa`` 0640, ``id_rsa.pub`` and ``authorized_keys`` 0644 -- where
v2.1.0's sets none (the kubelet's 0644 for every file)."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_fixtures import FakeReader, RecordingIndexer, sort_objects
from test_runtime_shipped import shipped_runtime, stored_trainjob

from trainer.runtime.levels import RuntimeLevel
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.levels.v2_3 import V2_3
from trainer.runtime.registry import CLUSTER_TRAINING_RUNTIME_KEY, new_runtimes

Json = dict[str, Any]

ITEMS_V2_1 = [
    {"key": "ssh-privatekey", "path": "id_rsa"},
    {"key": "ssh-publickey", "path": "id_rsa.pub"},
    {"key": "ssh-publickey", "path": "authorized_keys"},
]


async def ssh_volumes(level: RuntimeLevel) -> dict[str, Json]:
    """The ``mpi-ssh-auth`` volume of each replicated job's pods for a TrainJob on the shipped
    ``deepspeed-distributed`` runtime (launcher + node, OpenMPI)."""
    runtime = shipped_runtime("deepspeed-distributed")
    tj = stored_trainjob("ds", "deepspeed-distributed", trainer={"numNodes": 3})
    runtimes = await new_runtimes(FakeReader([runtime]), RecordingIndexer(), level=level)
    objects = sort_objects(await runtimes[CLUSTER_TRAINING_RUNTIME_KEY].new_objects(tj))
    (jobset,) = [o for o in objects if o["kind"] == "JobSet"]
    out = {}
    for rjob in jobset["spec"]["replicatedJobs"]:
        volumes = rjob["template"]["spec"]["template"]["spec"]["volumes"]
        (volume,) = [v for v in volumes if v["name"] == "mpi-ssh-auth"]
        out[rjob["name"]] = volume
    return out


async def test_at_v2_3_the_ssh_key_files_get_v2_3_0s_modes() -> None:
    volumes = await ssh_volumes(V2_3)
    assert sorted(volumes) == ["launcher", "node"]
    for volume in volumes.values():
        assert volume == {
            "name": "mpi-ssh-auth",
            "secret": {
                "secretName": "ds-mpi-ssh-auth",
                "defaultMode": 256,
                "items": [
                    {"key": "ssh-privatekey", "path": "id_rsa", "mode": 416},
                    {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 420},
                    {"key": "ssh-publickey", "path": "authorized_keys", "mode": 420},
                ],
            },
        }
    assert (0o400, 0o640, 0o644) == (256, 416, 420)


async def test_at_v2_1_the_ssh_key_files_have_no_modes() -> None:
    volumes = await ssh_volumes(V2_1)
    assert sorted(volumes) == ["launcher", "node"]
    for volume in volumes.values():
        assert volume == {
            "name": "mpi-ssh-auth",
            "secret": {"secretName": "ds-mpi-ssh-auth", "items": ITEMS_V2_1},
        }


@pytest.mark.parametrize("level", [V2_1, V2_3], ids=["v2.1", "v2.3"])
async def test_the_secret_the_volume_mounts_is_the_same_at_both_levels(level: RuntimeLevel) -> None:
    runtime = shipped_runtime("deepspeed-distributed")
    tj = stored_trainjob("ds", "deepspeed-distributed", trainer={"numNodes": 2})
    runtimes = await new_runtimes(FakeReader([runtime]), RecordingIndexer(), level=level)
    objects = await runtimes[CLUSTER_TRAINING_RUNTIME_KEY].new_objects(tj)
    (secret,) = [o for o in objects if o["kind"] == "Secret"]
    assert secret["metadata"]["name"] == "ds-mpi-ssh-auth"
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert sorted(secret["data"]) == ["ssh-privatekey", "ssh-publickey"]
