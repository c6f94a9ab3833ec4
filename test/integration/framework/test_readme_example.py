"""The example controller in manager/README.md runs as written against a real API server."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest

from manager.client.errors import NotFound
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.testing import eventually

README = Path(__file__).resolve().parents[3] / "manager" / "README.md"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}
                        },
                    }
                },
            }
        ],
    },
}


def readme_example() -> dict[str, Any]:
    block = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert block, "manager/README.md lost its example"
    namespace: dict[str, Any] = {}
    exec(compile(block.group(1), str(README), "exec"), namespace)
    return namespace


@pytest.fixture
async def cluster(control_plane: Environment, tmp_path: Path) -> Any:
    crd_file = tmp_path / "crd.yaml"
    import yaml

    crd_file.write_text(yaml.safe_dump(CRD))
    await control_plane.install_crds([crd_file])
    async with Cluster(await load_kubeconfig(control_plane.kubeconfig)) as c:
        yield c


async def test_readme_example_reconciles_widgets(cluster: Cluster, namespace: str) -> None:
    example = readme_example()
    os.environ["POD_NAMESPACE"] = namespace  # where the example's leader-election Lease lives
    run = asyncio.create_task(example["main"](cluster))
    try:
        widget = {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w", "namespace": namespace},
            "spec": {"replicas": 3},
        }
        await cluster.api_reader.create(widget)
        deployments = example["DEPLOYMENT"]

        async def deployment_owned_by_widget() -> dict[str, Any]:
            dep = await cluster.api_reader.get(deployments, "w", namespace)
            assert dep["spec"]["replicas"] == 3
            assert dep["metadata"]["ownerReferences"][0]["kind"] == "Widget"
            return dep

        dep = await eventually(deployment_owned_by_widget, timeout=60, retry_on=(NotFound,))
        # Owner-based requeue: deleting the owned Deployment makes the Widget's controller recreate it.
        await cluster.api_reader.delete(dep)

        async def recreated() -> None:
            again = await cluster.api_reader.get(deployments, "w", namespace)
            assert again["metadata"]["uid"] != dep["metadata"]["uid"]

        await eventually(recreated, timeout=60, retry_on=(NotFound,))
        assert not run.done()
        os.kill(os.getpid(), signal.SIGTERM)  # the example's signal handling stops it gracefully
        assert await asyncio.wait_for(run, 60) == 0
    finally:
        os.environ.pop("POD_NAMESPACE", None)
        if not run.done():
            run.cancel()
