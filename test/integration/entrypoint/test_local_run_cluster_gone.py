"""`make run` whose cluster (or its kubeconfig) is gone before Ctrl-C: one line says that the
webhook configurations it registered could not be removed, and why; no traceback; exit code 3
(``trainer.local_run``'s documented code for exactly that).

`make run` runs as a user runs it with ``KUBECONFIG`` set (``python -m trainer.local_run``,
webhooks registered at 127.0.0.1) against a control plane of its own (etcd + kube-apiserver,
``manager.envtest.Environment``). Once the manager is ready, either the control plane is
stopped (the kubeconfig stays, nothing answers at its address) or the kubeconfig is deleted (the
cluster stays, with the configurations still in it); then Ctrl-C (SIGINT to its process group).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
from pathlib import Path

import aiohttp
import pytest

from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.envtest.process import free_port
from manager.scheme import GroupVersionKind
from manager.testing import eventually
from trainer import install, local_run

ROOT = Path(__file__).resolve().parents[3]
VALIDATING = GroupVersionKind("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration")


@pytest.mark.parametrize("gone", ["cluster", "kubeconfig"])
async def test_make_run_says_in_one_line_that_its_webhooks_could_not_be_removed(
    tmp_path: Path, gone: str
) -> None:
    env = Environment(tmp_path / "cluster")
    await env.start()
    try:
        kubeconfig = tmp_path / "kubeconfig"  # the user's copy; stopping the cluster keeps it
        shutil.copy(env.kubeconfig, kubeconfig)
        health = free_port()
        log = tmp_path / "make-run.log"
        with log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "trainer.local_run",
                f"--dir={tmp_path / 'state'}",
                "--webhook-host=127.0.0.1",
                f"--webhook-port={free_port()}",
                f"--metrics-port={free_port()}",
                f"--health-port={health}",
                cwd=ROOT,
                env={**os.environ, "KUBECONFIG": str(kubeconfig)},
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,  # its own process group, as a terminal's foreground job
            )
        try:
            async with aiohttp.ClientSession() as http:

                async def ready() -> None:
                    assert proc.returncode is None, log.read_text()[-3000:]
                    async with http.get(f"http://127.0.0.1:{health}/readyz") as answer:
                        assert answer.status == 200

                await eventually(ready, timeout=120, retry_on=(AssertionError, aiohttp.ClientError))
            assert "webhooks registered at https://127.0.0.1:" in log.read_text()
            if gone == "cluster":
                await env.stop()
            else:
                kubeconfig.unlink()
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
            try:
                code = await asyncio.wait_for(proc.wait(), 120)
            except TimeoutError:
                pytest.fail(f"make run did not exit within 120 s of Ctrl-C:\n{log.read_text()[-6000:]}")
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        output = log.read_text()
        assert code == local_run.EXIT_WEBHOOKS_LEFT == 3, output[-3000:]
        said = [line for line in output.splitlines() if "could not remove the webhook configurations" in line]
        assert len(said) == 1, output[-3000:]
        _crds, _objects, hooks = install.split(install.render())
        for hook in hooks:  # names every configuration it registered
            assert hook["metadata"]["name"] in said[0], said[0]
        why = "does not answer (ConnectionRefusedError" if gone == "cluster" else "is gone"
        assert why in said[0], said[0]
        assert said[0] == output.strip().splitlines()[-1], output[-3000:]  # the last word
        assert "Traceback" not in output, output[-5000:]
        if gone == "kubeconfig":  # what the line says: they are still there
            async with Cluster(await load_kubeconfig(env.kubeconfig)) as cluster:
                await cluster.api_reader.get(VALIDATING, "validator.trainer.kubeflow.org")
    finally:
        await env.stop()
