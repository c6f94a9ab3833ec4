"""KWOK's pod run time in a full local cluster: a Job's pod stays Running for the asked time."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from manager.envtest import Environment


def _job(name: str) -> dict[str, object]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
            }
        },
    }


async def _pod_phase(env: Environment, job: str) -> str | None:
    status, body = await env.request("GET", f"/api/v1/namespaces/default/pods?labelSelector=job-name%3D{job}")
    assert status == 200, body
    items = body.get("items") or []
    return items[0].get("status", {}).get("phase") if items else None


async def test_job_pod_runs_for_the_configured_time_then_succeeds(tmp_path: Path) -> None:
    run_seconds = 6.0
    async with Environment(tmp_path / "cluster", full=True, nodes=1, pod_run_seconds=run_seconds) as env:
        status, body = await env.request("POST", "/apis/batch/v1/namespaces/default/jobs", _job("slow"))
        assert status == 201, body
        running_at = succeeded_at = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and succeeded_at is None:
            phase = await _pod_phase(env, "slow")
            if phase == "Running" and running_at is None:
                running_at = time.monotonic()
            if phase == "Succeeded":
                succeeded_at = time.monotonic()
            await asyncio.sleep(0.2)
        assert running_at is not None, "the pod was never seen Running"
        assert succeeded_at is not None, "the pod did not succeed within 60s"
        # Seen Running at most a poll late; KWOK finishes it run_seconds after it became Running.
        assert run_seconds - 1.0 <= succeeded_at - running_at <= run_seconds + 4.0
