"""Fixtures of the deployment e2e suite; helpers live in ``deploy_e2e``."""

from __future__ import annotations

import pytest
from deploy_e2e import Installed, install_wheel


@pytest.fixture(scope="session")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """This checkout as the image installs it: a wheel in a clean venv outside the repository."""
    return install_wheel(tmp_path_factory)
