"""Session fixtures of the e2e tests that run the controller-manager image (test/image_build.py):
``test/e2e/deploy/test_image.py`` and the real-node suite ``test/e2e/realnode`` share one build."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from image_build import ImageBuild, Podman, container_tools, start_build


@pytest.fixture(scope="session")
def podman() -> Podman:
    """``make container-tools`` (podman and the base image, installed when missing)."""
    return container_tools()


@pytest.fixture(scope="session")
def controller_image(podman: Podman, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ImageBuild]:
    """``make docker-build`` of a clean copy of the checkout, started at the first request and
    running in the background; ``.wait()`` gives its image ID, ``.archive(tag)`` a docker-archive."""
    build = start_build(podman, tmp_path_factory.mktemp("image"))
    try:
        yield build
    finally:
        build.stop()
