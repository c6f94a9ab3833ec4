"""Level v2.3 against a kube-apiserver with the v2.3 CRDs (docs/behaviour/trainer.md §12.7,
§12.8): the runtimes' ``resource-in-use`` finalizer (never added, a left one removed, as Trainer
v2.3.0's reconcilers do) with ``python -m trainer --api-level=v2.3`` running, and the public
ConfigMap ``kubeflow-trainer-public`` of ``config/overlays/v2.3``, which any authenticated user
may read (what the ``kubeflow`` SDK does at start) and nothing else of ``kubeflow-system``.

The module's own control plane has the v2.3 CRDs (the session's has v2.1's, which a v2.3
manager refuses); there is no kube-controller-manager, which these tests do not need.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from module_env import V2_3_CRDS, api_client, module_control_plane, temporary_namespace
from trainer_process import RunningManager, running_manager

from manager.client import Client, NotFound
from manager.client.patch import Patch
from manager.envtest import Environment, assets
from manager.testing import eventually
from trainer.levels import LEVELS
from trainer.runtime.objects import JOBSET_GVK, TRAINING_RUNTIME_GVK, TRAINJOB_GVK

ROOT = Path(__file__).resolve().parents[3]
FINALIZER = "trainer.kubeflow.org/resource-in-use"
SYSTEM = "kubeflow-system"
Json = dict[str, Any]


@pytest.fixture(scope="module")
def env_v2_3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    with module_control_plane(tmp_path_factory, "level-v2.3-runtimes", V2_3_CRDS) as env:
        yield env


@pytest.fixture
async def api(env_v2_3: Environment) -> AsyncIterator[Client]:
    async with api_client(env_v2_3) as api:
        yield api


@pytest.fixture
async def namespace(api: Client) -> AsyncIterator[str]:
    async with temporary_namespace(api, "v23rt") as name:
        yield name


@pytest.fixture
async def manager(env_v2_3: Environment, tmp_path: Path) -> AsyncIterator[RunningManager]:
    async with running_manager(
        env_v2_3, tmp_path, args=["--api-level=v2.3", "--zap-log-level=debug"]
    ) as running:
        yield running


def training_runtime(namespace: str, name: str, finalizers: list[str] | None = None) -> Json:
    node = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "busybox"}]}}},
        },
    }
    metadata: Json = {"name": name, "namespace": namespace}
    if finalizers:
        metadata["finalizers"] = finalizers
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": metadata,
        "spec": {"template": {"spec": {"replicatedJobs": [node]}}},
    }


def train_job(namespace: str, name: str, runtime: str) -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"runtimeRef": {"name": runtime, "kind": "TrainingRuntime"}, "suspend": True},
    }


def runtime_reconciles(manager: RunningManager, namespace: str, name: str) -> int:
    """How many reconciles of the TrainingRuntime ``namespace/name`` the manager has finished."""
    count = 0
    for line in manager.log_path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if (
                entry.get("msg") == "Reconcile successful"
                and entry.get("controller") == "trainingruntime_controller"
                and entry.get("namespace") == namespace
                and entry.get("name") == name
            ):
                count += 1
    return count


# -- the resource-in-use finalizer -----------------------------------------------------------------


async def test_a_runtime_a_trainjob_uses_gets_no_finalizer_and_keeps_its_spec(
    api: Client, namespace: str, manager: RunningManager
) -> None:
    created = await api.create(training_runtime(namespace, "torch"))
    await api.create(train_job(namespace, "uses-torch", "torch"))
    await eventually(
        lambda: api.get(JOBSET_GVK, "uses-torch", namespace),
        retry_on=(NotFound,),
        message="the TrainJob was not reconciled into a JobSet",
    )
    # an event of the runtime itself, now that a TrainJob references it (v2.1.0 would add the
    # finalizer here, and on the TrainJob's events)
    await api.patch(created, Patch.merge({"metadata": {"labels": {"touched": "yes"}}}))

    def reconciled_after_the_label() -> None:
        assert runtime_reconciles(manager, namespace, "torch") >= 2, (
            "the runtime's update was not reconciled yet"
        )

    await eventually(reconciled_after_the_label, message="the labelled runtime was never reconciled")
    stored = await api.get(TRAINING_RUNTIME_GVK, "torch", namespace)
    assert "finalizers" not in stored["metadata"]
    assert stored["metadata"]["generation"] == 1  # no typed update of the spec
    assert stored["spec"] == created["spec"]  # no `resources: {}`, `metadata: {}` written back


async def test_a_finalizer_left_by_a_v2_1_manager_is_removed_while_a_trainjob_uses_the_runtime(
    api: Client, namespace: str, manager: RunningManager
) -> None:
    created = await api.create(
        training_runtime(namespace, "legacy", finalizers=[FINALIZER, "example.com/keep"])
    )
    await api.create(train_job(namespace, "uses-legacy", "legacy"))

    async def finalizer_removed() -> Json:
        stored: Json = await api.get(TRAINING_RUNTIME_GVK, "legacy", namespace)
        assert stored["metadata"].get("finalizers") == ["example.com/keep"], stored["metadata"]
        return stored

    stored = await eventually(finalizer_removed, message="the resource-in-use finalizer was not removed")
    assert stored["metadata"]["generation"] == 1
    assert stored["spec"] == created["spec"]
    tj = await api.get(TRAINJOB_GVK, "uses-legacy", namespace)
    assert tj["spec"]["runtimeRef"]["name"] == "legacy"
    # the other finalizer is someone else's: let the namespace go
    await api.patch(stored, Patch.merge({"metadata": {"finalizers": None}}))


async def test_a_deleted_runtime_with_a_left_finalizer_goes_away(
    api: Client, namespace: str, manager: RunningManager
) -> None:
    created = await api.create(training_runtime(namespace, "doomed", finalizers=[FINALIZER]))
    await api.create(train_job(namespace, "uses-doomed", "doomed"))
    await api.delete(created)

    async def gone() -> None:
        # An AssertionError, which eventually retries (pytest.raises' failure is not one).
        try:
            runtime = await api.get(TRAINING_RUNTIME_GVK, "doomed", namespace)
        except NotFound:
            return
        raise AssertionError(f"still there, finalizers {runtime['metadata'].get('finalizers')}")

    await eventually(gone, message="the deleted runtime kept its finalizer")


# -- the public ConfigMap --------------------------------------------------------------------------


def overlay_objects() -> list[Json]:
    """``config/overlays/v2.3`` as kustomize renders it."""
    kubectl = assets.ensure(["kubectl"])["kubectl"]
    out = subprocess.run(
        [str(kubectl), "kustomize", str(ROOT / "config" / "overlays" / "v2.3")],
        capture_output=True,
        text=True,
        check=True,
    )
    return [d for d in yaml.load_all(out.stdout, Loader=yaml.CSafeLoader) if d]


async def read_as(env: Environment, token: str, path: str) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=env.ssl_context(client_cert=False))
        ) as session,
        session.get(env.url + path, headers={"Authorization": f"Bearer {token}"}) as response,
    ):
        return response.status, await response.json(content_type=None)


async def test_any_authenticated_user_reads_the_trainer_version_and_nothing_else(
    env_v2_3: Environment, namespace: str, tmp_path: Path
) -> None:
    wanted = {
        ("Namespace", SYSTEM),
        ("ConfigMap", "kubeflow-trainer-public"),
        ("ConfigMap", "kubeflow-trainer-config"),
        ("Role", "kubeflow-trainer-public"),
        ("RoleBinding", "kubeflow-trainer-public"),
    }
    docs = [d for d in overlay_objects() if (d["kind"], d["metadata"]["name"]) in wanted]
    assert len(docs) == len(wanted)
    manifest = tmp_path / "public.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    await env_v2_3.apply_manifests([manifest], field_manager="public-test")  # waits for the binding
    # a user with no grant of its own: a ServiceAccount of another namespace
    token = await env_v2_3.service_account_token(namespace, "data-scientist")

    async def version() -> Any:
        status, body = await read_as(
            env_v2_3, token, f"/api/v1/namespaces/{SYSTEM}/configmaps/kubeflow-trainer-public"
        )
        assert status == 200, body
        return body

    body = await eventually(version, message="an authenticated user cannot read kubeflow-trainer-public")
    assert body["data"] == {"kubeflow_trainer_version": LEVELS["v2.3"].trainer_version}
    status, denied = await read_as(
        env_v2_3, token, f"/api/v1/namespaces/{SYSTEM}/configmaps/kubeflow-trainer-config"
    )
    assert status == 403, denied
    status, denied = await read_as(env_v2_3, token, f"/api/v1/namespaces/{SYSTEM}/configmaps")
    assert status == 403, denied
