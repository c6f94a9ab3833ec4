"""Fixture: a real Manager on the session control plane with the scheduling controllers set up."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sched_live import running_manager

from manager.envtest import Environment
from manager.manager import Manager


@pytest.fixture
async def scheduling_mgr(control_plane: Environment) -> AsyncIterator[Manager]:
    async with running_manager(control_plane) as (mgr, registered):
        assert registered
        yield mgr
