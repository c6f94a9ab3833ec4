"""``trainer-controller-manager migrate --to v2.3`` on a real kube-apiserver (docs/migration.md),
the steps a cluster goes through: v2.1 objects stored under v2.1's CRDs (TrainJobs with
``podTemplateOverrides``, ``spec.labels``/``annotations`` and the ``numProcPerNode`` words,
runtimes with torch ``numProcPerNode`` and ``elasticPolicy``); an untranslatable TrainJob
refused by name and field with nothing changed; ``--dry-run`` printing the diffs and changing
nothing; a write refused over v2.1's CRDs; the bridge CRDs applied with kubectl; the migration;
v2.3's CRDs applied; the objects as v2.3's CRDs and v2.3.0's Go types read them; a second run
finding nothing to change.

The module's own control plane (it switches CRDs), no manager and no webhooks (as in step 2 of
docs/migration.md: the manager stopped and its ValidatingWebhookConfiguration removed).
"""

from __future__ import annotations

import copy
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from module_env import api_client, module_control_plane
from trainer_process import running_manager

from manager.client import Client
from manager.client.errors import RequestError
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment, assets
from manager.scheme import GroupVersionKind
from manager.testing import eventually
from trainer.api import gocodec
from trainer.migrate.cli import FIELD_MANAGER
from trainer.migrate.v2_3 import MANAGER, build_jobset
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.levels.v2_3 import V2_3
from trainer.runtime.objects import (
    CLUSTER_TRAINING_RUNTIME_GVK,
    JOBSET_GVK,
    TRAINING_RUNTIME_GVK,
    TRAINJOB_GVK,
)

ROOT = Path(__file__).resolve().parents[3]
BASES = ROOT / "config" / "crd" / "bases"
BRIDGE = ROOT / "config" / "migration" / "v2.1-to-v2.3"
V2_3_CRDS = ROOT / "config" / "overlays" / "v2.3" / "crd"
CRD_GVK = GroupVersionKind("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
Json = dict[str, Any]
GO_V2_3 = gocodec.codec_for("trainer.kubeflow.org/v1alpha1", "TrainJob", gocodec.TRAINER_V2_3_TYPES_FILE)


@pytest.fixture(scope="module")
def env_v2_1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    with module_control_plane(tmp_path_factory, "migrate-v2.3", [BASES]) as env:
        yield env


@pytest.fixture
async def api(env_v2_1: Environment) -> AsyncIterator[Client]:
    async with api_client(env_v2_1) as api:
        yield api


def node_job(resources: Json | None = None) -> Json:
    container: Json = {"name": "node", "image": "busybox"}
    if resources:
        container["resources"] = resources
    return {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": {"containers": [container]}}},
        },
    }


def aux_job() -> Json:
    return {
        "name": "aux",
        "template": {"spec": {"template": {"spec": {"containers": [{"name": "aux", "image": "busybox"}]}}}},
    }


def cluster_runtime() -> Json:
    """torch with numProcPerNode 4 and an elasticPolicy (both gone at v2.3), jobs node and aux."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": f"torch-four-{uuid.uuid4().hex[:6]}"},
        "spec": {
            "mlPolicy": {"torch": {"numProcPerNode": 4, "elasticPolicy": {"maxRestarts": 2}}},
            "template": {
                "metadata": {"labels": {"team": "runtime", "kept": "yes"}},
                "spec": {"replicatedJobs": [node_job(), aux_job()]},
            },
        },
    }


def gpu_runtime(namespace: str) -> Json:
    """torch (v2.1's CRD defaults numProcPerNode to auto), 2 GPUs and 3 CPUs per node."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "torch-gpu", "namespace": namespace},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {"replicatedJobs": [node_job({"limits": {"nvidia.com/gpu": 2, "cpu": "3"}})]}
            },
        },
    }


def train_job(namespace: str, name: str, ref: Json, **spec: Any) -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"runtimeRef": ref, "suspend": True, **spec},
    }


OVERRIDES = [
    {
        "targetJobs": [{"name": "node"}, {"name": "aux"}],
        "metadata": {"labels": {"override": "one"}},
        "spec": {
            "nodeSelector": {"pool": "train"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
    },
    {
        "targetJobs": [{"name": "node"}],
        "spec": {"containers": [{"name": "node", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]},
    },
    {
        "targetJobs": [{"name": "aux"}],
        "spec": {
            "serviceAccountName": "aux-sa",
            "tolerations": [{"key": "aux", "operator": "Exists"}],
            "containers": [{"name": "aux", "env": [{"name": "AUX", "value": "1"}]}],
        },
    },
]


def run_migrate(env: Environment, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer",
            "migrate",
            "--to",
            "v2.3",
            "--kubeconfig",
            str(env.kubeconfig),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def kubectl(env: Environment, *args: str) -> None:
    binary = assets.ensure(["kubectl"])["kubectl"]
    done = subprocess.run(
        [str(binary), "--kubeconfig", str(env.kubeconfig), *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


async def versions(api: Client, namespace: str) -> dict[str, str]:
    """resourceVersion of every object of the test (a write changes one)."""
    out = {}
    for gvk, ns in (
        (TRAINJOB_GVK, namespace),
        (TRAINING_RUNTIME_GVK, namespace),
        (CLUSTER_TRAINING_RUNTIME_GVK, None),
    ):
        for obj in await api.list(gvk, namespace=ns):
            out[f"{obj['kind']}/{obj['metadata']['name']}"] = obj["metadata"]["resourceVersion"]
    return out


async def serves(api: Client, namespace: str, *, keeps: set[str], prunes: set[str]) -> bool:
    """A TrainJob created (server dry run) keeps the spec fields ``keeps``, loses ``prunes``:
    the served schema is the one just applied."""
    probe = train_job(
        namespace, "probe", {"name": "x"}, podTemplateOverrides=[{"targetJobs": [{"name": "a"}]}]
    )
    probe["spec"]["runtimePatches"] = [{"manager": "example.com/probe"}]
    fields = set((await api.create(probe, dry_run=True))["spec"])
    assert keeps <= fields and not prunes & fields, fields
    return True


async def test_a_cluster_migrates_from_v2_1_to_v2_3(api: Client, env_v2_1: Environment) -> None:
    namespace = f"migrate-{uuid.uuid4().hex[:8]}"
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    ctr = await api.create(cluster_runtime())
    ctr_name = ctr["metadata"]["name"]
    await api.create(gpu_runtime(namespace))
    ctr_ref = {"name": ctr_name}
    gpu_ref = {"name": "torch-gpu", "kind": "TrainingRuntime"}
    await api.create(
        train_job(
            namespace,
            "overrides",
            ctr_ref,
            labels={"team": "job"},
            annotations={"note": "kept"},
            podTemplateOverrides=OVERRIDES,
            trainer={"numNodes": 1},
        )
    )
    for word in ("cpu", "gpu", "auto"):
        await api.create(train_job(namespace, word, gpu_ref, trainer={"numProcPerNode": word}))
    await api.create(train_job(namespace, "untouched", gpu_ref))
    bad = await api.create(train_job(namespace, "bad", ctr_ref, trainer={"numProcPerNode": "gpu"}))
    stored_v2_1 = {tj["metadata"]["name"]: tj for tj in await api.list(TRAINJOB_GVK, namespace=namespace)}
    ctr_v2_1 = await api.get(CLUSTER_TRAINING_RUNTIME_GVK, ctr_name)
    assert ctr_v2_1["spec"]["mlPolicy"]["torch"]["numProcPerNode"] == 4
    gpu_v2_1 = await api.get(TRAINING_RUNTIME_GVK, "torch-gpu", namespace)
    assert gpu_v2_1["spec"]["mlPolicy"]["torch"] == {"numProcPerNode": "auto"}  # v2.1's CRD default
    before = await versions(api, namespace)

    # 1. an untranslatable TrainJob: refused by name and field, nothing written
    done = run_migrate(env_v2_1)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        f'migrate: refused: TrainJob {namespace}/bad: spec.trainer.numProcPerNode: "gpu" (from '
        "spec.trainer.numProcPerNode) cannot be decided statically"
    ) in done.stdout
    assert "nothing was changed" in done.stdout
    assert await versions(api, namespace) == before
    await api.delete(bad)
    before = await versions(api, namespace)

    # 2. --dry-run: the diffs, nothing written
    done = run_migrate(env_v2_1, "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert f"--- TrainJob {namespace}/overrides (v2.1)\n+++ TrainJob {namespace}/overrides (v2.3)\n" in out
    assert "-  podTemplateOverrides:\n" in out and "+  runtimePatches:\n" in out
    assert f"+  - manager: {MANAGER}\n" in out
    assert f"--- TrainJob {namespace}/untouched (v2.1)" not in out
    assert f"--- ClusterTrainingRuntime {ctr_name} (v2.1)" in out
    assert "-      elasticPolicy:\n" in out
    assert "would change; nothing was written" in out
    assert "kubectl apply --server-side -k config/migration/v2.1-to-v2.3" in out
    assert await versions(api, namespace) == before

    # 3. a write over v2.1's CRDs is refused (they would prune runtimePatches)
    done = run_migrate(env_v2_1)
    assert done.returncode == 1
    assert "the installed TrainJob CRD is v2.1's (it prunes spec.runtimePatches)" in done.stdout
    assert await versions(api, namespace) == before

    # 4. the bridge CRDs, as docs/migration.md applies them
    kubectl(env_v2_1, "apply", "--server-side", "--force-conflicts", "-k", str(BRIDGE))

    async def bridge_served() -> bool:
        return await serves(api, namespace, keeps={"podTemplateOverrides", "runtimePatches"}, prunes=set())

    await eventually(bridge_served, message="the bridge TrainJob CRD is not served")
    assert await versions(api, namespace) == before  # a CRD update rewrites no object

    # 4b. a validating webhook that cannot answer (the manager stopped, its configuration left):
    # the server dry run of the first update stops the run, nothing is written
    dead = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "validator.trainer.kubeflow.org"},
        "webhooks": [
            {
                "name": "validator.trainjob.trainer.kubeflow.org",
                "admissionReviewVersions": ["v1"],
                "clientConfig": {
                    "url": "https://127.0.0.1:1/validate-trainer-kubeflow-org-v1alpha1-trainjob"
                },
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "rules": [
                    {
                        "apiGroups": ["trainer.kubeflow.org"],
                        "apiVersions": ["v1alpha1"],
                        "operations": ["UPDATE"],
                        "resources": ["trainjobs"],
                    }
                ],
            }
        ],
    }
    await api.create(dead)
    for args in ((), ("--dry-run",)):  # over the bridge a dry run asks the server too
        done = run_migrate(env_v2_1, *args)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "the API server refuses the update" in done.stdout and "failed calling webhook" in done.stdout
        assert done.stdout.rstrip().endswith("nothing was changed")
        assert await versions(api, namespace) == before
    await api.delete(dead)

    async def updates_admitted() -> bool:
        await api.update(await api.get(TRAINJOB_GVK, "untouched", namespace), dry_run=True)
        return True

    await eventually(updates_admitted, retry_on=(RequestError,), message="the dead webhook is still called")

    # 5. migrate
    done = run_migrate(env_v2_1)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "migrate: wrote 4 TrainJobs, 1 ClusterTrainingRuntime, 1 TrainingRuntime\n" in done.stdout
    after_write = await versions(api, namespace)
    assert after_write["TrainJob/untouched"] == before["TrainJob/untouched"]

    # 6. v2.3's CRDs in place of the bridge
    kubectl(env_v2_1, "apply", "--server-side", "--force-conflicts", "-f", str(V2_3_CRDS))

    async def v2_3_served() -> bool:
        return await serves(api, namespace, keeps={"runtimePatches"}, prunes={"podTemplateOverrides"})

    await eventually(v2_3_served, message="the v2.3 TrainJob CRD is not served")

    # 7. the objects as level v2.3 reads them
    migrated = {tj["metadata"]["name"]: tj for tj in await api.list(TRAINJOB_GVK, namespace=namespace)}
    for tj in migrated.values():
        GO_V2_3.check(copy.deepcopy(tj))  # v2.3.0's typed decoder (Kueue's, the manager's) accepts it
    overrides = migrated["overrides"]
    assert "labels" not in overrides["spec"] and "annotations" not in overrides["spec"]
    [patch] = overrides["spec"]["runtimePatches"]
    assert patch["manager"] == MANAGER
    assert patch["trainingRuntimeSpec"]["template"]["metadata"] == {
        "labels": {"team": "job"},
        "annotations": {"note": "kept"},
    }
    assert [j["name"] for j in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]] == [
        "node",
        "aux",
    ]
    assert overrides["spec"]["trainer"] == {"numNodes": 1, "numProcPerNode": 4}  # the runtime's 4
    assert migrated["cpu"]["spec"]["trainer"] == {"numProcPerNode": 3}
    assert migrated["gpu"]["spec"]["trainer"] == {"numProcPerNode": 2}
    assert migrated["auto"]["spec"]["trainer"] == {}
    assert migrated["untouched"]["spec"] == stored_v2_1["untouched"]["spec"]
    managers = [f["manager"] for f in overrides["metadata"]["managedFields"]]
    assert FIELD_MANAGER in managers
    # the same JobSet as v2.1 built from the runtime as it was
    assert build_jobset(V2_3, overrides, ctr_v2_1) == build_jobset(V2_1, stored_v2_1["overrides"], ctr_v2_1)
    ctr_v2_3 = await api.get(CLUSTER_TRAINING_RUNTIME_GVK, ctr_name)
    assert ctr_v2_3["spec"]["mlPolicy"] == {"torch": {}}
    gpu_v2_3 = await api.get(TRAINING_RUNTIME_GVK, "torch-gpu", namespace)
    assert gpu_v2_3["spec"]["mlPolicy"] == {"numNodes": 1, "torch": {}}
    # v2.3's CEL rules accept a later update (spec.trainer unchanged, the patch kept)
    overrides["spec"]["suspend"] = False
    await api.update(overrides)

    # 8. a second run: nothing to change, nothing written
    before = await versions(api, namespace)
    done = run_migrate(env_v2_1)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "migrate: nothing to change" in done.stdout
    assert "---" not in done.stdout
    assert await versions(api, namespace) == before


# -- the managers' JobSets before and after ---------------------------------------------------------


@pytest.fixture(scope="module")
def env_managers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    with module_control_plane(tmp_path_factory, "migrate-v2.3-managers", [BASES]) as env:
        yield env


def pod_templates(jobset: Json) -> dict[str, Json]:
    return {j["name"]: j["template"]["spec"]["template"] for j in jobset["spec"]["replicatedJobs"]}


def env_value(template: Json, container: str, name: str) -> str | None:
    for c in template["spec"]["containers"]:
        if c["name"] == container:
            for e in c.get("env") or ():
                if e["name"] == name:
                    return str(e.get("value"))
    return None


async def test_the_v2_3_manager_builds_the_jobsets_the_v2_1_manager_built(
    env_managers: Environment, tmp_path: Path
) -> None:
    """What migrate promises, checked with the managers themselves: each suspended TrainJob's
    JobSet as the v2.1 manager built it from the v2.1 objects, then, the JobSets deleted and the
    cluster migrated, as the v2.3 manager builds it from the migrated ones."""
    config = await load_kubeconfig(env_managers.kubeconfig)
    async with Cluster(config, field_owner="test") as cluster:
        api = Client(cluster.transport, cluster.mapper, field_owner="test")
        namespace = f"managers-{uuid.uuid4().hex[:8]}"
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        ctr_name = (await api.create(cluster_runtime()))["metadata"]["name"]
        await api.create(gpu_runtime(namespace))
        gpu_ref = {"name": "torch-gpu", "kind": "TrainingRuntime"}
        names = ["overrides", "cpu", "gpu", "auto", "inherits"]
        await api.create(
            train_job(
                namespace,
                "overrides",
                {"name": ctr_name},
                labels={"team": "job"},
                annotations={"note": "kept"},
                podTemplateOverrides=OVERRIDES,
                trainer={"numNodes": 1},
            )
        )
        for word in ("cpu", "gpu", "auto"):
            await api.create(train_job(namespace, word, gpu_ref, trainer={"numProcPerNode": word}))
        await api.create(train_job(namespace, "inherits", {"name": ctr_name}, trainer={"numNodes": 1}))

        async def jobsets() -> dict[str, Json]:
            found = {j["metadata"]["name"]: j for j in await api.list(JOBSET_GVK, namespace=namespace)}
            assert sorted(found) == sorted(names), sorted(found)
            return found

        async with running_manager(env_managers, tmp_path, args=["--controllers=trainer"]):
            built_v2_1 = await eventually(jobsets, timeout=60, message="the v2.1 manager built no JobSets")
        for jobset in built_v2_1.values():
            await api.delete(jobset)

        async def no_jobsets() -> None:
            assert await api.list(JOBSET_GVK, namespace=namespace) == []

        await eventually(no_jobsets, message="the JobSets are not gone")

        kubectl(env_managers, "apply", "--server-side", "--force-conflicts", "-k", str(BRIDGE))

        async def bridge_served() -> bool:
            return await serves(
                api, namespace, keeps={"podTemplateOverrides", "runtimePatches"}, prunes=set()
            )

        await eventually(bridge_served, message="the bridge TrainJob CRD is not served")
        done = run_migrate(env_managers)
        assert done.returncode == 0, done.stdout + done.stderr
        kubectl(env_managers, "apply", "--server-side", "--force-conflicts", "-f", str(V2_3_CRDS))

        async def v2_3_served() -> bool:
            return await serves(api, namespace, keeps={"runtimePatches"}, prunes={"podTemplateOverrides"})

        await eventually(v2_3_served, message="the v2.3 TrainJob CRD is not served")
        v2_3_dir = tmp_path / "v2.3"
        v2_3_dir.mkdir()
        async with running_manager(
            env_managers, v2_3_dir, args=["--controllers=trainer", "--api-level=v2.3"]
        ):
            built_v2_3 = await eventually(jobsets, timeout=60, message="the v2.3 manager built no JobSets")

    for name in names:
        before, after = built_v2_1[name], built_v2_3[name]
        assert after["metadata"].get("labels") == before["metadata"].get("labels"), name
        assert after["metadata"].get("annotations") == before["metadata"].get("annotations"), name
        templates_before, templates_after = pod_templates(before), pod_templates(after)
        if name == "gpu":  # torchrun's word, then the number of GPUs it stood for
            assert env_value(templates_before["node"], "node", "PET_NPROC_PER_NODE") == "gpu"
            assert env_value(templates_after["node"], "node", "PET_NPROC_PER_NODE") == "2"
            for templates in (templates_before, templates_after):
                for c in templates["node"]["spec"]["containers"]:
                    c["env"] = [e for e in c.get("env") or () if e["name"] != "PET_NPROC_PER_NODE"]
        assert templates_after == templates_before, name
    overridden = pod_templates(built_v2_3["overrides"])
    assert overridden["aux"]["spec"]["serviceAccountName"] == "aux-sa"
    assert overridden["aux"]["spec"]["tolerations"] == [{"key": "aux", "operator": "Exists"}]
    assert overridden["node"]["metadata"]["labels"]["override"] == "one"
    assert {"name": "data", "mountPath": "/data"} in overridden["node"]["spec"]["containers"][0][
        "volumeMounts"
    ]
    assert built_v2_3["overrides"]["metadata"]["labels"]["team"] == "job"
    assert env_value(pod_templates(built_v2_3["inherits"])["node"], "node", "PET_NPROC_PER_NODE") == "4"
    assert env_value(pod_templates(built_v2_3["cpu"])["node"], "node", "PET_NPROC_PER_NODE") == "3"
