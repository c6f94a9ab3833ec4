"""`make run` as a new user runs it: a local cluster, a TrainJob to Complete, a clean stop."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

from manager.client.errors import NotFound
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest.process import free_port, pid_alive
from manager.scheme import GroupVersionKind
from manager.testing import eventually

ROOT = Path(__file__).resolve().parents[3]
TRAINJOB = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainJob")


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
                status = (await client.get(TRAINJOB, "mnist", "default")).get("status") or {}
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
