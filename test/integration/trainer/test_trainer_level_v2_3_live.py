"""`python -m trainer --api-level=v2.3` against a kube-apiserver with the v2.3 CRDs
(docs/behaviour/trainer.md §12): the managedBy early return, spec.activeDeadlineSeconds, the
status merge patch and the events.k8s.io events.

The module's own control plane has ``config/overlays/v2.3/crd`` and the PodGroup and
ElasticQuota CRDs of ``config/crd/bases`` installed (the session's ``control_plane`` has v2.1's,
which a v2.3 manager refuses). Each test runs the manager as a subprocess in a namespace of its
own; there is no kube-controller-manager, so Jobs get no pods, which these tests do not need.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from trainer_process import RunningManager, running_manager

from manager.client import Client, Conflict, NotFound
from manager.client.patch import Patch
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.meta.times import parse_time
from manager.testing import eventually
from trainer.levels import LEVELS
from trainer.runtime.objects import JOBSET_GVK, TRAINJOB_GVK

ROOT = Path(__file__).resolve().parents[3]
BASES = ROOT / "config" / "crd" / "bases"
V2_3_CRDS = [
    ROOT / "config" / "overlays" / "v2.3" / "crd",
    BASES / "scheduling.x-k8s.io_podgroups.yaml",
    BASES / "scheduling.x-k8s.io_elasticquotas.yaml",
]
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
Json = dict[str, Any]


@pytest.fixture(scope="module")
def env_v2_3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    """etcd + kube-apiserver with the v2.3 CRDs, for this module only."""
    env = Environment(tmp_path_factory.mktemp("level-v2.3") / "env", crd_paths=V2_3_CRDS)
    asyncio.run(env.start())
    try:
        yield env
    finally:
        asyncio.run(env.stop())


@pytest.fixture
async def api(env_v2_3: Environment) -> AsyncIterator[Client]:
    config = await load_kubeconfig(env_v2_3.kubeconfig)
    async with Cluster(config, field_owner="test") as cluster:
        yield Client(cluster.transport, cluster.mapper, field_owner="test")


@pytest.fixture
async def namespace(api: Client) -> AsyncIterator[str]:
    name = f"v23-{uuid.uuid4().hex[:8]}"
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield name
    finally:
        with contextlib.suppress(NotFound):
            await api.delete({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


@pytest.fixture
async def manager(env_v2_3: Environment, tmp_path: Path) -> AsyncIterator[RunningManager]:
    async with running_manager(
        env_v2_3, tmp_path, args=["--api-level=v2.3", "--zap-log-level=debug"]
    ) as running:
        yield running


def training_runtime(namespace: str, name: str = "torch") -> Json:
    node = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "busybox"}]}}},
        },
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"template": {"spec": {"replicatedJobs": [node]}}},
    }


def train_job(namespace: str, name: str, runtime: str = "torch", **spec: Any) -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"runtimeRef": {"name": runtime, "kind": "TrainingRuntime"}, **spec},
    }


def condition(tj: Json, condition_type: str) -> Json | None:
    for c in (tj.get("status") or {}).get("conditions") or ():
        if c["type"] == condition_type:
            return dict(c)
    return None


def log_entries(manager: RunningManager) -> list[Json]:
    entries = []
    for line in manager.log_path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            entries.append(json.loads(line))
    return entries


# -- managedBy -------------------------------------------------------------------------------------


async def test_a_trainjob_managed_by_multikueue_is_left_alone(
    api: Client, namespace: str, manager: RunningManager
) -> None:
    await api.create(training_runtime(namespace))
    await api.create(train_job(namespace, "elsewhere", suspend=True, managedBy=MULTIKUEUE))
    await api.create(train_job(namespace, "here", suspend=True))

    async def own_reconciled() -> None:
        tj = await api.get(TRAINJOB_GVK, "here", namespace)
        assert condition(tj, "Suspended"), tj.get("status")
        await api.get(JOBSET_GVK, "here", namespace)

    await eventually(
        own_reconciled, retry_on=(NotFound,), message="the TrainJob of the trainer was not reconciled"
    )

    def skipped() -> None:
        assert any(
            e.get("msg") == "Skipping TrainJob managed by a custom controller"
            and e.get("name") == "elsewhere"
            and e.get("namespace") == namespace
            and e.get("managedBy") == MULTIKUEUE
            for e in log_entries(manager)
        ), "the controller has not processed the MultiKueue TrainJob yet"

    await eventually(skipped, message="the MultiKueue TrainJob was never looked at")
    tj = await api.get(TRAINJOB_GVK, "elsewhere", namespace)
    assert "status" not in tj
    with pytest.raises(NotFound):
        await api.get(JOBSET_GVK, "elsewhere", namespace)


# -- activeDeadlineSeconds -------------------------------------------------------------------------


async def test_a_running_trainjob_fails_at_its_deadline_and_its_jobset_is_deleted(
    api: Client, namespace: str, manager: RunningManager
) -> None:
    await api.create(training_runtime(namespace))
    created = await api.create(train_job(namespace, "short", activeDeadlineSeconds=2))
    await eventually(
        lambda: api.get(JOBSET_GVK, "short", namespace), retry_on=(NotFound,), message="no JobSet was applied"
    )

    async def failed() -> Json:
        tj: Json = await api.get(TRAINJOB_GVK, "short", namespace)
        assert condition(tj, "Failed"), tj.get("status")
        return tj

    tj = await eventually(failed, timeout=30, message="the TrainJob never failed at its deadline")
    got = condition(tj, "Failed")
    assert got is not None
    assert (got["status"], got["reason"], got["message"]) == (
        "True",
        "DeadlineExceeded",
        "TrainJob exceeded its active deadline",
    )
    start = parse_time(created["metadata"]["creationTimestamp"])
    assert start is not None
    failed_at = parse_time(got["lastTransitionTime"])
    assert failed_at is not None and failed_at >= start + datetime.timedelta(seconds=2)

    async def jobset_gone() -> None:
        with pytest.raises(NotFound):
            await api.get(JOBSET_GVK, "short", namespace)

    await eventually(jobset_gone, message="the JobSet of the failed TrainJob was not deleted")


async def test_the_deadline_counts_from_the_resume_not_from_the_creation(
    api: Client, namespace: str, manager: RunningManager
) -> None:
    await api.create(training_runtime(namespace))
    created = await api.create(train_job(namespace, "paused", suspend=True, activeDeadlineSeconds=2))
    creation = parse_time(created["metadata"]["creationTimestamp"])
    assert creation is not None

    async def suspended() -> None:
        tj = await api.get(TRAINJOB_GVK, "paused", namespace)
        assert (condition(tj, "Suspended") or {}).get("status") == "True", tj.get("status")

    await eventually(suspended, message="the TrainJob was never marked suspended")
    tj = await api.get(TRAINJOB_GVK, "paused", namespace)
    await api.patch(tj, Patch.merge({"spec": {"suspend": False}}))

    async def failed() -> Json:
        job: Json = await api.get(TRAINJOB_GVK, "paused", namespace)
        assert condition(job, "Failed"), job.get("status")
        return job

    tj = await eventually(failed, timeout=30, message="the resumed TrainJob never failed at its deadline")
    resumed, got = condition(tj, "Suspended"), condition(tj, "Failed")
    assert resumed is not None and got is not None
    assert (resumed["status"], resumed["reason"]) == ("False", "Resumed")
    assert got["reason"] == "DeadlineExceeded"
    resumed_at, failed_at = parse_time(resumed["lastTransitionTime"]), parse_time(got["lastTransitionTime"])
    assert resumed_at is not None and failed_at is not None
    # counted from the resume: a clock from the creation (or one running while suspended) would
    # have failed it earlier than that
    assert failed_at >= resumed_at + datetime.timedelta(seconds=2), (creation, resumed_at, failed_at)


# -- status by merge patch, events through events.k8s.io ---------------------------------------------


async def test_a_failed_reconcile_is_reported_as_an_events_k8s_io_event(
    api: Client, env_v2_3: Environment, namespace: str, manager: RunningManager
) -> None:
    # no validating webhook here: the TrainJob names a runtime that does not exist
    await api.create(train_job(namespace, "orphan", runtime="missing"))

    async def reported() -> Json:
        code, answer = await env_v2_3.request("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
        assert code == 200, answer
        events = [e for e in answer["items"] if e["regarding"].get("name") == "orphan"]
        assert events, "no event yet"
        return dict(events[0])

    event = await eventually(reported, message="the failed reconcile was not reported")
    assert event["type"] == "Warning"
    assert event["reason"] == "TrainJobResourcesCreationFailed"
    assert event["action"] == "Reconciling"
    assert event["reportingController"] == "trainer-trainjob-controller"
    assert event["reportingInstance"].startswith("trainer-trainjob-controller-")
    assert event["note"].startswith(
        "TrainJob resources reconciliation failed: TrainingRuntime specified in TrainJob is not found: "
    ), event["note"]
    assert event["regarding"]["kind"] == "TrainJob" and event["regarding"]["namespace"] == namespace
    assert event["eventTime"]


async def test_the_v2_3_status_write_is_a_merge_patch_a_stale_copy_does_not_conflict(
    api: Client, namespace: str
) -> None:
    v2_1, v2_3 = LEVELS["v2.1"].runtime, LEVELS["v2.3"].runtime
    await api.create(train_job(namespace, "stale", suspend=True))
    stale = await api.get(TRAINJOB_GVK, "stale", namespace)
    await api.patch(stale, Patch.merge({"metadata": {"labels": {"newer": "yes"}}}))
    suspended = {
        "type": "Suspended",
        "status": "True",
        "reason": "Suspended",
        "message": "TrainJob is suspended",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    status = {"conditions": [suspended]}
    with pytest.raises(Conflict):  # v2.1.0's Status().Update: resourceVersion-checked
        await v2_1.status_write.write(api, dict(stale), {}, status, "trainer")
    stored = await v2_3.status_write.write(api, dict(stale), {}, status, "trainer")
    assert stored["status"] == status
    assert stored["metadata"]["labels"] == {"newer": "yes"}
    # and back to no status at all: the patch says status: null (the CRD refuses {})
    cleared = await v2_3.status_write.write(api, dict(stored), status, {}, "trainer")
    assert "status" not in cleared
