"""The Go originals we compare against, built from the Go module proxy (nothing is committed).

One pair per API level (``trainer/levels``): the Go jobset and trainer managers of the level's
JobSet and Trainer releases (v2.1: jobset v0.10.1 + trainer v2.1.0; v2.3: jobset v0.12.0 +
trainer v2.3.0), each built once into its own cache directory (``<module>@<version>``), and
upstream's own manifests of those releases (CRDs, webhook configurations, runtimes), read from
the Go module cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from manager.envtest.assets import GoMain, ensure_go_main
from manager.envtest.errors import AssetBuildError
from trainer import levels
from trainer.levels import ApiLevel

JOBSET_MODULE = "sigs.k8s.io/jobset"
TRAINER_MODULE = "github.com/kubeflow/trainer/v2"
TRAINER_PACKAGE = f"{TRAINER_MODULE}/cmd/trainer-controller-manager"


def jobset_main(version: str) -> GoMain:
    return GoMain(JOBSET_MODULE, version, JOBSET_MODULE, "jobset-controller-manager")


def trainer_main(version: str) -> GoMain:
    return GoMain(TRAINER_MODULE, version, TRAINER_PACKAGE, "trainer-controller-manager")


@dataclass(frozen=True)
class Originals:
    """The Go managers of one API level and where upstream's manifests of it are."""

    level: ApiLevel
    jobset: GoMain
    trainer: GoMain

    @property
    def mains(self) -> tuple[GoMain, GoMain]:
        return (self.jobset, self.trainer)

    def describe(self) -> str:
        return f"jobset {self.jobset.version} + trainer {self.trainer.version}"

    def build(self, *, quiet: bool = False) -> dict[str, tuple[Path, float]]:
        """Both managers, built now when not cached: name -> (path, seconds spent building)."""
        return {main.name: ensure_go_main(main, quiet=quiet) for main in self.mains}

    def crds(self) -> list[Path]:
        """The CRDs each original ships (as a user installing upstream would get them)."""
        return [
            module_dir(self.jobset) / "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",
            module_dir(self.trainer) / "manifests/base/crds",
        ]

    def trainer_webhooks(self) -> Path:
        """Upstream trainer's webhook configurations (``manifests/base/webhook/manifests.yaml``,
        before its kustomize patches: names and object selectors are applied by
        ``harness.upstream_webhooks``)."""
        return module_dir(self.trainer) / "manifests/base/webhook"

    def jobset_webhooks(self) -> Path:
        """Upstream JobSet's webhook configurations (``config/components/webhook``)."""
        return module_dir(self.jobset) / "config/components/webhook"

    def runtimes(self) -> Path:
        """The runtimes upstream trainer ships (``manifests/base/runtimes``, data-cache included)."""
        return module_dir(self.trainer) / "manifests/base/runtimes"


def for_level(level: ApiLevel) -> Originals:
    """The Go originals of ``level``: its JobSet and Trainer releases."""
    return Originals(level, jobset_main(level.jobset_version), trainer_main(level.trainer_version))


#: The default level's pair (v2.1: jobset v0.10.1, trainer v2.1.0), as before levels existed.
DEFAULT = for_level(levels.DEFAULT)
JOBSET = DEFAULT.jobset
TRAINER = DEFAULT.trainer
ORIGINALS = DEFAULT.mains

#: Upstream's own e2e suites (``test/e2e`` of each module), compiled with ``go test -c``.
JOBSET_E2E = GoMain(
    JOBSET.module, JOBSET.version, "sigs.k8s.io/jobset/test/e2e", "jobset-e2e.test", test=True
)
TRAINER_E2E = GoMain(
    TRAINER.module, TRAINER.version, "github.com/kubeflow/trainer/v2/test/e2e", "trainer-e2e.test", test=True
)
E2E_SUITES = (JOBSET_E2E, TRAINER_E2E)


def build_all(*, quiet: bool = False, level: ApiLevel | None = None) -> dict[str, tuple[Path, float]]:
    """Both originals of ``level`` (default: the default level), built now when not cached:
    name -> (path, seconds spent building)."""
    return for_level(level or levels.DEFAULT).build(quiet=quiet)


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


def upstream_crds(level: ApiLevel | None = None) -> list[Path]:
    """The CRDs each original of ``level`` (default: the default level) ships."""
    return for_level(level or levels.DEFAULT).crds()
