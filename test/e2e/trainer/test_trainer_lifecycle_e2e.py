"""TrainJob lifecycle on the full local cluster: finished stays finished, lifecycle metrics.

The manager runs as a subprocess (`python -m trainer`) with its webhooks and metrics served, on
a TrainingRuntime of the test namespace whose trainer pods can never be scheduled (a node
selector no KWOK node has): such a TrainJob stays running for as long as the test wants, and
with ``activeDeadlineSeconds`` on the Job it fails for real (the kube-controller-manager's Job
controller fails the Job, the manager's JobSet controller fails the JobSet).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from trainer_process import running_manager, shipped_webhooks

from manager.client import Client, NotFound
from manager.client.errors import Conflict
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.envtest.process import free_port
from manager.scheme import GroupVersionKind
from manager.testing import eventually

ROOT = Path(__file__).resolve().parents[3]
TJ = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainJob")
TR = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainingRuntime")
JOBSET = GroupVersionKind("jobset.x-k8s.io", "v1alpha2", "JobSet")
Json = dict[str, Any]


@dataclass
class Product:
    client: Client
    metrics_url: str
    http: aiohttp.ClientSession


@pytest.fixture
async def product(full_cluster: Environment, full_namespace: str, tmp_path: Path) -> AsyncIterator[Product]:
    """The manager as a subprocess (webhooks for the test namespace, metrics on a free port)."""
    async with running_product(full_cluster, full_namespace, tmp_path, {}) as product:
        yield product


@pytest.fixture
async def state_product(
    full_cluster: Environment, full_namespace: str, tmp_path: Path
) -> AsyncIterator[Product]:
    """The manager with the TrainJobState gate and its CRD variant (the default CRD put back after)."""
    await full_cluster.install_crds([ROOT / "config" / "state" / "crd"])
    try:
        async with running_product(
            full_cluster, full_namespace, tmp_path, {"TrainJobState": True}
        ) as product:
            yield product
    finally:
        await full_cluster.install_crds(
            [ROOT / "config" / "crd" / "bases" / "trainer.kubeflow.org_trainjobs.yaml"]
        )


@contextlib.asynccontextmanager
async def running_product(
    full_cluster: Environment, full_namespace: str, tmp_path: Path, gates: dict[str, bool]
) -> AsyncIterator[Product]:
    metrics = f"127.0.0.1:{free_port()}"
    config = {
        "metrics": {"bindAddress": metrics, "secureServing": False},
        **({"featureGates": gates} if gates else {}),
    }
    async with (
        running_manager(full_cluster, tmp_path, config) as manager,
        shipped_webhooks(full_cluster, full_namespace, tmp_path, manager),
    ):
        rest = await load_kubeconfig(full_cluster.kubeconfig)
        async with Cluster(rest, field_owner="e2e") as cluster:
            client = Client(cluster.transport, cluster.mapper, field_owner="e2e")
            yield Product(client, f"http://{metrics}/metrics", manager.http)


def pending_runtime(
    namespace: str, name: str, *, deadline: int | None = None, schedulable: bool = False
) -> Json:
    """A one-node TrainingRuntime; unschedulable pods stay Pending, ``deadline`` fails the Job."""
    job_spec: Json = {
        "template": {
            "spec": {
                "containers": [{"name": "node", "image": "busybox:1.36", "command": ["true"]}],
                **({} if schedulable else {"nodeSelector": {"example.com/no-such-node": "true"}}),
            }
        }
    }
    if deadline is not None:
        job_spec["activeDeadlineSeconds"] = deadline
        job_spec["backoffLimit"] = 0
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "mlPolicy": {"numNodes": 1},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                                },
                                "spec": job_spec,
                            },
                        }
                    ]
                }
            },
        },
    }


def trainjob(namespace: str, name: str, runtime: str, *, suspend: bool = False) -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"runtimeRef": {"name": runtime, "kind": "TrainingRuntime"}, "suspend": suspend},
    }


def conditions_of(tj: Json) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (tj.get("status") or {}).get("conditions", [])}


async def jobset_of(client: Client, name: str, ns: str) -> Json:
    try:
        jobset: Json = await client.get(JOBSET, name, ns)
    except NotFound as err:
        raise AssertionError(f"no JobSet {name}") from err
    return jobset


async def test_failed_trainjob_whose_jobset_is_deleted_keeps_no_jobset(
    product: Product, full_namespace: str
) -> None:
    client, ns = product.client, full_namespace
    await client.create(pending_runtime(ns, "fails", deadline=2))
    await client.create(trainjob(ns, "failing", "fails"))

    async def failed() -> None:
        tj = await client.get(TJ, "failing", ns)
        assert conditions_of(tj).get("Failed") == "True", tj.get("status")

    await eventually(failed, timeout=120, message="the TrainJob never failed")
    jobset = await jobset_of(client, "failing", ns)
    await client.delete(jobset, propagation_policy="Background")  # as a TTL or a user would
    # A bounded negative check: the manager is a subprocess whose reconciles this test cannot
    # see, so it looks for 10 s (many reconciles: the JobSet delete event, the Job deletes).
    # test_trainer_controllers_live's in-process variant waits for the reconcile instead.
    for _ in range(50):
        await asyncio.sleep(0.2)
        with pytest.raises(NotFound):
            await client.get(JOBSET, "failing", ns)
    await failed()


async def test_running_trainjob_whose_jobset_is_deleted_gets_it_back(
    product: Product, full_namespace: str
) -> None:
    client, ns = product.client, full_namespace
    await client.create(pending_runtime(ns, "pending"))
    await client.create(trainjob(ns, "running", "pending"))
    first = await eventually(lambda: jobset_of(client, "running", ns), timeout=60)
    await client.delete(first, propagation_policy="Background")

    async def recreated() -> None:
        again = await jobset_of(client, "running", ns)
        assert again["metadata"]["uid"] != first["metadata"]["uid"]
        assert again["spec"]["suspend"] is False

    await eventually(recreated, timeout=60, message="the running TrainJob never got its JobSet back")
    assert "Failed" not in conditions_of(await client.get(TJ, "running", ns))


async def scrape(product: Product, name: str, labels: dict[str, str]) -> float:
    async with product.http.get(product.metrics_url) as r:
        assert r.status == 200
        text = await r.text()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


async def test_a_scrape_shows_the_lifecycle_metrics_move(product: Product, full_namespace: str) -> None:
    client, ns = product.client, full_namespace
    labels = {"namespace": ns, "runtime_kind": "TrainingRuntime", "runtime": "runs"}
    names = ("created", "started", "completed")
    before = {n: await scrape(product, f"trainer_trainjobs_{n}_total", labels) for n in names}
    assert before == dict.fromkeys(names, 0.0)  # a fresh namespace: no series yet
    await client.create(pending_runtime(ns, "runs", schedulable=True))
    await client.create(trainjob(ns, "metered", "runs"))

    async def moved() -> None:
        now = {n: await scrape(product, f"trainer_trainjobs_{n}_total", labels) for n in names}
        assert now == dict.fromkeys(names, 1.0), now

    await eventually(moved, timeout=120, message="the lifecycle counters never moved")
    assert conditions_of(await client.get(TJ, "metered", ns)).get("Complete") == "True"
    assert await scrape(product, "trainer_trainjob_time_to_start_seconds_count", labels) == 1
    assert (
        await scrape(product, "trainer_trainjob_run_time_seconds_count", {**labels, "result": "Complete"})
        == 1
    )
    # A bounded negative check (the manager is a subprocess): after 2 s more of status writes
    # and resyncs the completion is still counted once.
    await asyncio.sleep(2)
    assert await scrape(product, "trainer_trainjobs_completed_total", labels) == 1


TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


async def printed_states(cluster: Environment, ns: str) -> dict[str, str]:
    """``kubectl get trainjob``'s NAME -> STATE, read from the API server's Table output."""
    connector = aiohttp.TCPConnector(ssl=cluster.ssl_context())
    async with (
        aiohttp.ClientSession(connector=connector) as http,
        http.get(
            f"{cluster.url}/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs",
            headers={"Accept": TABLE},
        ) as r,
    ):
        assert r.status == 200, await r.text()
        table = await r.json()
    assert table["kind"] == "Table"
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names[:2] == ["Name", "State"], names
    return {row["cells"][0]: row["cells"][1] for row in table["rows"]}


async def test_the_state_column_tells_the_truth(
    state_product: Product, full_cluster: Environment, full_namespace: str
) -> None:
    client, ns = state_product.client, full_namespace
    steps = pending_runtime(ns, "steps")
    # a first step that runs (KWOK completes it) before a second that never gets a node
    first = copy.deepcopy(steps["spec"]["template"]["spec"]["replicatedJobs"][0])
    first["name"] = "prepare"
    first["template"]["metadata"] = {}
    first["template"]["spec"]["template"]["spec"].pop("nodeSelector")
    steps["spec"]["template"]["spec"]["replicatedJobs"].insert(0, first)
    await client.create(steps)
    await client.create(pending_runtime(ns, "runs", schedulable=True))
    await client.create(pending_runtime(ns, "fails", deadline=3))
    await client.create(trainjob(ns, "steps", "steps", suspend=True))
    await client.create(trainjob(ns, "waits", "steps"))

    async def printed(name: str, state: str) -> None:
        assert (await printed_states(full_cluster, ns)).get(name) == state

    await eventually(lambda: printed("steps", "Suspended"), timeout=60)
    for _ in range(2):  # resume, suspend again, resume again
        await edit_suspend(client, ns, "steps", False)
        await eventually(lambda: printed("steps", "Running"), timeout=90)
        conditions = (await client.get(TJ, "steps", ns))["status"]["conditions"]
        assert conditions[-1]["type"] == "Suspended"  # what upstream's column shows
        await edit_suspend(client, ns, "steps", True)
        await eventually(lambda: printed("steps", "Suspended"), timeout=60)
    await edit_suspend(client, ns, "steps", False)
    await eventually(lambda: printed("steps", "Running"), timeout=90)

    await client.create(trainjob(ns, "done", "runs"))
    await client.create(trainjob(ns, "failing", "fails"))
    await eventually(lambda: printed("done", "Complete"), timeout=120)
    await eventually(lambda: printed("failing", "Failed"), timeout=120)
    # the second step of "waits" never gets a node, but its first step ran
    states = await printed_states(full_cluster, ns)
    assert states == {"steps": "Running", "waits": "Running", "done": "Complete", "failing": "Failed"}


async def test_a_trainjob_whose_pods_wait_for_resources_is_pending(
    state_product: Product, full_cluster: Environment, full_namespace: str
) -> None:
    client, ns = state_product.client, full_namespace
    await client.create(pending_runtime(ns, "pending"))
    await client.create(trainjob(ns, "queued", "pending"))
    await eventually(lambda: jobset_of(client, "queued", ns), timeout=60)

    async def pending() -> None:
        assert (await printed_states(full_cluster, ns)) == {"queued": "Pending"}
        assert (await client.get(TJ, "queued", ns))["status"]["state"] == "Pending"

    await eventually(pending, timeout=60)


async def edit_suspend(client: Client, ns: str, name: str, suspend: bool) -> None:
    for _ in range(5):
        current = await client.get(TJ, name, ns)
        current["spec"]["suspend"] = suspend
        try:
            await client.update(current)
            return
        except Conflict:
            await asyncio.sleep(0.1)
    raise AssertionError(f"could not set suspend={suspend} on {name}")
