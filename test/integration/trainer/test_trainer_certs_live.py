"""The cert rotator against a real API server: pre-created Secret, a webhook configuration, a TLS server."""

from __future__ import annotations

import asyncio
import base64
import ssl
from pathlib import Path
from typing import Any

import yaml

from manager.client import Client
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.webhook.server import WebhookServer
from webhooks.certs import MWC_GVK, SECRET_GVK, VWC_GVK, CertConfig, CertRotator, WebhookConfiguration

ROOT = Path(__file__).resolve().parents[3]
Json = dict[str, Any]
NEVER = {"matchLabels": {"trainer-test/never": "match"}}


async def _kubelet(client: Client, namespace: str, cert_dir: Path) -> None:
    """Plays the kubelet: once the Secret has a serving certificate, 'mount' it into ``cert_dir``."""
    while True:
        secret = await client.get(SECRET_GVK, "kubeflow-trainer-webhook-cert", namespace)
        data = secret.get("data") or {}
        if data.get("tls.crt"):
            for key, value in data.items():
                (cert_dir / key).write_bytes(base64.b64decode(value))
            return
        await asyncio.sleep(0.05)


async def _handshake(port: int, ca_pem: bytes, server_name: str) -> None:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    _reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname=server_name
    )
    writer.close()
    await writer.wait_closed()


async def test_rotator_provisions_secret_injects_ca_and_serves(
    control_plane: Environment, namespace: str, tmp_path: Path
) -> None:
    config = await load_kubeconfig(control_plane.kubeconfig)
    async with Cluster(config, field_owner="trainer") as cluster:
        client = Client(cluster.transport, cluster.mapper, field_owner="test")
        await client.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "kubeflow-trainer-webhook-cert", "namespace": namespace},
            }
        )
        vwc: Json = yaml.safe_load((ROOT / "config" / "webhook" / "trainer.yaml").read_text())
        vwc_name = f"validator-{namespace}.trainer.kubeflow.org"
        vwc["metadata"]["name"] = vwc_name
        for hook in vwc["webhooks"]:  # never called: this test only checks the injection
            hook["namespaceSelector"] = NEVER
            hook["objectSelector"] = NEVER
        await client.create(vwc)
        # the JobSet component's mutating configuration, as shipped, renamed for this test
        mwc: Json = next(
            d
            for d in yaml.safe_load_all((ROOT / "config" / "webhook" / "jobset.yaml").read_text())
            if d["kind"] == "MutatingWebhookConfiguration"
        )
        mwc_name = f"jobset-mutating-{namespace}"
        mwc["metadata"]["name"] = mwc_name
        for hook in mwc["webhooks"]:
            hook["namespaceSelector"] = NEVER
            hook["objectSelector"] = NEVER
        await client.create(mwc)
        configurations = (WebhookConfiguration(vwc_name), WebhookConfiguration(mwc_name, mutating=True))
        cert_dir = tmp_path / "certs"
        cert_dir.mkdir()
        rotator = CertRotator(
            cluster.api_reader,
            CertConfig(namespace=namespace, cert_dir=cert_dir, webhook_configurations=configurations),
        )
        server = WebhookServer(host="127.0.0.1", port=0, cert_dir=cert_dir)
        server_started = asyncio.Event()
        tasks: list[asyncio.Task[None]] = []
        rotator.on_ready(lambda: tasks.append(asyncio.create_task(server.start(server_started))))
        kubelet = asyncio.create_task(_kubelet(client, namespace, cert_dir))
        rotation = asyncio.create_task(rotator.start(asyncio.Event()))
        try:
            await asyncio.wait_for(rotator.ready.wait(), 60)
            await asyncio.wait_for(server_started.wait(), 10)
            secret = await client.get(SECRET_GVK, "kubeflow-trainer-webhook-cert", namespace)
            assert sorted(secret["data"]) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
            ca_pem = base64.b64decode(secret["data"]["ca.crt"])
            injected = await client.get(VWC_GVK, vwc_name)
            assert {h["clientConfig"]["caBundle"] for h in injected["webhooks"]} == {secret["data"]["ca.crt"]}
            mutating = await client.get(MWC_GVK, mwc_name)
            assert [h["clientConfig"]["caBundle"] for h in mutating["webhooks"]] == [
                secret["data"]["ca.crt"]
            ] * 2
            assert server.bound_port is not None
            await _handshake(
                server.bound_port, ca_pem, f"kubeflow-trainer-controller-manager.{namespace}.svc"
            )

            # a restarted replica finds valid certificates and rewrites nothing
            again = CertRotator(
                cluster.api_reader,
                CertConfig(namespace=namespace, cert_dir=cert_dir, webhook_configurations=configurations),
            )
            assert await again.ensure_certs() == ca_pem
            await again.inject(ca_pem)
            assert (await client.get(SECRET_GVK, "kubeflow-trainer-webhook-cert", namespace))["metadata"][
                "resourceVersion"
            ] == secret["metadata"]["resourceVersion"]
            assert (await client.get(VWC_GVK, vwc_name))["metadata"]["resourceVersion"] == injected[
                "metadata"
            ]["resourceVersion"]
            assert (await client.get(MWC_GVK, mwc_name))["metadata"]["resourceVersion"] == mutating[
                "metadata"
            ]["resourceVersion"]
        finally:
            for task in (rotation, kubelet, *tasks):
                task.cancel()
            await asyncio.gather(rotation, kubelet, *tasks, return_exceptions=True)
            await client.delete_by_name(VWC_GVK, vwc_name)
            await client.delete_by_name(MWC_GVK, mwc_name)
