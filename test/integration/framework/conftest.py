"""Fixtures for the framework's integration tests: a Cluster on the session control plane."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment

TESTDATA = Path(__file__).parent.parent / "testdata"


@pytest.fixture
async def cluster(control_plane: Environment) -> AsyncIterator[Cluster]:
    config = await load_kubeconfig(control_plane.kubeconfig)
    async with Cluster(config, field_owner="framework-test") as c:
        yield c


@pytest.fixture
async def widgets_crd(control_plane: Environment) -> None:
    await control_plane.install_crds([TESTDATA / "widgets-crd.yaml"])
