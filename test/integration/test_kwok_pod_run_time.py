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


def _probed_job(name: str, delay: int) -> dict[str, object]:
    job = _job(name)
    probe = {"tcpSocket": {"port": 2222}, "initialDelaySeconds": delay}
    job["spec"]["template"]["spec"]["containers"][0]["readinessProbe"] = probe  # type: ignore[index]
    return job


async def _pod_state(env: Environment, job: str) -> tuple[str | None, str | None]:
    status, body = await env.request("GET", f"/api/v1/namespaces/default/pods?labelSelector=job-name%3D{job}")
    assert status == 200, body
    items = body.get("items") or []
    if not items:
        return None, None
    pod_status = items[0].get("status", {})
    ready = next((c["status"] for c in pod_status.get("conditions", []) if c["type"] == "Ready"), None)
    return pod_status.get("phase"), ready


async def test_pods_start_late_and_probed_pods_are_ready_after_the_probe_delay(tmp_path: Path) -> None:
    start, probe_delay, run = 2.0, 4, 2.0
    async with Environment(
        tmp_path / "cluster",
        full=True,
        nodes=1,
        pod_run_seconds=run,
        pod_start_seconds=start,
        pod_probe_delays=True,
    ) as env:
        for job in (_job("plain"), _probed_job("probed", probe_delay)):
            status, body = await env.request("POST", "/apis/batch/v1/namespaces/default/jobs", job)
            assert status == 201, body
        created = time.monotonic()
        seen: dict[tuple[str, str | None, str | None], float] = {}
        deadline = created + 60
        while time.monotonic() < deadline and ("probed", "Succeeded", "True") not in seen:
            for name in ("plain", "probed"):
                phase, ready = await _pod_state(env, name)
                seen.setdefault((name, phase, ready), time.monotonic() - created)
            await asyncio.sleep(0.2)
        # Both are Pending (scheduled, not started) for the start time.
        assert ("plain", "Pending", None) in seen and ("probed", "Pending", None) in seen, seen
        # The unprobed pod runs Ready at once, the probed one starts Running but not Ready ...
        assert start - 1 <= seen[("plain", "Running", "True")] <= start + 4, seen
        assert ("probed", "Running", "False") in seen, seen
        assert ("plain", "Running", "False") not in seen, seen
        # ... is Ready after its probe's initial delay, and succeeds the run time after that.
        ready_at = seen[("probed", "Running", "True")]
        assert start + probe_delay - 1 <= ready_at <= start + probe_delay + 4, seen
        assert run - 1 <= seen[("probed", "Succeeded", "True")] - ready_at <= run + 4, seen
        assert seen[("plain", "Succeeded", "True")] < ready_at, seen
