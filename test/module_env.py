"""A control plane of one test module's own, with the CRDs it names, and what tests open on it.

The session's control plane carries level v2.1's CRDs; the suites of level v2.3 (and of JobSet
v0.12.0) start one of their own with ``module_control_plane(tmp_path_factory, name, V2_3_CRDS)``
in a module-scoped fixture, talk to it through ``api_client`` and work in a
``temporary_namespace``.

Importable by its module name from every test: ``test/`` is on ``sys.path`` (rootdir conftest).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest

from manager.client import Client, NotFound
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment

ROOT = Path(__file__).resolve().parents[1]
BASES = ROOT / "config" / "crd" / "bases"
"""Level v2.1's CRDs (and the scheduler-plugins ones both levels install)."""
V2_3_CRD_DIR = ROOT / "config" / "overlays" / "v2.3" / "crd"
V2_3_JOBSET_CRD = V2_3_CRD_DIR / "jobset.x-k8s.io_jobsets.yaml"
V2_3_CRDS = [
    V2_3_CRD_DIR,
    BASES / "scheduling.x-k8s.io_podgroups.yaml",
    BASES / "scheduling.x-k8s.io_elasticquotas.yaml",
]
"""What a level v2.3 cluster serves: the Trainer v2.3.0 and JobSet v0.12.0 CRDs, PodGroups, ElasticQuotas."""


@contextlib.contextmanager
def module_control_plane(
    tmp_path_factory: pytest.TempPathFactory, name: str, crd_paths: Sequence[Path]
) -> Iterator[Environment]:
    """etcd + kube-apiserver serving ``crd_paths`` under a fresh ``name`` directory, stopped after."""
    env = Environment(tmp_path_factory.mktemp(name) / "env", crd_paths=list(crd_paths))
    asyncio.run(env.start())
    try:
        yield env
    finally:
        asyncio.run(env.stop())


@contextlib.asynccontextmanager
async def api_client(env: Environment, field_owner: str = "test") -> AsyncIterator[Client]:
    """A live client of ``env`` (no cache), closed after."""
    config = await load_kubeconfig(env.kubeconfig)
    async with Cluster(config, field_owner=field_owner) as cluster:
        yield Client(cluster.transport, cluster.mapper, field_owner=field_owner)


async def new_namespace(api: Client, prefix: str) -> str:
    """A namespace named ``prefix-<8 hex>``, created."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


@contextlib.asynccontextmanager
async def temporary_namespace(api: Client, prefix: str) -> AsyncIterator[str]:
    """``new_namespace``, deleted after (gone already is fine)."""
    name = await new_namespace(api, prefix)
    try:
        yield name
    finally:
        with contextlib.suppress(NotFound):
            await api.delete({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
