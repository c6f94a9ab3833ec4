"""Fixture of the JobSet e2e suite; helpers live in ``jse2e`` (unique module name)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from jse2e import ROOT, Cluster2

from manager import Manager, Options
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.envtest.certs import TinyCA
from manager.testing import eventually
from manager.webhook import WebhookServer
from trainer.components import component
from trainer.conformance.webhook_probes import wait_webhooks_effective
from trainer.runtime.context import SetupContext


@pytest.fixture
async def jobset_cluster(
    full_cluster: Environment, full_namespace: str, tmp_path: Path
) -> AsyncIterator[Cluster2]:
    ca = TinyCA("jobset-e2e-ca")
    ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        tmp_path / "tls.crt", tmp_path / "tls.key"
    )
    server = WebhookServer(host="127.0.0.1", port=0, cert_dir=tmp_path)
    config = await load_kubeconfig(full_cluster.kubeconfig)
    async with Cluster(config, field_owner="jobset-e2e") as cluster:
        mgr = Manager(cluster, Options(metrics_bind_address="0"))
        assert await component("jobset").setup(SetupContext(mgr, server)) is True
        mgr.add_webhook_server(server)
        task = asyncio.create_task(mgr.run())
        names: list[str] = []
        try:
            await eventually(lambda: mgr.elected.is_set() and server.bound_port is not None, timeout=30)
            docs = list(yaml.safe_load_all((ROOT / "config" / "webhook" / "jobset.yaml").read_text()))
            for doc in docs:
                doc["metadata"]["name"] = f"{doc['metadata']['name']}-{full_namespace}"
                for hook in doc["webhooks"]:
                    hook["namespaceSelector"] = {
                        "matchLabels": {"kubernetes.io/metadata.name": full_namespace}
                    }
            manifest = tmp_path / "webhooks.yaml"
            manifest.write_text(yaml.safe_dump_all(docs))
            names = await full_cluster.install_webhooks(
                [manifest], host="127.0.0.1", port=server.bound_port or 0, ca_bundle=ca.cert_pem
            )
            await wait_webhooks_effective(full_cluster, docs, full_namespace)
            yield Cluster2(cluster.api_reader, full_namespace)
        finally:
            for name in names:
                plural = (
                    "mutatingwebhookconfigurations"
                    if name.startswith("jobset-mutating")
                    else "validatingwebhookconfigurations"
                )
                await full_cluster.request("DELETE", f"/apis/admissionregistration.k8s.io/v1/{plural}/{name}")
            mgr.stop()
            await asyncio.gather(task, return_exceptions=True)
