"""An MPI TrainJob's SSH Secret and a cache that has not seen it yet (docs/divergences.md T-20),
on a real kube-apiserver: what the reduced conformance set's ``trainjob-deepspeed-mpi`` found
on the Go side in one CI run, made deterministic.

The MPI plugin builds the Secret ``<tj>-mpi-ssh-auth`` only when its read finds none, with new
keys, ``immutable: true``. A pass woken before the Secret informer has delivered the Secret the
previous pass created (by the hostfile ConfigMap's or the JobSet's event, on other watches)
reads no Secret; upstream builds new keys, and the API server refuses to change an immutable
Secret's data: a ``TrainJobResourcesCreationFailed`` Warning and a retry with back-off. Ours
confirms the plugin's miss with one live GET, so the pass builds no Secret and succeeds.

The TrainJob reconciler runs in this process with runtimes built as the manager builds them
(``SetupContext.runtimes``), over a "cache" that reads live but does not have the Secret yet.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import pytest
from cache_lag import LaggingReads, Passes
from trainer_wrappers import RES4, rjob, runtime, trainjob

from manager.client import Client
from manager.client.errors import ApiError
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.meta.gvk import SECRET
from trainer.controllers.trainjob import RECORDER_NAME, TrainJobReconciler
from trainer.runtime.context import SetupContext
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.plugins.mpi import ssh_auth_secret_data

Json = dict[str, Any]
IMMUTABLE = "field is immutable when `immutable` is set"


@dataclass
class ManagerView:
    """What ``SetupContext.runtimes`` reads of the manager."""

    cache: LaggingReads
    api_reader: Client
    client: LaggingReads


async def ssh_secret(live: Passes, name: str) -> Json:
    found: Json = await live.api.get(SECRET, f"{name}-mpi-ssh-auth", live.namespace)
    return found


@pytest.fixture
async def live(control_plane: Environment, namespace: str) -> AsyncIterator[Passes]:
    config = await load_kubeconfig(control_plane.kubeconfig)
    async with Cluster(config, field_owner="trainer", event_source="trainer-controller-manager") as cluster:
        api = Client(cluster.transport, cluster.mapper, field_owner="test")
        lag = LaggingReads(Client(cluster.transport, cluster.mapper, field_owner="trainer"), SECRET)
        runtimes = await SetupContext(cast(Any, ManagerView(lag, api, lag))).runtimes()
        recorder = V2_1.trainjob_event_recorder(cluster, RECORDER_NAME)
        yield Passes(api, namespace, lag, TrainJobReconciler(lag, runtimes, recorder), cluster)


def mpi_runtime(namespace: str) -> Json:
    launcher = {
        "name": "launcher",
        "template": {
            "spec": {
                "template": {
                    "spec": {"containers": [{"name": "node", "image": "test:mpi", "command": ["mpirun"]}]}
                }
            }
        },
    }
    node = rjob("node", container={"image": "test:trainjob", "resources": RES4})
    mpi = {"numProcPerNode": 1, "mpiImplementation": "OpenMPI", "sshAuthMountPath": "/root/.ssh"}
    return runtime("mpi", namespace, rjobs=[launcher, node], ml_policy={"numNodes": 1, "mpi": mpi})


async def test_a_pass_before_the_cache_has_the_ssh_secret_keeps_it_without_a_failure(live: Passes) -> None:
    await live.api.create(mpi_runtime(live.namespace))
    await live.api.create(trainjob("ds", live.namespace, "mpi", trainer={"numNodes": 2}))
    live.reads.lagging = True  # the Secret informer is behind for both passes

    await live.reconcile("ds")  # creates the Secret, the hostfile ConfigMap and the JobSet
    created = await ssh_secret(live, "ds")
    assert created["immutable"] is True and created["type"] == "kubernetes.io/ssh-auth"

    # the cause, at the API server: new keys for the Secret that exists, as upstream builds
    # them after its cache's miss, are refused
    upstream = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "ds-mpi-ssh-auth", "namespace": live.namespace},
        "type": "kubernetes.io/ssh-auth",
        "immutable": True,
        "data": ssh_auth_secret_data(),
    }
    with pytest.raises(ApiError) as refused:
        await live.api.apply(upstream, field_owner="trainer", force=True, dry_run=True)
    assert refused.value.status_code == 422 and IMMUTABLE in refused.value.message, refused.value.message

    # the next pass still misses the Secret in the cache: it keeps the keys, nothing fails
    await live.reconcile("ds")  # raises ReconcileError when an apply is refused
    assert await live.warnings("ds") == []
    kept = await ssh_secret(live, "ds")
    assert kept["data"] == created["data"]
    assert kept["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    public_key = base64.b64decode(kept["data"]["ssh-publickey"])
    assert public_key.startswith(b"ecdsa-sha2-nistp521 ")
