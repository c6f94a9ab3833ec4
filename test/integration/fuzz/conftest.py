"""The fuzz suites at each API level: every test runs at v2.1 and at v2.3 (``[v2_1]``, ``[v2_3]`` in
its id; ``-k v2_3`` picks one).

Level v2.1 runs on the session's control plane (``config/crd``); level v2.3 on a control plane of
this package with the level's CRDs (``config/overlays/v2.3/crd`` and the scheduling CRDs, what
the conformance harness installs at the level), started on first use: a v2.3 manager refuses
v2.1's CRDs. Each test gets a fresh namespace on its level's control plane.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import admission_fuzz as af
import pytest
import yaml

from manager.envtest import Environment
from trainer import levels
from trainer.conformance.harness import LevelInputs

# The control plane each level's tests run on (a fixture name).
LEVEL_ENVS = {"v2.1": "control_plane", "v2.3": "control_plane_v2_3"}


@pytest.fixture(scope="package")
def control_plane_v2_3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    """etcd + kube-apiserver with level v2.3's CRDs, for this package."""
    crds = LevelInputs(levels.get("v2.3")).our_crds()
    env = Environment(tmp_path_factory.mktemp("fuzz-v2.3") / "env", crd_paths=crds)
    asyncio.run(env.start())
    try:
        yield env
    finally:
        asyncio.run(env.stop())


@pytest.fixture(scope="package", params=list(af.LEVELS.values()), ids=lambda level: level.id)
def fuzz_level(request: pytest.FixtureRequest) -> af.FuzzLevel:
    """The API level of the test (package-scoped, so the tests are grouped by level)."""
    level: af.FuzzLevel = request.param
    return level


@pytest.fixture(scope="package")
def level_env(fuzz_level: af.FuzzLevel, request: pytest.FixtureRequest) -> Environment:
    """The control plane serving the level's CRDs."""
    env: Environment = request.getfixturevalue(LEVEL_ENVS[fuzz_level.name])
    return env


@pytest.fixture
async def level_namespace(level_env: Environment) -> AsyncIterator[str]:
    """A fresh namespace on the level's control plane."""
    name = f"fz-{uuid.uuid4().hex[:10]}"
    status, body = await level_env.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    assert status == 201, body
    try:
        yield name
    finally:
        with contextlib.suppress(Exception):
            await level_env.request("DELETE", f"/api/v1/namespaces/{name}")


@pytest.fixture
async def level_runtimes(level_env: Environment, fuzz_level: af.FuzzLevel, tmp_path: Path) -> None:
    """The ClusterTrainingRuntimes the level's TrainJob bases name (``FuzzLevel.runtimes``), applied."""
    path = tmp_path / "fuzz-runtimes.yaml"
    path.write_text(yaml.safe_dump_all(fuzz_level.runtimes()))
    await level_env.apply_manifests([path])


@pytest.fixture(scope="package")
def level_webhooks(fuzz_level: af.FuzzLevel) -> list[dict[str, Any]]:
    """The webhook configurations of the level's manifests (``config/<ApiLevel.manifests>``)."""
    return LevelInputs(levels.get(fuzz_level.name)).our_webhooks()
