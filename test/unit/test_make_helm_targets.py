"""`make helm-install` / `helm-uninstall` call helm as the README says (a recording fake helm).

The real chart install is covered by test/integration/helm and test/e2e/deploy; here only the
Make recipe: how IMG becomes image.repository/tag, the wait, and the second upgrade that turns
the runtimes on once the manager is Ready.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _make(tmp_path: Path, target: str, *variables: str) -> list[list[str]]:
    record = tmp_path / "calls"
    fake = tmp_path / "helm"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {shlex.quote(str(record))}\n')
    fake.chmod(0o755)
    out = subprocess.run(
        ["make", "-s", "--no-print-directory", target, f"HELM={fake}", *variables],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "MAKEFLAGS": ""},
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return [line.split() for line in record.read_text().splitlines()]


@pytest.mark.parametrize(
    ("img", "repository", "tag"),
    [
        ("trainer-controller-manager-py:latest", "trainer-controller-manager-py", "latest"),
        ("localhost:5000/ml/tcm:v3", "localhost:5000/ml/tcm", "v3"),
        ("ghcr.io/me/tcm", "ghcr.io/me/tcm", "latest"),
    ],
)
def test_helm_install_sets_the_image_waits_and_then_enables_the_runtimes(
    img: str, repository: str, tag: str, tmp_path: Path
) -> None:
    install, runtimes = _make(tmp_path, "helm-install", f"IMG={img}")
    assert install[:3] == ["upgrade", "--install", "kubeflow-trainer"]
    assert install[3] == "charts/kubeflow-trainer"
    assert {"--namespace", "kubeflow-system", "--create-namespace", "--wait"} <= set(install)
    assert f"image.repository={repository}" in install and f"image.tag={tag}" in install
    assert runtimes[:2] == ["upgrade", "kubeflow-trainer"]
    assert {"--reuse-values", "runtimes.defaultEnabled=true", "--wait"} <= set(runtimes)


def test_helm_install_without_runtimes_and_uninstall(tmp_path: Path) -> None:
    (install,) = _make(tmp_path, "helm-install", "HELM_RUNTIMES=false", "HELM_ARGS=--set manager.replicas=2")
    assert "manager.replicas=2" in install
    (tmp_path / "calls").unlink()
    (uninstall,) = _make(tmp_path, "helm-uninstall")
    assert uninstall == [
        "uninstall", "kubeflow-trainer", "--namespace", "kubeflow-system", "--wait", "--timeout", "300s"
    ]  # fmt: skip
