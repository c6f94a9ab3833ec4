"""JobSet e2e: our controllers and webhooks on the full local cluster (Job controller, GC, scheduler, KWOK)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager import Manager, Options
from manager.client.errors import Conflict, NotFound
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.envtest.certs import TinyCA
from manager.testing import eventually
from manager.webhook import WebhookServer
from trainer.api import jobset_constants as c
from trainer.controllers.jobset import setup
from trainer.controllers.jobset.reconciler import JOB_GVK, JOBSET_GVK

ROOT = Path(__file__).resolve().parents[3]
Object = dict[str, Any]


def e2e_rjob(name: str, replicas: int, **job_spec: Any) -> Object:
    spec: Object = {
        "parallelism": 1,
        "completions": 1,
        "backoffLimit": 0,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1"]}],
            }
        },
    }
    spec.update(job_spec)
    return {"name": name, "replicas": replicas, "template": {"spec": spec}}


def e2e_jobset(namespace: str, name: str, *rjobs: Object, **spec: Any) -> Object:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicatedJobs": list(rjobs), **spec},
    }


@dataclass
class Cluster2:
    api: Any
    namespace: str

    async def jobset(self, name: str) -> Object:
        result: Object = await self.api.get(JOBSET_GVK, name, self.namespace)
        return result

    async def jobs(self, name: str) -> list[Object]:
        items = await self.api.list(JOB_GVK, namespace=self.namespace, label_selector={c.JobSetNameKey: name})
        return list(items)

    async def update_js(self, name: str, mutate: Any) -> None:
        """Read-modify-write, retried when the controller's status write got in between."""
        while True:
            js = await self.jobset(name)
            mutate(js)
            try:
                await self.api.update(js)
                return
            except Conflict:
                continue

    async def wait_condition(self, name: str, type_: str, timeout: float = 120) -> Object:
        async def check() -> Object:
            js = await self.jobset(name)
            for cond in (js.get("status") or {}).get("conditions") or []:
                if cond["type"] == type_ and cond["status"] == "True":
                    result: Object = cond
                    return result
            raise AssertionError(f"{name}: no {type_}=True in {js.get('status')}")

        return await eventually(check, timeout=timeout)

    async def wait_gone(self, name: str, timeout: float = 120) -> None:
        async def check() -> None:
            try:
                await self.jobset(name)
            except NotFound:
                return
            raise AssertionError(f"JobSet {name} still exists")

        await eventually(check, timeout=timeout)


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
        assert await setup(mgr, server) is True
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
