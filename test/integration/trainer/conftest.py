"""Fixtures for the Trainer integration tests: a real Manager running the ``trainer`` component.

The manager serves the three validating webhooks on 127.0.0.1 with a throwaway CA; the
webhook configuration (config/webhook/trainer.yaml) is installed pointing at it, with the
namespaced webhooks limited to the test's namespace, and removed afterwards so no other test
meets a webhook that is gone. There is no kube-controller-manager and no JobSet controller:
tests play their part by writing JobSet status.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from trainer_wrappers import runtime, wrapper_rjobs

from manager import Manager, Options
from manager.client import Client, Forbidden
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.envtest.certs import TinyCA
from manager.testing.eventually import eventually
from manager.webhook.server import WebhookServer
from trainer.controllers import trainer_setup
from trainer.runtime.context import SetupContext
from webhooks import setup_trainer

ROOT = Path(__file__).resolve().parents[3]
WEBHOOKS = ROOT / "config" / "webhook" / "trainer.yaml"
VWC = "validator.trainer.kubeflow.org"
VWC_PATH = f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{VWC}"

Json = dict[str, Any]


@dataclass
class TrainerEnv:
    """A running manager and a live client (field manager ``test``) for the test's own writes."""

    client: Client
    namespace: str
    manager: Manager
    controllers: Any
    # The webhook server's address and CA, for AdmissionReviews POSTed straight to it.
    webhook_url: str = ""
    webhook_ca: bytes = b""


def scoped_webhooks(namespace: str) -> Json:
    """The shipped configuration, namespaced webhooks limited to ``namespace``."""
    doc: Json = yaml.safe_load(WEBHOOKS.read_text())
    doc = copy.deepcopy(doc)
    for hook in doc["webhooks"]:
        if hook["name"] != "validator.clustertrainingruntime.trainer.kubeflow.org":
            hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    return doc


async def _webhooks_in_effect(client: Client, namespace: str) -> None:
    """Until the API server calls the webhooks just installed: its admission plugin sees a new
    configuration through its own informer, so a create right after the install can pass
    unchecked (seen once in CI when the previous test had just deleted the same-named one)."""
    bad_jobs = wrapper_rjobs()
    bad_jobs[0]["replicas"] = 2  # the TrainingRuntime validator refuses this

    async def denied() -> None:
        try:
            await client.create(runtime("webhook-probe", namespace, rjobs=bad_jobs), dry_run=True)
        except Forbidden:
            return
        raise AssertionError("the TrainingRuntime webhook is not called yet")

    await eventually(denied, timeout=30, interval=0.1)


@pytest.fixture
async def trainer(control_plane: Environment, namespace: str, tmp_path: Path) -> AsyncIterator[TrainerEnv]:
    ca = TinyCA("trainer-test-webhook-ca")
    ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        tmp_path / "tls.crt", tmp_path / "tls.key"
    )
    config = await load_kubeconfig(control_plane.kubeconfig)
    async with Cluster(config, field_owner="trainer", event_source="trainer-controller-manager") as cluster:
        mgr = Manager(cluster, Options(metrics_bind_address="0", health_probe_bind_address=""))
        server = WebhookServer(host="127.0.0.1", port=0, cert_dir=tmp_path)
        context = SetupContext(mgr, server)
        controllers = await trainer_setup.setup_controllers(context)
        assert await setup_trainer(context)
        mgr.add_webhook_server(server)
        task = asyncio.create_task(mgr.run())
        try:
            await eventually(lambda: server.bound_port is not None and mgr.elected.is_set(), timeout=60)
            hooks = tmp_path / "webhooks.yaml"
            hooks.write_text(yaml.safe_dump(scoped_webhooks(namespace)))
            assert server.bound_port is not None
            await control_plane.install_webhooks(
                [hooks], host="127.0.0.1", port=server.bound_port, ca_bundle=ca.cert_pem
            )
            client = Client(cluster.transport, cluster.mapper, field_owner="test")
            await _webhooks_in_effect(client, namespace)
            try:
                yield TrainerEnv(
                    client,
                    namespace,
                    mgr,
                    controllers,
                    webhook_url=f"https://127.0.0.1:{server.bound_port}",
                    webhook_ca=ca.cert_pem,
                )
            finally:
                await control_plane.request("DELETE", VWC_PATH)
        finally:
            mgr.stop()
            await asyncio.wait_for(task, 60)
