"""`make run` as a new user runs it: a local cluster, a TrainJob to Complete, a clean stop; and at
API level v2.3 (`make cluster-up LEVEL=v2.3`, then `make run LEVEL=v2.3` on that cluster)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from manager.client.errors import NotFound, TransportError
from manager.client.interfaces import Reader
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest.process import free_port, pid_alive
from manager.meta.object import Json
from manager.scheme import GroupVersionKind
from manager.testing import eventually
from trainer import levels

ROOT = Path(__file__).resolve().parents[3]
TRAINJOB = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainJob")
CRD = GroupVersionKind("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")


class RunEnded(Exception):
    """`make run` ended while the test still needed it (not retried: its log says why)."""


def log_tail(log: Path) -> str:
    return log.read_text()[-6000:]


async def status_of(client: Reader, name: str, run: asyncio.subprocess.Process, log: Path) -> Json:
    """The TrainJob's status; a `make run` that ended, or whose cluster is gone, ends the wait
    with its log instead of a bare connection error."""
    if run.returncode is not None:
        raise RunEnded(f"make run exited with {run.returncode}:\n{log_tail(log)}")
    try:
        trainjob = await client.get(TRAINJOB, name, "default")
    except TransportError as err:
        raise RunEnded(f"the local cluster went away ({err}); make run's log:\n{log_tail(log)}") from err
    return trainjob.get("status") or {}


async def test_make_run_trains_a_job_and_stops_clean(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        run = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "trainer.local_run",
            "--dir",
            str(directory),
            # free ports: another `make run` on this machine holds the defaults
            *(f"--{name}-port={free_port()}" for name in ("webhook", "metrics", "health")),
            cwd=ROOT,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
        )
    try:

        async def ready() -> None:
            assert run.returncode is None, log.read_text()
            assert "cluster ready" in log.read_text()

        await eventually(ready, timeout=180, message="make run never reported a ready cluster")
        state = (directory / "envtest.json").read_text()
        async with Cluster(await load_kubeconfig(directory / "kubeconfig")) as cluster:
            client = cluster.api_reader
            trainjob = {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": "mnist", "namespace": "default"},
                "spec": {
                    "runtimeRef": {"name": "torch-distributed"},
                    "trainer": {"numNodes": 2, "command": ["torchrun", "train.py"]},
                },
            }

            async def created() -> None:
                # The webhooks answer once the manager is up; until then creation is refused.
                try:
                    await client.get(TRAINJOB, "mnist", "default")
                except NotFound:
                    await client.create(trainjob)

            await eventually(created, timeout=120, retry_on=(Exception,))

            async def complete() -> None:
                status = await status_of(client, "mnist", run, log)
                conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
                assert conditions.get("Complete") == "True", status

            await eventually(complete, timeout=180, message="the TrainJob never completed")
    finally:
        if run.returncode is None:
            run.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(run.wait(), 120)
    output = log.read_text()
    assert code == 0, output
    assert "local cluster stopped" in output
    pids = [p["pid"] for p in json.loads(state)["processes"]]
    assert not [p for p in pids if pid_alive(p)], "make run left control-plane processes behind"
    assert not directory.exists()


async def _make(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        "make",
        "-s",
        "--no-print-directory",
        *args,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out = (await proc.communicate())[0].decode()
    return int(proc.returncode or 0), out


async def test_make_cluster_up_and_run_at_level_v2_3_install_and_run_that_level(tmp_path: Path) -> None:
    """`make cluster-up LEVEL=v2.3` starts the cluster with v2.3's CRDs; `make run LEVEL=v2.3`
    reuses it, installs the level's objects and runs the manager at v2.3 (a TrainJob with a
    runtimePatch completes on the shipped torch-distributed runtime); the cluster outlives it."""
    directory = tmp_path / "cluster"
    code, out = await _make("cluster-up", f"LOCAL_DIR={directory}", "LEVEL=v2.3")
    assert code == 0, out
    try:
        async with Cluster(await load_kubeconfig(directory / "kubeconfig")) as cluster:
            client = cluster.api_reader
            crd = await client.get(CRD, "trainjobs.trainer.kubeflow.org")
            assert levels.of_trainjob_crd(crd) is levels.get("v2.3")
            log = tmp_path / "run.log"
            with log.open("wb") as sink:
                run = await asyncio.create_subprocess_exec(
                    "make",
                    "-s",
                    "run",
                    f"LOCAL_DIR={directory}",
                    "LEVEL=v2.3",
                    *(f"{name}_PORT={free_port()}" for name in ("WEBHOOK", "METRICS", "HEALTH")),
                    cwd=ROOT,
                    stdout=sink,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                )
            try:

                async def ready() -> None:
                    assert run.returncode is None, log.read_text()
                    assert "cluster ready" in log.read_text()

                await eventually(
                    ready, timeout=180, message="make run LEVEL=v2.3 never reported a ready cluster"
                )
                assert f"reusing the local cluster in {directory}" in log.read_text()
                public = await client.get(CONFIGMAP, "kubeflow-trainer-public", "kubeflow-system")
                assert public["data"] == {"kubeflow_trainer_version": "v2.3.0"}
                trainjob = {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "metadata": {"name": "patched", "namespace": "default"},
                    "spec": {
                        "runtimeRef": {"name": "torch-distributed"},
                        "trainer": {"numNodes": 2, "command": ["torchrun", "train.py"]},
                        "runtimePatches": [{"manager": "example.com/user"}],
                    },
                }

                async def created() -> None:
                    try:
                        await client.get(TRAINJOB, "patched", "default")
                    except NotFound:
                        await client.create(trainjob)

                await eventually(created, timeout=120, retry_on=(Exception,))
                stored = await client.get(TRAINJOB, "patched", "default")
                # only a v2.3 manager serves the defaulter that stamps the patch's time
                assert stored["spec"]["runtimePatches"][0]["time"].endswith("Z"), stored["spec"]

                async def complete() -> None:
                    status = await status_of(client, "patched", run, log)
                    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
                    assert conditions.get("Complete") == "True", status

                await eventually(complete, timeout=180, message="the TrainJob never completed")
            finally:
                if run.returncode is None:
                    os.killpg(run.pid, signal.SIGINT)  # Ctrl-C
                code = await asyncio.wait_for(run.wait(), 120)
            # make, interrupted with its job, ends by the signal once `make run` has stopped cleanly
            output = log.read_text()
            assert code in (0, -signal.SIGINT), output
            assert "removed the webhook configurations registered by this run" in output, output
            assert "Traceback" not in output, output
            # the cluster `make cluster-up` started is still there
            await client.get(CRD, "trainjobs.trainer.kubeflow.org")
    finally:
        code, out = await _make("cluster-down", f"LOCAL_DIR={directory}")
        assert code == 0, out
