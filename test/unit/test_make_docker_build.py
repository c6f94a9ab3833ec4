"""`make docker-build` as the container tools see it, and the mirror hack/container-tools.sh
reads from apt's sources.

Recording stand-ins for docker, podman and hack/container-tools.sh show which tool builds and
how: with a Docker daemon (or CONTAINER_TOOL set) the build is exactly `<tool> build -t IMG .`,
the Dockerfile's own base image; without one the container tools build on the local base. The
mirror is read from one-line and deb822 sources, never from a host named in the repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "container-tools.sh"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The Makefile beside recording tools: each writes its argv to <name>.argv."""
    work = tmp_path / "repo"
    (work / "hack").mkdir(parents=True)
    shutil.copy(ROOT / "Makefile", work / "Makefile")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, exit_code in (("docker", "${DOCKER_INFO_EXIT:-0}"), ("podman", "0")):
        tool = bin_dir / name
        tool.write_text(
            f'#!/bin/sh\nif [ "$1" = info ]; then exit {exit_code}; fi\n'
            f'printf "%s\\n" "$@" > "{tmp_path}/{name}.argv"\n'
        )
        tool.chmod(0o755)
    recorder = work / "hack" / "container-tools.sh"
    recorder.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{tmp_path}/container-tools.argv"\n')
    recorder.chmod(0o755)
    return work


def _make(tree: Path, *args: str, **env: str) -> dict[str, list[str]]:
    environ = {
        "PATH": f"{tree.parent / 'bin'}:/usr/bin:/bin",
        "HOME": str(tree.parent),
        **env,
    }
    proc = subprocess.run(
        ["make", "-s", "docker-build", *args], cwd=tree, env=environ, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {p.name.removesuffix(".argv"): p.read_text().splitlines() for p in tree.parent.glob("*.argv")}


def test_with_a_docker_daemon_the_build_is_docker_build_as_always(tree: Path) -> None:
    calls = _make(tree, "IMG=registry.example/tcm:v1")
    assert calls == {"docker": ["build", "-t", "registry.example/tcm:v1", "."]}


def test_a_chosen_tool_builds_as_always_and_passes_a_base_only_when_asked(tree: Path) -> None:
    assert _make(tree, "CONTAINER_TOOL=podman", "IMG=x:1", DOCKER_INFO_EXIT="1") == {
        "podman": ["build", "-t", "x:1", "."]
    }
    calls = _make(tree, "CONTAINER_TOOL=docker", "IMG=x:1", "PYTHON_IMAGE=mirror.example/python:3.12-slim")
    assert calls["docker"] == [
        "build",
        "--build-arg",
        "PYTHON_IMAGE=mirror.example/python:3.12-slim",
        "-t",
        "x:1",
        ".",
    ]


def test_without_a_docker_daemon_the_container_tools_build_on_the_local_base(tree: Path) -> None:
    calls = _make(tree, "IMG=x:2", "CONTAINER_BUILD_ARGS=--iidfile=/tmp/id", DOCKER_INFO_EXIT="1")
    assert calls == {"container-tools": ["build", "x:2", "--iidfile=/tmp/id"]}


def _mirror(apt: Path, suite: str = "bookworm") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), "mirror"],
        env={**os.environ, "APT_ETC": str(apt), "DEBIAN_SUITE": suite, "DEBIAN_MIRROR": ""},
        capture_output=True,
        text=True,
    )


def test_the_mirror_is_apts_for_the_suite_from_deb822_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "# the security archive first: not the suite's\n"
        "Types: deb\nURIs: http://security.example/debian-security\nSuites: bookworm-security\n"
        "Components: main\n\n"
        "Types: deb\nURIs: http://off.example/debian\nSuites: bookworm\nEnabled: no\n\n"
        "Types: deb-src deb\nURIs: http://mirror.example/debian http://second.example/debian\n"
        "Suites: bookworm bookworm-updates\nComponents: main\n"
    )
    proc = _mirror(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "http://mirror.example/debian"


def test_the_mirror_is_apts_for_the_suite_from_one_line_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list").write_text(
        "# deb http://commented.example/debian bookworm main\n"
        "deb-src http://src.example/debian bookworm main\n"
        "deb [signed-by=/usr/share/keyrings/k.gpg arch=amd64] http://line.example/debian bookworm main\n"
    )
    proc = _mirror(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "http://line.example/debian"


def test_no_source_for_the_suite_is_an_error_that_says_what_to_set(tmp_path: Path) -> None:
    (tmp_path / "sources.list").write_text("deb http://line.example/debian trixie main\n")
    proc = _mirror(tmp_path)
    assert proc.returncode != 0
    assert "DEBIAN_MIRROR" in proc.stderr


def test_no_mirror_host_is_written_into_the_script() -> None:
    text = SCRIPT.read_text()
    assert "deb.debian.org" not in text and "http://" not in text
