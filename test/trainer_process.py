"""The product (`python -m trainer`) as a subprocess for integration and e2e tests.

``running_manager`` writes a Configuration (probes, webhooks on free ports of 127.0.0.1, cert
management off, a serving certificate in the temporary directory), starts the manager, waits
until its ``/readyz`` answers 200 and, on exit, stops it with SIGTERM and asserts it exited 0
(the log's tail in the message). ``shipped_webhooks`` installs the shipped webhook
configurations, pointed at that manager and limited to one namespace, waits until the API
server calls them (``webhook_probes``), and deletes them after.

Importable by its module name from every test: ``test/`` is on ``sys.path`` (rootdir conftest).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import signal
import ssl
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from manager.envtest import Environment
from manager.envtest.certs import TinyCA
from manager.envtest.process import free_port
from manager.testing import eventually
from trainer.conformance.webhook_probes import wait_webhooks_effective

ROOT = Path(__file__).resolve().parents[1]
Json = dict[str, Any]


@dataclass
class RunningManager:
    proc: asyncio.subprocess.Process
    config: Json
    health: str  # host:port of the probes
    webhook_port: int
    ca: TinyCA  # signed the webhook serving certificate
    log_path: Path
    http: aiohttp.ClientSession

    async def ready(self) -> None:
        """Raises AssertionError unless the manager runs and its /readyz answers 200."""
        assert self.proc.returncode is None, self.log_path.read_text()[-3000:]
        try:
            async with self.http.get(f"http://{self.health}/readyz") as r:
                assert r.status == 200, await r.text()
        except aiohttp.ClientConnectionError as err:
            raise AssertionError(f"probe port not open: {err}") from err


@contextlib.asynccontextmanager
async def running_manager(
    env: Environment,
    tmp_path: Path,
    config: Json | None = None,
    *,
    args: Sequence[str] = (),
    ca: TinyCA | None = None,
    dns: Sequence[str] = ("localhost",),
    ready_timeout: float = 60,
    log_format: str | None = "json",
    cert_dir: Path | None = None,
    wait_ready: bool = True,
    exit_code: int = 0,
) -> AsyncIterator[RunningManager]:
    """The manager against ``env``, ready; ``config`` entries override the defaults (metrics off).

    ``ca`` (a new one by default) signs the serving certificate for ``dns`` and 127.0.0.1;
    ``log_format=None`` leaves the log flags to ``args``. With ``cert_dir`` the manager reads its
    certificates there and none is issued (the test or the rotator writes them); with
    ``wait_ready=False`` the manager is yielded as soon as it is started; ``exit_code`` is the
    code asserted at the end (a test that kills the manager names the signal's).
    """
    ca = ca or TinyCA("trainer-test-webhook-ca")
    if cert_dir is None:
        cert_dir = tmp_path
        ca.issue_server("localhost", ips=["127.0.0.1"], dns=list(dns)).write(
            tmp_path / "tls.crt", tmp_path / "tls.key"
        )
    health, port = f"127.0.0.1:{free_port()}", free_port()
    full: Json = {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": health},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": port, "host": "127.0.0.1"},
        # the trainer component serves webhooks: certificates come from --webhook-cert-dir
        "certManagement": {"enable": False},
        # the session's clusters serve config/crd (level v2.1); v2.3 tests pass --api-level=v2.3
        "apiLevel": "v2.1",
        **(config or {}),
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(full))
    log_path = tmp_path / "manager.log"  # a file, not a pipe: a full pipe would block the manager
    log_file = log_path.open("wb")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "trainer",
        f"--config={tmp_path / 'config.yaml'}",
        f"--kubeconfig={env.kubeconfig}",
        f"--webhook-cert-dir={cert_dir}",
        *args,
        *([f"--log-format={log_format}"] if log_format else []),
        cwd=ROOT,
        stdout=log_file,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        async with aiohttp.ClientSession() as http:
            manager = RunningManager(proc, full, health, port, ca, log_path, http)
            if wait_ready:
                await eventually(
                    manager.ready, timeout=ready_timeout, message="the manager never became ready"
                )
            yield manager
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 60)
        log_file.close()
    assert code == exit_code, log_path.read_text()[-4000:]


def webhook_configurations(namespace: str, docs: Sequence[Json] | None = None) -> list[Json]:
    """Every shipped webhook configuration (``docs``: these instead, e.g. a level's), the
    namespaced webhooks limited to ``namespace``."""
    if docs is None:
        docs = [
            doc
            for path in sorted((ROOT / "config" / "webhook").glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text())
            if isinstance(doc, dict) and doc.get("kind", "").endswith("WebhookConfiguration")
        ]
    scoped = copy.deepcopy(list(docs))
    for doc in scoped:
        for hook in doc.get("webhooks", []):
            if hook["name"] != "validator.clustertrainingruntime.trainer.kubeflow.org":
                hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    return scoped


@contextlib.asynccontextmanager
async def shipped_webhooks(
    env: Environment,
    namespace: str,
    tmp_path: Path,
    manager: RunningManager,
    docs: Sequence[Json] | None = None,
) -> AsyncIterator[None]:
    """The shipped webhook configurations (``docs``: these instead) for ``namespace``, served by
    ``manager``, deleted after."""
    docs = webhook_configurations(namespace, docs)
    (tmp_path / "webhooks.yaml").write_text(yaml.safe_dump_all(docs))
    try:
        await env.install_webhooks(
            [tmp_path / "webhooks.yaml"],
            host="127.0.0.1",
            port=manager.webhook_port,
            ca_bundle=manager.ca.cert_pem,
        )
        await wait_webhooks_effective(env, docs, namespace)
        yield
    finally:
        for doc in docs:
            plural = doc["kind"].lower() + "s"
            await env.request(
                "DELETE", f"/apis/admissionregistration.k8s.io/v1/{plural}/{doc['metadata']['name']}"
            )


async def review(manager: RunningManager, path: str, obj: Json) -> Json:
    """One CREATE AdmissionReview of ``obj`` posted straight to the manager's webhook ``path``
    (trusting its CA); the AdmissionReview's ``response``."""
    group, _, version = obj["apiVersion"].partition("/")
    kind = obj["kind"]
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
            "operation": "CREATE",
            "object": obj,
        },
    }
    ctx = ssl.create_default_context(cadata=manager.ca.cert_pem.decode())
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session,
        session.post(
            f"https://127.0.0.1:{manager.webhook_port}{path}",
            data=json.dumps(body),
            headers={"Content-Type": "application/json"},
        ) as r,
    ):
        assert r.status == 200
        answer: Json = (await r.json())["response"]
        return answer
