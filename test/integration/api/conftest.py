"""Fixtures for the CRD tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from crdtest import Resource

from manager.envtest import Environment


@pytest.fixture
def resources(control_plane: Environment, namespace: str) -> Callable[..., Resource]:
    """``resources(group, version, plural, namespaced=True)`` -> Resource in the test namespace."""

    def make(group: str, version: str, plural: str, namespaced: bool = True) -> Resource:
        return Resource(control_plane, group, version, plural, namespace if namespaced else None)

    return make
