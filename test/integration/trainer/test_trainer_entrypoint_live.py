"""`python -m trainer` with certManagement on (docs/behaviour/trainer.md §6.3, §6.4): readiness waits for the certificates.

The rotator's namespace is ``kubeflow-system`` (no service-account mount here); the test
pre-creates the Secret and the three webhook configurations as the shipped manifests do, and
plays the kubelet by copying the Secret into ``--webhook-cert-dir`` once the rotator has filled
it. The CA goes into the configurations of the components that run, and only those.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from trainer_process import running_manager

from manager.client import AlreadyExists, Client, NotFound
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.testing import eventually
from webhooks.certs import MWC_GVK, SECRET_GVK, VWC_GVK

ROOT = Path(__file__).resolve().parents[3]
NAMESPACE = "kubeflow-system"
SECRET = "kubeflow-trainer-webhook-cert"
VWC = "validator.trainer.kubeflow.org"
JOBSET_CONFIGURATIONS = (
    (MWC_GVK, "jobset-mutating-webhook-configuration"),
    (VWC_GVK, "jobset-validating-webhook-configuration"),
)
NEVER = {"matchLabels": {"trainer-test/never": "match"}}
Json = dict[str, Any]


@pytest.fixture
async def live(control_plane: Environment) -> AsyncIterator[Client]:
    config = await load_kubeconfig(control_plane.kubeconfig)
    async with Cluster(config, field_owner="test") as cluster:
        client = Client(cluster.transport, cluster.mapper, field_owner="test")
        with contextlib.suppress(AlreadyExists):
            await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        with contextlib.suppress(AlreadyExists):  # the shipped manifests may have created it empty
            await client.create(
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET, "namespace": NAMESPACE}}
            )
        docs: list[Json] = [
            d
            for name in ("trainer.yaml", "jobset.yaml")
            for d in yaml.safe_load_all((ROOT / "config" / "webhook" / name).read_text())
        ]
        for doc in docs:
            for hook in doc["webhooks"]:  # injected, never called
                hook["namespaceSelector"] = NEVER
                hook["objectSelector"] = NEVER
            await client.create(doc)
        try:
            yield client
        finally:
            for gvk, name, ns in (
                (VWC_GVK, VWC, ""),
                *((gvk, name, "") for gvk, name in JOBSET_CONFIGURATIONS),
                (SECRET_GVK, SECRET, NAMESPACE),
            ):
                with contextlib.suppress(NotFound):
                    await client.delete_by_name(gvk, name, ns)


@pytest.mark.parametrize("controllers", ["*", "*,-jobset"])
async def test_readiness_waits_for_rotated_certificates(
    control_plane: Environment, live: Client, tmp_path: Path, controllers: str
) -> None:
    cert_dir = tmp_path / "certs"
    cert_dir.mkdir()
    # certificate management on (the default made explicit): the rotator fills the Secret
    async with running_manager(
        control_plane,
        tmp_path,
        {"certManagement": {"enable": True}},
        args=[f"--controllers={controllers}"],
        cert_dir=cert_dir,
        wait_ready=False,
    ) as manager:
        http, health = manager.http, manager.health

        async def webhook_check() -> tuple[int, str]:
            try:
                async with http.get(f"http://{health}/readyz/webhook") as r:
                    return r.status, await r.text()
            except aiohttp.ClientConnectionError as err:
                raise AssertionError(f"probe port not open: {err}") from err

        async def certificates_not_ready() -> None:
            status, text = await webhook_check()
            assert status != 200 and "certificates are not ready" in text, (status, text)

        await eventually(certificates_not_ready, timeout=60)

        async def secret_filled() -> Json:
            secret: Json = await live.get(SECRET_GVK, SECRET, NAMESPACE)
            assert (secret.get("data") or {}).get("tls.crt"), "the rotator has not written the Secret yet"
            return secret

        secret = await eventually(secret_filled, timeout=60)
        for key, value in secret["data"].items():  # the kubelet mounts the Secret
            (cert_dir / key).write_bytes(base64.b64decode(value))

        await eventually(manager.ready, timeout=60)
        injected = await live.get(VWC_GVK, VWC)
        assert {h["clientConfig"]["caBundle"] for h in injected["webhooks"]} == {secret["data"]["ca.crt"]}
        # the JobSet configurations get the CA when the jobset component runs, else nothing
        expected = secret["data"]["ca.crt"] if controllers == "*" else None
        for gvk, name in JOBSET_CONFIGURATIONS:
            hooks = (await live.get(gvk, name))["webhooks"]
            assert [h["clientConfig"].get("caBundle") for h in hooks] == [expected] * 2, name
    # running_manager stopped it with SIGTERM and asserted the exit code
    assert manager.proc.returncode == 0, manager.log_path.read_text()[-4000:]
