"""The controller-manager image, built once per test session from a clean copy of the checkout.

``make docker-build`` runs on a copy of the files ``git ls-files`` lists (tracked and new,
nothing ignored): a module or data file the wheel lacks fails whatever runs the image. These
machines build with podman as ``make container-tools`` sets it up (installed from Debian's
packages when missing); ``DOCKER_HOST`` points nowhere so a Docker daemon is never picked.

The build runs in the background (tests start their control planes meanwhile) and is shared:
``test/e2e/deploy/test_image.py`` runs the image with podman as the Pod would, the real-node
tests (``test/e2e/realnode``) import it into their node's containerd; in one session they wait
for the same build (the fixtures are in ``test/e2e/conftest.py``). The image is used by the ID
the build wrote, so a concurrent session re-tagging ``TAG`` changes nothing here.

Importable by its module name from every test: ``test/`` is on ``sys.path`` (rootdir conftest).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TAG = "localhost/trainer-controller-manager-py:e2e"
BUILD_TIMEOUT = 1800  # a fresh machine installs podman and makes the base image first


def _run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    assert proc.returncode == 0, f"{' '.join(argv)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def no_docker_env() -> dict[str, str]:
    """The environment with ``DOCKER_HOST`` pointing nowhere: these tests build with podman."""
    return {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}


@dataclass
class Podman:
    """podman with the containers.conf of ``make container-tools``."""

    env: dict[str, str]

    def __call__(
        self, *args: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            ["podman", *args], capture_output=True, text=True, check=False, env=self.env, timeout=timeout
        )
        if check:
            assert proc.returncode == 0, (
                f"podman {' '.join(args)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
        return proc


def container_tools() -> Podman:
    """``make container-tools``: installs podman and makes the base image when missing."""
    started = time.monotonic()
    out = _run(["make", "-s", "container-tools"], cwd=ROOT, env=no_docker_env(), timeout=BUILD_TIMEOUT).stdout
    exported = dict(
        line.removeprefix("export ").split("=", 1) for line in out.splitlines() if line.startswith("export ")
    )
    assert "CONTAINERS_CONF" in exported, out
    print(f"make container-tools: {time.monotonic() - started:.1f} s")
    return Podman({**no_docker_env(), **exported})


def clean_copy(dest: Path) -> Path:
    """The checkout's files (tracked and new, nothing ignored) copied into ``dest``."""
    files = _run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT).stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


@dataclass
class ImageBuild:
    """``make docker-build`` of a clean copy, running in the background."""

    podman: Podman
    iidfile: Path
    proc: subprocess.Popen[bytes]
    log: Path
    started: float
    seconds: float | None = field(default=None)
    archives: dict[str, Path] = field(default_factory=dict)

    def wait(self) -> str:
        """The image ID, once the build succeeded."""
        try:
            code = self.proc.wait(timeout=max(1.0, BUILD_TIMEOUT - (time.monotonic() - self.started)))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"make docker-build took over {BUILD_TIMEOUT} s") from None
        if self.seconds is None:
            self.seconds = time.monotonic() - self.started
            print(f"make docker-build (clean copy): {self.seconds:.1f} s")
        assert code == 0, f"make docker-build failed:\n{self.log.read_text()[-5000:]}"
        return self.iidfile.read_text().strip()

    def archive(self, tag: str) -> Path:
        """The image as a docker-archive naming ``tag`` (what ``ctr images import`` takes), once
        per tag and session."""
        if tag not in self.archives:
            image_id = self.wait()
            started = time.monotonic()
            self.podman("tag", image_id, tag)
            path = self.iidfile.parent / f"{tag.rsplit(':', 1)[-1]}.tar"
            self.podman("save", "--format", "docker-archive", "-o", str(path), tag, timeout=600)
            print(
                f"podman save {tag}: {time.monotonic() - started:.1f} s ({path.stat().st_size / 1e6:.0f} MB)"
            )
            self.archives[tag] = path
        return self.archives[tag]

    def stop(self) -> None:
        """Interrupted (as by Ctrl-C): podman removes its build containers on SIGINT."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def start_build(podman: Podman, base: Path) -> ImageBuild:
    """``make docker-build IMG=TAG`` of a clean copy under ``base``, started in the background.
    ``TAG`` stays (the next build reuses its layers, and podman drops the old image once the tag
    moves)."""
    source = clean_copy(base / "source")
    log = base / "build.log"
    iidfile = base / "image-id"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                "make",
                "-C",
                str(source),
                "docker-build",
                f"IMG={TAG}",
                f"CONTAINER_BUILD_ARGS=--iidfile={iidfile}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=no_docker_env(),
            start_new_session=True,
        )
    return ImageBuild(podman, iidfile, proc, log, time.monotonic())
