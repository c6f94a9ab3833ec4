"""`python -m trainer` logs through one pipeline: zap's JSON keys from every module, one level.

A Job create refused because its namespace is being terminated (403 Forbidden) is the routine
API error the JobSet controller hits most: it must log one line, with no Python traceback.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from trainer_process import running_manager

from manager.envtest import Environment
from manager.envtest.process import free_port
from manager.testing import eventually

ROOT = Path(__file__).resolve().parents[3]
ZAP_KEYS = ("level", "ts", "caller", "msg")


async def _terminating_namespace_with_a_jobset(env: Environment) -> str:
    """A JobSet in a namespace being terminated: every Job create is refused with 403 Forbidden.

    This control plane runs no namespace controller, so the namespace stays Terminating; the
    JobSet is deleted by the caller afterwards (the namespace then stays, empty).
    """
    namespace = f"t-terminating-{uuid.uuid4().hex[:8]}"
    status, body = await env.request(
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
    )
    assert status == 201, body
    job = {
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "command": ["true"]}],
            }
        }
    }
    status, body = await env.request(
        "POST",
        f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets",
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "refused"},
            "spec": {"replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": job}}]},
        },
    )
    assert status == 201, body
    status, body = await env.request("DELETE", f"/api/v1/namespaces/{namespace}")
    assert status == 200, body
    status, body = await env.request("GET", f"/api/v1/namespaces/{namespace}")
    assert body["status"]["phase"] == "Terminating", body
    return namespace


def _entries(text: str) -> list[dict[str, Any]]:
    entries = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise AssertionError(f"not a JSON line: {line!r}") from err
    return entries


async def _run_manager(
    env: Environment, tmp_path: Path, *flags: str
) -> tuple[list[dict[str, Any]], str, str]:
    """Start the manager, wait for readiness and the JobSet controller's refused create, stop it."""
    namespace = await _terminating_namespace_with_a_jobset(env)
    config = {"metrics": {"bindAddress": f"127.0.0.1:{free_port()}"}}
    try:
        async with running_manager(
            env, tmp_path, config, args=flags, ready_timeout=90, log_format=None
        ) as manager:

            def refused() -> None:
                text = manager.log_path.read_text()
                assert any(
                    e.get("msg") == "Reconciler error" and e.get("namespace") == namespace
                    for e in _entries(text)
                ), text[-3000:]

            await eventually(refused, timeout=60, message="the refused Job create was never logged")
    finally:
        await env.request("DELETE", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets/refused")
    output = manager.log_path.read_text()
    assert manager.proc.returncode == 0, output[-4000:]
    return _entries(output), output, namespace


def _refusals(entries: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    return [e for e in entries if e.get("msg") == "Reconciler error" and e.get("namespace") == namespace]


async def test_debug_json_lines_carry_zaps_keys_from_every_module(
    control_plane: Environment, tmp_path: Path
) -> None:
    entries, output, namespace = await _run_manager(
        control_plane, tmp_path, "--zap-log-level=debug", "--zap-encoder=json"
    )
    for entry in entries:
        assert all(key in entry for key in ZAP_KEYS), entry
        assert entry["level"] in ("debug", "info", "warn", "error"), entry
    loggers = {e.get("logger") for e in entries}
    # stdlib-logging modules (the reflector, the webhook server) and structlog modules alike
    reflector = [e for e in entries if e.get("logger") == "manager.cache.reflector"]
    assert any(
        e["msg"] == "Caches populated" and e["type"] == "jobset.x-k8s.io/v1alpha2, Kind=JobSet"
        for e in reflector
    )
    assert all(e["caller"].startswith("manager/cache/reflector.py:") for e in reflector)
    assert any(
        e.get("logger") == "manager.webhook.server" and e["msg"].startswith("webhook server listening")
        for e in entries
    ), sorted(map(str, loggers))
    (serving,) = [e for e in entries if e["msg"] == "Serving metrics server"]
    assert serving["secure"] is True, "metrics.secureServing defaults to true"
    jobset = [e for e in entries if e.get("controller") == "jobset"]
    assert any(e["msg"] == "Starting workers" for e in jobset)
    assert any(e["level"] == "debug" for e in entries), "debug lines are shown"

    refusals = _refusals(entries, namespace)
    assert refusals, output[-3000:]
    first = refusals[0]
    assert first["controller"] == "jobset" and first["name"] == "refused" and first["reconcileID"]
    assert first["error_type"] == "JobCreationError(Forbidden)"
    assert 'job "refused-workers-0" creation failed' in first["error"]
    assert "stacktrace" not in first
    assert "Traceback" not in output, "a routine API error logs no Python traceback"


async def test_error_level_silences_info_from_every_module(
    control_plane: Environment, tmp_path: Path
) -> None:
    entries, output, namespace = await _run_manager(control_plane, tmp_path, "--zap-log-level=error")
    assert entries, "errors are still logged"
    assert {e["level"] for e in entries} == {"error"}, output[-3000:]
    assert _refusals(entries, namespace)
    assert "Traceback" not in output
