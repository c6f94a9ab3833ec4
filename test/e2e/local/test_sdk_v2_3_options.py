"""PyPI's ``kubeflow`` SDK (0.5.0, unchanged, in its own virtualenv) against `make run LEVEL=v2.3`.

`make run` starts a full local cluster (KWOK runs the pods) with the manager at API level v2.3.
The SDK's ``TrainerClient().train()`` creates two TrainJobs on the shipped runtime
``torch-distributed`` with every option of ``kubeflow.trainer.options`` that applies to a
cluster:

* ``sdk-options`` (``CustomTrainerContainer``): ``Name``, ``Labels``, ``Annotations``,
  ``TrainerCommand``, ``TrainerArgs`` and a ``RuntimePatch`` with every part the SDK offers
  (JobSet, Job and Pod template metadata; the pod spec's service account, node selector,
  affinity, tolerations, volumes, image pull secrets, security context; a container's env,
  volume mounts and security context; its env is refused for the trainer container, as Trainer
  v2.3.0 refuses it: envs go through ``trainer.env``, which the SDK's trainer sets). Each is seen where it takes effect: the stored TrainJob,
  the JobSet, the Jobs, the Pods (on the one KWOK node the selector and the taint allow), and the
  TrainJob Complete.
* ``sdk-deadline`` (``CustomTrainer`` with a function): ``ActiveDeadlineSeconds`` and a
  ``RuntimePatch`` with a scheduling gate, so its pod waits and the TrainJob fails with reason
  ``DeadlineExceeded`` after the deadline.

The SDK's version lookup (``KubernetesBackend.verify_backend``) reads the ConfigMap
``kubeflow-trainer-public`` that `make run LEVEL=v2.3` installs: the script records every log
record at WARNING and above and every Python warning, and none may be there. Not applicable
outside a cluster, so not used: ``ContainerPatch`` in ``init_containers`` (the shipped runtime
has no init container to patch; upstream refuses a patch naming none).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from manager.client import Client
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest.process import free_port
from manager.scheme import GroupVersionKind
from manager.testing import eventually

ROOT = Path(__file__).resolve().parents[3]
SDK_VERSION = "0.5.0"
TRAINJOB = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainJob")
JOBSET = GroupVersionKind("jobset.x-k8s.io", "v1alpha2", "JobSet")
JOB = GroupVersionKind("batch", "v1", "Job")
POD = GroupVersionKind("", "v1", "Pod")
NODE = GroupVersionKind("", "v1", "Node")
SA = GroupVersionKind("", "v1", "ServiceAccount")
NS = GroupVersionKind("", "v1", "Namespace")
SDK_MANAGER = "trainer.kubeflow.org/kubeflow-sdk"
POOL = "example.com/pool"
TAINT = "example.com/dedicated"
DEADLINE = 60
"""sdk-deadline's activeDeadlineSeconds: long enough to see its gated pod first."""
Json = dict[str, Any]

SDK_SCRIPT = r"""
import json, logging, os, sys, warnings

logged = []


class Keep(logging.Handler):
    def emit(self, record):
        logged.append(f"{record.levelname} {record.name}: {record.getMessage()}")


logging.basicConfig(level=logging.WARNING, handlers=[Keep()], force=True)
# the SDK's imports warn of its own dependencies (pydantic's deprecations): not recorded
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import CustomTrainer, CustomTrainerContainer, TrainerClient
from kubeflow.trainer.options import (
    ActiveDeadlineSeconds, Annotations, ContainerPatch, JobSetSpecPatch, JobSetTemplatePatch,
    JobSpecPatch, JobTemplatePatch, Labels, Name, PodSpecPatch, PodTemplatePatch,
    ReplicatedJobPatch, RuntimePatch, TrainerArgs, TrainerCommand, TrainingRuntimeSpecPatch,
)

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    namespace, pool, taint, DEADLINE = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    client = TrainerClient(backend_config=KubernetesBackendConfig(namespace=namespace))

    def node_patch(pod_spec):
        return RuntimePatch(
            training_runtime_spec=TrainingRuntimeSpecPatch(
                template=JobSetTemplatePatch(
                    metadata={"labels": {"sdk-jobset": "js"}, "annotations": {"example.com/jobset": "js"}},
                    spec=JobSetSpecPatch(
                        replicated_jobs=[
                            ReplicatedJobPatch(
                                name="node",
                                template=JobTemplatePatch(
                                    metadata={"labels": {"sdk-job": "job"}, "annotations": {"example.com/job": "job"}},
                                    spec=JobSpecPatch(
                                        template=PodTemplatePatch(
                                            metadata={"labels": {"sdk-pod": "pod"}, "annotations": {"example.com/pod": "pod"}},
                                            spec=pod_spec,
                                        )
                                    ),
                                ),
                            )
                        ]
                    ),
                )
            )
        )

    full = node_patch(
        PodSpecPatch(
            service_account_name="sdk-trainer",
            node_selector={pool: "sdk"},
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "type", "operator": "In", "values": ["kwok"]}]}
                        ]
                    }
                }
            },
            tolerations=[{"key": taint, "operator": "Equal", "value": "sdk", "effect": "NoSchedule"}],
            volumes=[{"name": "scratch", "emptyDir": {}}],
            image_pull_secrets=[{"name": "registry-credentials"}],
            security_context={"runAsNonRoot": True, "runAsUser": 1000},
            containers=[
                ContainerPatch(
                    name="node",
                    volume_mounts=[{"name": "scratch", "mountPath": "/scratch"}],
                    security_context={"allowPrivilegeEscalation": False},
                )
            ],
        )
    )
    first = client.train(
        runtime="torch-distributed",
        trainer=CustomTrainerContainer(
            image="example.com/train:v1", num_nodes=2, env={"SDK_ENV": "from-trainer"}
        ),
        options=[
            Name("sdk-options"),
            Labels({"team": "research"}),
            Annotations({"example.com/owner": "alice"}),
            TrainerCommand(["python", "train.py"]),
            TrainerArgs(["--epochs", "3"]),
            full,
        ],
    )

    def train():
        print("training")

    second = client.train(
        runtime="torch-distributed",
        trainer=CustomTrainer(func=train, num_nodes=1),
        options=[
            Name("sdk-deadline"),
            ActiveDeadlineSeconds(DEADLINE),
            node_patch(PodSpecPatch(scheduling_gates=[{"name": "example.com/hold"}])),
        ],
    )
    names = [first, second]

    # a ContainerPatch's env on the trainer container is refused (Trainer v2.3.0's JobSet plugin:
    # envs go through trainer.env); the SDK raises, with the API server's answer as the cause
    try:
        client.train(
            runtime="torch-distributed",
            trainer=CustomTrainerContainer(image="example.com/train:v1"),
            options=[
                Name("sdk-env-patch"),
                node_patch(PodSpecPatch(containers=[ContainerPatch(name="node", env=[{"name": "A", "value": "1"}])])),
            ],
        )
        refused = None
    except RuntimeError as err:
        refused = f"{err}: {getattr(err.__cause__, 'status', None)} {getattr(err.__cause__, 'body', '')}"
    job = client.get_job(first)

# the control: looked up in a namespace without the ConfigMap, the SDK warns (and is recorded)
found = list(logged)
os.environ["KUBEFLOW_SYSTEM_NAMESPACE"] = "no-trainer-here"
TrainerClient(backend_config=KubernetesBackendConfig(namespace=namespace))
control = logged[len(found):]
logged = found

print(json.dumps({
    "control": control,
    "names": names,
    "runtime": job.runtime.name,
    "refused": refused,
    "logged": logged,
    "warnings": [f"{w.category.__name__}: {w.message}" for w in caught],
}))
"""


@pytest.fixture(scope="module")
def sdk_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv with PyPI's ``kubeflow`` SDK (its own dependency set)."""
    venv = tmp_path_factory.mktemp("kubeflow-sdk") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"kubeflow=={SDK_VERSION}"], check=True, timeout=600
    )
    return python


@pytest.fixture
async def make_run_v2_3(tmp_path: Path) -> AsyncIterator[tuple[Client, Path]]:
    """`make run LEVEL=v2.3` on a local cluster of its own, ready; stopped (exit 0) after."""
    directory = tmp_path / "cluster"
    log = tmp_path / "run.log"
    health = free_port()
    with log.open("wb") as out:
        run = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "trainer.local_run",
            "--dir",
            str(directory),
            "--level",
            "v2.3",
            f"--health-port={health}",
            *(f"--{name}-port={free_port()}" for name in ("webhook", "metrics")),
            cwd=ROOT,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
        )
    try:
        async with aiohttp.ClientSession() as http:

            async def ready() -> None:
                assert run.returncode is None, log.read_text()[-3000:]
                async with http.get(f"http://127.0.0.1:{health}/readyz") as answer:
                    assert answer.status == 200

            await eventually(
                ready,
                timeout=240,
                retry_on=(AssertionError, aiohttp.ClientError),
                message="make run not ready",
            )
        async with Cluster(await load_kubeconfig(directory / "kubeconfig"), field_owner="user") as cluster:
            yield cluster.api_reader, directory / "kubeconfig"
    finally:
        if run.returncode is None:
            run.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(run.wait(), 120)
    assert code == 0, log.read_text()[-3000:]


def by_name(items: list[Json]) -> dict[str, Json]:
    return {i["metadata"]["name"]: i for i in items}


def condition(obj: Json, kind: str) -> Json | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


async def test_the_pypi_sdk_trains_with_every_cluster_option_at_v2_3(
    make_run_v2_3: tuple[Client, Path], sdk_python: Path, tmp_path: Path
) -> None:
    client, kubeconfig = make_run_v2_3
    ns = "sdk-v23"
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await client.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sdk-trainer", "namespace": ns}}
    )
    # one node the SDK's selector and toleration allow; the other lacks both
    nodes = sorted(by_name((await client.list_raw(NODE, label_selector="type=kwok"))[0]))
    assert len(nodes) >= 2, nodes
    chosen = nodes[-1]
    node = await client.get(NODE, chosen)
    node["metadata"]["labels"][POOL] = "sdk"
    node["spec"]["taints"] = [
        *(node["spec"].get("taints") or []),
        {"key": TAINT, "value": "sdk", "effect": "NoSchedule"},
    ]
    await client.update(node)

    script = tmp_path / "sdk_train.py"
    script.write_text(SDK_SCRIPT)
    done = await asyncio.to_thread(
        subprocess.run,
        [str(sdk_python), str(script), ns, POOL, TAINT, str(DEADLINE)],
        env={"PATH": "/usr/bin:/bin", "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["names"] == ["sdk-options", "sdk-deadline"]
    assert said["runtime"] == "torch-distributed"
    refused = said["refused"] or ""
    assert refused.startswith("Failed to create TrainJob: sdk-v23/sdk-env-patch: 403 "), refused
    assert "must not have envs for the dataset-initializer, model-initializer, node containers" in refused
    # the version lookup found kubeflow-trainer-public: nothing warned (where it cannot, it does)
    (control,) = said["control"]
    assert control.startswith(
        "WARNING kubeflow.trainer.backends.kubernetes.backend: Trainer control-plane "
        "version info is not available"
    ), control
    assert "'kubeflow-trainer-public' in namespace 'no-trainer-here'" in control, control
    assert said["logged"] == [], said["logged"]
    assert said["warnings"] == [], said["warnings"]

    await check_gated_pod(client, ns)
    await check_options_job(client, ns, chosen)
    await check_deadline_job(client, ns)


async def check_options_job(client: Client, ns: str, chosen: str) -> None:
    tj = await client.get(TRAINJOB, "sdk-options", ns)
    assert tj["metadata"]["labels"] == {"team": "research"}
    assert tj["metadata"]["annotations"] == {"example.com/owner": "alice"}
    trainer = tj["spec"]["trainer"]
    assert trainer["command"] == ["python", "train.py"]
    assert trainer["args"] == ["--epochs", "3"]
    assert trainer["image"] == "example.com/train:v1"
    assert trainer["numNodes"] == 2
    assert trainer["env"] == [{"name": "SDK_ENV", "value": "from-trainer"}]
    (patch,) = tj["spec"]["runtimePatches"]
    assert patch["manager"] == SDK_MANAGER
    assert patch["time"].endswith("Z"), patch  # the v2.3 defaulter stamped it

    jobset = await client.get(JOBSET, "sdk-options", ns)
    assert jobset["metadata"]["labels"]["sdk-jobset"] == "js"
    assert jobset["metadata"]["annotations"]["example.com/jobset"] == "js"
    (node_rjob,) = [r for r in jobset["spec"]["replicatedJobs"] if r["name"] == "node"]
    assert node_rjob["template"]["metadata"]["labels"]["sdk-job"] == "job"
    pod_template = node_rjob["template"]["spec"]["template"]
    assert pod_template["metadata"]["labels"]["sdk-pod"] == "pod"
    assert pod_template["spec"]["serviceAccountName"] == "sdk-trainer"

    async def two_pods_done() -> list[Json]:
        pods = (
            await client.list_raw(
                POD, namespace=ns, label_selector="jobset.sigs.k8s.io/jobset-name=sdk-options"
            )
        )[0]
        assert len(pods) == 2, [p["metadata"]["name"] for p in pods]
        assert all(p["spec"].get("nodeName") for p in pods), [p.get("status") for p in pods]
        return pods

    pods = await eventually(
        two_pods_done, timeout=120, message="sdk-options never had its two pods scheduled"
    )
    for pod in pods:
        meta, spec = pod["metadata"], pod["spec"]
        assert meta["labels"]["sdk-pod"] == "pod"
        assert meta["annotations"]["example.com/pod"] == "pod"
        assert spec["nodeName"] == chosen  # node selector + toleration: the one node allowed
        assert spec["nodeSelector"] == {POOL: "sdk"}
        assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "type", "operator": "In", "values": ["kwok"]}]}
            ]
        }
        assert {"key": TAINT, "operator": "Equal", "value": "sdk", "effect": "NoSchedule"} in spec[
            "tolerations"
        ]
        assert spec["serviceAccountName"] == "sdk-trainer"
        assert {"name": "scratch", "emptyDir": {}} in spec["volumes"]
        assert spec["imagePullSecrets"] == [{"name": "registry-credentials"}]
        assert spec["securityContext"] == {"runAsNonRoot": True, "runAsUser": 1000}
        (container,) = [c for c in spec["containers"] if c["name"] == "node"]
        assert container["image"] == "example.com/train:v1"
        assert container["command"] == ["python", "train.py"]
        assert container["args"] == ["--epochs", "3"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["SDK_ENV"] == "from-trainer"
        assert {"name": "scratch", "mountPath": "/scratch"} in container["volumeMounts"]
        assert container["securityContext"] == {"allowPrivilegeEscalation": False}
    jobs = (
        await client.list_raw(JOB, namespace=ns, label_selector="jobset.sigs.k8s.io/jobset-name=sdk-options")
    )[0]
    assert jobs and all(j["metadata"]["labels"]["sdk-job"] == "job" for j in jobs)
    assert all(j["metadata"]["annotations"]["example.com/job"] == "job" for j in jobs)

    async def complete() -> None:
        status = (await client.get(TRAINJOB, "sdk-options", ns)).get("status") or {}
        done = condition({"status": status}, "Complete")
        assert done is not None and done["status"] == "True", status

    await eventually(complete, timeout=180, message="sdk-options never completed")


async def check_gated_pod(client: Client, ns: str) -> None:
    """sdk-deadline's pod carries the SDK's scheduling gate and so waits, unscheduled."""

    async def gated() -> Json:
        pods = (
            await client.list_raw(
                POD, namespace=ns, label_selector="jobset.sigs.k8s.io/jobset-name=sdk-deadline"
            )
        )[0]
        assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
        return pods[0]

    pod = await eventually(gated, timeout=DEADLINE - 5, message="sdk-deadline's pod was not created in time")
    assert pod["spec"]["schedulingGates"] == [{"name": "example.com/hold"}]
    assert pod["metadata"]["labels"]["sdk-pod"] == "pod"
    assert not pod["spec"].get("nodeName")
    assert pod["status"]["phase"] == "Pending"


async def check_deadline_job(client: Client, ns: str) -> None:
    tj = await client.get(TRAINJOB, "sdk-deadline", ns)
    assert tj["spec"]["activeDeadlineSeconds"] == DEADLINE
    assert tj["spec"]["trainer"]["numNodes"] == 1
    command = " ".join(tj["spec"]["trainer"]["command"])
    assert "def train():" in command and "torchrun" in command, command  # CustomTrainer's function

    async def failed_by_deadline() -> Json:
        current = await client.get(TRAINJOB, "sdk-deadline", ns)
        failed = condition(current, "Failed")
        assert failed is not None and failed["status"] == "True", current.get("status")
        return failed

    failed = await eventually(
        failed_by_deadline, timeout=DEADLINE + 60, message="sdk-deadline never hit its deadline"
    )
    assert failed["reason"] == "DeadlineExceeded"
    assert failed["message"] == "TrainJob exceeded its active deadline"
    # not before the deadline: metav1.Time has whole seconds
    created = datetime.datetime.fromisoformat(tj["metadata"]["creationTimestamp"])
    failed_at = datetime.datetime.fromisoformat(failed["lastTransitionTime"])
    assert (failed_at - created).total_seconds() >= DEADLINE - 1, (created, failed_at)
