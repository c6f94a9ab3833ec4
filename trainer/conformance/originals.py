"""The Go originals we compare against, built from the Go module proxy (nothing is committed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from manager.envtest.assets import GoMain, ensure_go_main
from manager.envtest.errors import AssetBuildError

JOBSET = GoMain("sigs.k8s.io/jobset", "v0.10.1", "sigs.k8s.io/jobset", "jobset-controller-manager")
TRAINER = GoMain(
    "github.com/kubeflow/trainer/v2",
    "v2.1.0",
    "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager",
    "trainer-controller-manager",
)
ORIGINALS = (JOBSET, TRAINER)

#: Upstream's own e2e suites (``test/e2e`` of each module), compiled with ``go test -c``.
JOBSET_E2E = GoMain(
    JOBSET.module, JOBSET.version, "sigs.k8s.io/jobset/test/e2e", "jobset-e2e.test", test=True
)
TRAINER_E2E = GoMain(
    TRAINER.module, TRAINER.version, "github.com/kubeflow/trainer/v2/test/e2e", "trainer-e2e.test", test=True
)
E2E_SUITES = (JOBSET_E2E, TRAINER_E2E)


def build_all(*, quiet: bool = False) -> dict[str, tuple[Path, float]]:
    """Both originals, built now when not cached: name -> (path, seconds spent building)."""
    return {main.name: ensure_go_main(main, quiet=quiet) for main in ORIGINALS}


def build_e2e_suites(*, quiet: bool = False) -> dict[str, tuple[Path, float]]:
    """Both upstream e2e test binaries, built now when not cached: name -> (path, seconds)."""
    return {suite.name: ensure_go_main(suite, quiet=quiet) for suite in E2E_SUITES}


def module_dir(main: GoMain) -> Path:
    """The module's source in the Go module cache (downloaded when missing): its CRDs live there."""
    if shutil.which("go") is None:
        raise AssetBuildError("go toolchain", "`go` is not on PATH")
    proc = subprocess.run(
        ["go", "mod", "download", "-json", f"{main.module}@{main.version}"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GOFLAGS": "-modcacherw", "GOWORK": "off"},
        cwd="/",
    )
    if proc.returncode != 0:
        raise AssetBuildError(f"{main.module}@{main.version}: go mod download", proc.stdout + proc.stderr)
    return Path(json.loads(proc.stdout)["Dir"])


def upstream_crds() -> list[Path]:
    """The CRDs each original ships (as a user installing upstream would get them)."""
    return [
        module_dir(JOBSET) / "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",
        module_dir(TRAINER) / "manifests/base/crds",
    ]
