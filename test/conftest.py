"""pytest wiring: tier markers from the directory, session control planes, a namespace per test.

Tiers: ``test/unit`` (no cluster), ``test/integration`` (real etcd + kube-apiserver),
``test/e2e`` (plus controller-manager, scheduler and KWOK). Missing control-plane binaries are
built (once, cached); a build failure fails the tests that need it, loudly.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client, config

from manager.envtest import Environment

ROOT = Path(__file__).resolve().parent.parent
TIERS = ("unit", "integration", "e2e")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).relative_to(ROOT / "test").parts
        tier = parts[0] if parts and parts[0] in TIERS else None
        if tier and not any(item.get_closest_marker(t) for t in TIERS):
            item.add_marker(getattr(pytest.mark, tier))
    # Cheap tiers first: a unit failure shows before a control plane is even started.
    order = {t: i for i, t in enumerate(TIERS)}

    def rank(item: pytest.Item) -> int:
        for tier in TIERS:
            if item.get_closest_marker(tier):
                return order[tier]
        return len(TIERS)

    items.sort(key=rank)


def _start(full: bool, tmp: Path) -> Iterator[Environment]:
    env = Environment(tmp, full=full, nodes=2, crd_paths=_crd_paths())
    asyncio.run(env.start())
    try:
        yield env
    finally:
        asyncio.run(env.stop())


def _crd_paths() -> list[Path]:
    crds = ROOT / "config" / "crd"
    return [crds] if any(crds.rglob("*.yaml")) else []


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    """etcd + kube-apiserver for the whole session, with the project's CRDs installed."""
    yield from _start(False, tmp_path_factory.mktemp("control-plane") / "env")


@pytest.fixture(scope="session")
def full_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    """A full local cluster: Jobs create Pods, the scheduler binds them, KWOK runs them."""
    yield from _start(True, tmp_path_factory.mktemp("full-cluster") / "env")


async def _api_client(env: Environment) -> client.ApiClient:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(env.kubeconfig), client_configuration=configuration)
    return client.ApiClient(configuration)


async def _namespace(api: client.ApiClient) -> AsyncIterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    core = client.CoreV1Api(api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        if not os.environ.get("KEEP_TEST_NAMESPACES"):
            await core.delete_namespace(name)


@pytest.fixture
async def kube(control_plane: Environment) -> AsyncIterator[client.ApiClient]:
    """A kubernetes-asyncio client authenticated as admin on the plain control plane."""
    api = await _api_client(control_plane)
    async with api:
        yield api


@pytest.fixture
async def namespace(kube: client.ApiClient) -> AsyncIterator[str]:
    """A fresh namespace for one test on the plain control plane."""
    async for name in _namespace(kube):
        yield name


@pytest.fixture
async def full_kube(full_cluster: Environment) -> AsyncIterator[client.ApiClient]:
    api = await _api_client(full_cluster)
    async with api:
        yield api


@pytest.fixture
async def full_namespace(full_kube: client.ApiClient) -> AsyncIterator[str]:
    """A fresh namespace for one test on the full cluster (deleted for real afterwards)."""
    async for name in _namespace(full_kube):
        yield name
