"""Fixtures of the JobSet integration suite; the helpers live in ``jsharness`` (a unique module
name, so this directory and test/e2e/jobset can be collected in one pytest run)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from jsharness import Harness, JobSetReconciles, run_manager, scoped_webhook_manifest

from manager.envtest import Environment
from manager.envtest.certs import TinyCA
from manager.testing import eventually
from manager.webhook import WebhookServer
from trainer.conformance.webhook_probes import configurations, wait_webhooks_effective


@pytest.fixture
async def controller(control_plane: Environment, namespace: str) -> AsyncIterator[Harness]:
    """The controller suite: JobSet and Pod controllers, no webhooks."""
    reconciles = JobSetReconciles()
    async for _mgr, cluster in run_manager(control_plane, None, namespace, reconciles):
        yield Harness(cluster.api_reader, namespace, reconciles=reconciles, flush_events=cluster.flush_events)


@pytest.fixture
async def with_webhooks(control_plane: Environment, namespace: str, tmp_path: Path) -> AsyncIterator[Harness]:
    """Controllers plus the four webhooks, registered through ``setup()`` and ``install_webhooks``."""
    ca = TinyCA("jobset-webhook-ca")
    ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        tmp_path / "tls.crt", tmp_path / "tls.key"
    )
    server = WebhookServer(host="127.0.0.1", port=0, cert_dir=tmp_path)
    reconciles = JobSetReconciles()
    async for _mgr, cluster in run_manager(control_plane, server, namespace, reconciles):
        await eventually(lambda: server.bound_port is not None, timeout=10)
        manifest = scoped_webhook_manifest(namespace, tmp_path / "webhooks.yaml")
        names = await control_plane.install_webhooks(
            [manifest], host="127.0.0.1", port=server.bound_port or 0, ca_bundle=ca.cert_pem
        )
        try:
            await wait_webhooks_effective(control_plane, configurations([manifest]), namespace)
            yield Harness(
                cluster.api_reader,
                namespace,
                webhook_url=f"https://127.0.0.1:{server.bound_port}",
                webhook_ca=ca.cert_pem,
                reconciles=reconciles,
                flush_events=cluster.flush_events,
            )
        finally:
            for name in names:
                plural = (
                    "mutatingwebhookconfigurations"
                    if name.startswith("jobset-mutating")
                    else "validatingwebhookconfigurations"
                )
                await control_plane.request(
                    "DELETE", f"/apis/admissionregistration.k8s.io/v1/{plural}/{name}"
                )
