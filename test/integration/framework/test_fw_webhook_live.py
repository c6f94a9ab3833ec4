"""A real kube-apiserver calls our webhook server over TLS (Validating + Mutating configs)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager.client import Forbidden
from manager.cluster import Cluster
from manager.envtest import Environment
from manager.envtest.certs import TinyCA
from manager.webhook import Denied, WebhookServer, defaulting_handler, validating_handler


class Defaulter:
    async def default(self, obj: dict[str, Any]) -> None:
        obj.setdefault("data", {}).setdefault("defaulted", "yes")


class Validator:
    async def validate_create(self, obj: dict[str, Any]) -> list[str] | None:
        if (obj.get("data") or {}).get("forbidden"):
            raise Denied("data.forbidden is not allowed")
        return ["checked by the framework webhook"]

    async def validate_update(self, old: dict[str, Any], new: dict[str, Any]) -> list[str] | None:
        return None

    async def validate_delete(self, obj: dict[str, Any]) -> list[str] | None:
        return None


def _config(kind: str, name: str, path: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": f"{name}.framework.test",
                "clientConfig": {"service": {"name": "unused", "namespace": "default", "path": path}},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["configmaps"],
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 5,
            }
        ],
    }


@pytest.fixture
async def webhook(control_plane: Environment, namespace: str, tmp_path: Path) -> AsyncIterator[None]:
    ca = TinyCA("framework-webhook-ca")
    ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        tmp_path / "tls.crt", tmp_path / "tls.key"
    )
    server = WebhookServer(host="127.0.0.1", port=0, cert_dir=tmp_path)
    server.register("/mutate--v1-configmap", defaulting_handler(Defaulter()))
    server.register("/validate--v1-configmap", validating_handler(Validator()))
    started = asyncio.Event()
    task = asyncio.create_task(server.start(started))
    await asyncio.wait_for(started.wait(), 10)
    suffix = namespace
    docs = [
        _config("MutatingWebhookConfiguration", f"m-{suffix}", "/mutate--v1-configmap", namespace),
        _config("ValidatingWebhookConfiguration", f"v-{suffix}", "/validate--v1-configmap", namespace),
    ]
    manifest = tmp_path / "webhooks.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    await control_plane.install_webhooks(
        [manifest], host="127.0.0.1", port=server.bound_port or 0, ca_bundle=ca.cert_pem
    )
    try:
        # the API server's admission informers have each configuration a moment after the write
        configmaps = f"/api/v1/namespaces/{namespace}/configmaps"
        probe = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "probe-"}}
        await control_plane.wait_webhook_effective(
            configmaps,
            {**probe, "data": {"forbidden": "1"}},
            denied_by=f"v-{suffix}.framework.test",
        )
        await control_plane.wait_webhook_effective(
            configmaps, probe, mutated=lambda cm: (cm.get("data") or {}).get("defaulted") == "yes"
        )
        yield
    finally:
        await control_plane.request(
            "DELETE", f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/m-{suffix}"
        )
        await control_plane.request(
            "DELETE", f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/v-{suffix}"
        )
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_apiserver_calls_the_webhook_server(cluster: Cluster, namespace: str, webhook: None) -> None:
    c = cluster.api_reader

    def cm(name: str, **data: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
            "data": data,
        }

    with pytest.raises(Forbidden, match=r"data\.forbidden is not allowed"):
        await c.create(cm("refused", forbidden="1"))
    created = await c.create(cm("ok", mine="1"))
    assert created["data"] == {"mine": "1", "defaulted": "yes"}  # the mutating webhook's JSON patch
