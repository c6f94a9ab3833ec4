"""`python -m trainer --api-level=v2.3` against a kube-apiserver with the v2.3 CRDs
(docs/behaviour/trainer.md §12): the managedBy early return, spec.activeDeadlineSeconds, the
status merge patch, the events.k8s.io events, the TrainJob defaulting webhook and the v2.3
validation rules.

The module's own control plane has ``config/overlays/v2.3/crd`` and the PodGroup and
ElasticQuota CRDs of ``config/crd/bases`` installed (the session's ``control_plane`` has v2.1's,
which a v2.3 manager refuses). Each test runs the manager as a subprocess in a namespace of its
own; there is no kube-controller-manager, so Jobs get no pods, which these tests do not need.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from module_env import V2_3_CRDS, api_client, module_control_plane, temporary_namespace
from trainer_process import RunningManager, running_manager

from manager.client import AlreadyExists, Client, Conflict, Forbidden, NotFound
from manager.client.patch import Patch
from manager.envtest import Environment
from manager.meta.times import parse_time
from manager.testing import eventually
from trainer.levels import LEVELS
from trainer.runtime.objects import JOBSET_GVK, TRAINJOB_GVK
from webhooks.certs import MWC_GVK, SECRET_GVK, VWC_GVK

ROOT = Path(__file__).resolve().parents[3]
DEFAULTER = ROOT / "config" / "overlays" / "v2.3" / "webhook" / "defaulter.yaml"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
SECRET = "kubeflow-trainer-webhook-cert"
Json = dict[str, Any]


@pytest.fixture(scope="module")
def env_v2_3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    """etcd + kube-apiserver with the v2.3 CRDs, for this module only."""
    with module_control_plane(tmp_path_factory, "level-v2.3", V2_3_CRDS) as env:
        yield env


@pytest.fixture
async def api(env_v2_3: Environment) -> AsyncIterator[Client]:
    async with api_client(env_v2_3) as api:
        yield api


@pytest.fixture
async def namespace(api: Client) -> AsyncIterator[str]:
    async with temporary_namespace(api, "v23") as name:
        yield name


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


# -- the defaulting webhook ---------------------------------------------------------------------------


@pytest.fixture
async def webhooks(
    env_v2_3: Environment, api: Client, namespace: str, tmp_path: Path, manager: RunningManager
) -> AsyncIterator[None]:
    """The trainer's validating and the v2.3 defaulting webhook configurations, served by the
    manager for ``namespace`` (which gets the runtime ``torch``), removed afterwards."""
    await api.create(training_runtime(namespace))
    docs = [
        d
        for path in (ROOT / "config" / "webhook" / "trainer.yaml", DEFAULTER)
        for d in yaml.safe_load_all(path.read_text())
        if d
    ]
    for doc in docs:
        for hook in doc["webhooks"]:
            if hook["name"] != "validator.clustertrainingruntime.trainer.kubeflow.org":
                hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    (tmp_path / "webhooks.yaml").write_text(yaml.safe_dump_all(docs))
    try:
        await env_v2_3.install_webhooks(
            [tmp_path / "webhooks.yaml"],
            host="127.0.0.1",
            port=manager.webhook_port,
            ca_bundle=manager.ca.cert_pem,
        )
        probe = train_job(namespace, "probe", runtimePatches=[{"manager": "example.com/probe"}])
        await env_v2_3.wait_webhook_effective(
            f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs",
            probe,
            mutated=lambda answer: bool(answer["spec"]["runtimePatches"][0].get("time")),
        )
        probe = train_job(namespace, "probe", runtime="missing")
        await env_v2_3.wait_webhook_effective(
            f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs",
            probe,
            denied_by="validator.trainjob.trainer.kubeflow.org",
        )
        yield
    finally:
        for doc in docs:
            plural = doc["kind"].lower() + "s"
            await env_v2_3.request(
                "DELETE", f"/apis/admissionregistration.k8s.io/v1/{plural}/{doc['metadata']['name']}"
            )


def node_patch(manager: str, **pod_spec: Any) -> Json:
    return {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": "node", "template": {"spec": {"template": {"spec": pod_spec}}}}
                    ]
                }
            }
        },
    }


def patch_times(tj: Json) -> dict[str, str | None]:
    return {p["manager"]: p.get("time") for p in tj["spec"].get("runtimePatches") or ()}


async def test_the_defaulter_stamps_new_and_changed_runtime_patches(
    api: Client, namespace: str, webhooks: None
) -> None:
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    created = await api.create(
        train_job(
            namespace,
            "stamped",
            suspend=True,
            runtimePatches=[
                node_patch("example.com/one", nodeSelector={"pool": "a"}),
                {**node_patch("example.com/two"), "time": "2025-01-01T00:00:00Z"},
            ],
        )
    )
    times = patch_times(created)
    assert times["example.com/two"] == "2025-01-01T00:00:00Z", "a time the creator wrote is kept"
    one = parse_time(times["example.com/one"])
    assert one is not None and one >= before
    assert times["example.com/one"].endswith("Z") and "." not in times["example.com/one"]

    # an update that leaves the patches as they are keeps their times (even one the request drops)
    def drop_first_time(patches: list[Json]) -> list[Json]:
        patches[0].pop("time")
        return patches

    updated = await update_runtime_patches(api, namespace, "stamped", drop_first_time)
    assert patch_times(updated) == times

    # a changed patch is stamped again; the unchanged one keeps its time
    def change_second(patches: list[Json]) -> list[Json]:
        patches[1] = {
            **node_patch("example.com/two", nodeSelector={"pool": "b"}),
            "time": "2025-01-01T00:00:00Z",
        }
        return patches

    changed = await update_runtime_patches(api, namespace, "stamped", change_second)
    new_times = patch_times(changed)
    assert new_times["example.com/one"] == times["example.com/one"]
    two = parse_time(new_times["example.com/two"])
    assert two is not None and two >= before


async def update_runtime_patches(
    api: Client, namespace: str, name: str, change: Callable[[list[Json]], list[Json]]
) -> Json:
    """PUT the TrainJob with ``change`` made to its runtimePatches (again on a conflict with the
    controller's status writes)."""

    async def put() -> Json:
        tj = await api.get(TRAINJOB_GVK, name, namespace)
        patches = change([dict(p) for p in tj["spec"]["runtimePatches"]])
        updated: Json = await api.update({**tj, "spec": {**tj["spec"], "runtimePatches": patches}})
        return updated

    result: Json = await eventually(put, retry_on=(Conflict,), message="the TrainJob could not be updated")
    return result


async def test_the_cert_rotator_injects_the_ca_into_the_defaulters_configuration(
    env_v2_3: Environment, api: Client, tmp_path: Path
) -> None:
    never = {"matchLabels": {"trainer-test/never": "match"}}
    created: list[Json] = []
    with contextlib.suppress(AlreadyExists):
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kubeflow-system"}})
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET, "namespace": "kubeflow-system"},
    }
    created.append(await api.create(secret))
    for path in (ROOT / "config" / "webhook" / "trainer.yaml", DEFAULTER):
        for doc in yaml.safe_load_all(path.read_text()):
            for hook in doc["webhooks"]:  # injected, never called
                hook["namespaceSelector"] = never
                hook["objectSelector"] = never
            created.append(await api.create(doc))
    cert_dir = tmp_path / "certs"
    cert_dir.mkdir()
    try:
        async with running_manager(
            env_v2_3,
            tmp_path,
            {"certManagement": {"enable": True}},
            args=["--api-level=v2.3", "--controllers=trainer"],
            cert_dir=cert_dir,
            wait_ready=False,
        ) as manager:

            async def secret_filled() -> Json:
                current: Json = await api.get(SECRET_GVK, SECRET, "kubeflow-system")
                assert (current.get("data") or {}).get("tls.crt"), (
                    "the rotator has not written the Secret yet"
                )
                return current

            filled = await eventually(
                secret_filled, timeout=60, message="the rotator never filled the Secret"
            )
            for key, value in filled["data"].items():  # the kubelet mounts the Secret
                (cert_dir / key).write_bytes(base64.b64decode(value))
            await eventually(manager.ready, timeout=60, message="the manager never became ready")
            ca = filled["data"]["ca.crt"]
            defaulter = await api.get(MWC_GVK, "defaulter.trainer.kubeflow.org")
            assert [h["clientConfig"].get("caBundle") for h in defaulter["webhooks"]] == [ca]
            validator = await api.get(VWC_GVK, "validator.trainer.kubeflow.org")
            assert {h["clientConfig"].get("caBundle") for h in validator["webhooks"]} == {ca}
    finally:
        for obj in created:
            with contextlib.suppress(NotFound):
                await api.delete(obj)


# -- the v2.3 validation rules -------------------------------------------------------------------------


async def test_runtime_patches_change_only_around_a_suspension(
    api: Client, namespace: str, webhooks: None
) -> None:
    await api.create(
        train_job(
            namespace, "running", runtimePatches=[node_patch("example.com/kueue", nodeSelector={"a": "1"})]
        )
    )

    def retarget(patches: list[Json]) -> list[Json]:
        return [node_patch("example.com/kueue", nodeSelector={"a": "2"})]

    with pytest.raises(Forbidden) as refused:
        await update_runtime_patches(api, namespace, "running", retarget)
    assert str(refused.value) == (
        'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: spec.runtimePatches: '
        "Forbidden: RuntimePatches can only be modified when the TrainJob is suspended before or after the update"
    )

    # Kueue's way: the patch and suspend in one request
    async def suspend_and_retarget() -> Json:
        tj = await api.get(TRAINJOB_GVK, "running", namespace)
        spec = {**tj["spec"], "suspend": True, "runtimePatches": retarget([])}
        updated: Json = await api.update({**tj, "spec": spec})
        return updated

    updated = await eventually(suspend_and_retarget, retry_on=(Conflict,), message="the update was refused")
    assert updated["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][
        0
    ]["template"]["spec"]["template"]["spec"]["nodeSelector"] == {"a": "2"}


async def test_a_runtime_patch_may_not_set_env_of_the_node_container_nor_name_a_bad_manager(
    api: Client, namespace: str, webhooks: None
) -> None:
    bad_env = node_patch(
        "example.com/kueue", containers=[{"name": "node", "env": [{"name": "A", "value": "1"}]}]
    )
    with pytest.raises(Forbidden) as refused:
        await api.create(train_job(namespace, "env", runtimePatches=[bad_env]))
    message = str(refused.value)
    assert message.startswith(
        'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: spec.runtimePatches: '
        'Invalid value: [{"manager":"example.com/kueue","time":"'
    ), message
    assert message.endswith(
        '"trainingRuntimeSpec":{"template":{"spec":{"replicatedJobs":[{"name":"node","template":{"spec":'
        '{"template":{"spec":{"containers":[{"name":"node","env":[{"name":"A","value":"1"}]}]}}}}}]}}}}]: '
        "must not have envs for the dataset-initializer, model-initializer, node containers"
    ), message
    with pytest.raises(Forbidden) as refused:
        await api.create(train_job(namespace, "manager", runtimePatches=[{"manager": "kueue"}]))
    assert str(refused.value) == (
        'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: '
        'spec.runtimePatches.manager: Invalid value: "kueue": must be a domain-prefixed path (such as "acme.io/foo")'
    )
