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
import re
import shutil
import subprocess
from dataclasses import dataclass, field
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

    @property
    def jobset_e2e(self) -> GoMain:
        """JobSet's own e2e suite of this release (``test/e2e``), compiled with ``go test -c``."""
        return GoMain(
            self.jobset.module,
            self.jobset.version,
            f"{JOBSET_MODULE}/test/e2e",
            "jobset-e2e.test",
            test=True,
            optimize=False,
        )

    @property
    def trainer_e2e(self) -> GoMain:
        """Trainer's own e2e suite of this release (``test/e2e``), compiled with ``go test -c``."""
        return GoMain(
            self.trainer.module,
            self.trainer.version,
            f"{TRAINER_MODULE}/test/e2e",
            "trainer-e2e.test",
            test=True,
            optimize=False,
        )

    def e2e_suites(self) -> dict[str, GoMain]:
        """Both upstream e2e suites of the level, by suite name (``jobset``, ``trainer``)."""
        return {"jobset": self.jobset_e2e, "trainer": self.trainer_e2e}

    def e2e_setup(self) -> E2eSetup:
        """What upstream trainer's e2e cluster gets beyond the manager and its runtimes, read from
        the release's ``hack/e2e-setup-cluster.sh`` (feature gates, extra manifests)."""
        root = module_dir(self.trainer)
        return E2eSetup.parse((root / E2E_SETUP_SCRIPT).read_text(), root)


#: Upstream trainer's script that prepares the cluster its ``test/e2e`` suite runs on.
E2E_SETUP_SCRIPT = "hack/e2e-setup-cluster.sh"


@dataclass(frozen=True)
class E2eSetup:
    """Upstream trainer's e2e cluster setup beyond the manager and ``manifests/base/runtimes``:
    the feature gates its manager runs with and the manifests applied after the runtimes."""

    feature_gates: dict[str, bool] = field(default_factory=dict)
    manifests: tuple[Path, ...] = ()

    @classmethod
    def parse(cls, script: str, root: Path) -> E2eSetup:
        """The kustomize patch's ``--feature-gates=A=true,B=false`` (the Helm path sets the same
        gates) and each ``kubectl apply ... -f <file>.yaml`` of the script, ``root``-relative."""
        gates: dict[str, bool] = {}
        for found in re.findall(r"--feature-gates=(\S+)", script):
            for pair in found.split(","):
                name, _, value = pair.partition("=")
                gates[name] = value.lower() == "true"
        lines = script.replace("\\\n", " ").splitlines()  # continued lines joined
        applied = [line for line in lines if "kubectl apply" in line]  # not the GPU-only `create`
        manifests = tuple(
            root / rel for line in applied for rel in re.findall(r"\s-f\s+(\S+\.ya?ml)\b", line)
        )
        return cls(gates, manifests)


def for_level(level: ApiLevel) -> Originals:
    """The Go originals of ``level``: its JobSet and Trainer releases."""
    return Originals(level, jobset_main(level.jobset_version), trainer_main(level.trainer_version))


UNNAMED_LEVEL: ApiLevel = levels.get("v2.1")
"""The level of the harness's callers that name none: the v2.1 scenario set and the suites
written before v2.3 became the product's default, against ``config/crd``, ``config/webhook`` and
``config/runtimes`` (the benchmarks at ``--level v2.1`` start it so, as their v2.1 figures were
taken). The commands (``conformance``, ``upstream-e2e``, ``make``) and the benchmarks default to
the product's level, ``levels.DEFAULT`` (v2.3)."""

#: The unnamed level's pair (v2.1: jobset v0.10.1, trainer v2.1.0), as before levels existed.
DEFAULT = for_level(UNNAMED_LEVEL)
JOBSET = DEFAULT.jobset
TRAINER = DEFAULT.trainer
ORIGINALS = DEFAULT.mains

#: Upstream's own e2e suites of the unnamed level (v2.1) (``test/e2e`` of each module).
JOBSET_E2E = DEFAULT.jobset_e2e
TRAINER_E2E = DEFAULT.trainer_e2e
E2E_SUITES = (JOBSET_E2E, TRAINER_E2E)


def build_all(*, quiet: bool = False, level: ApiLevel | None = None) -> dict[str, tuple[Path, float]]:
    """Both originals of ``level`` (default: ``UNNAMED_LEVEL``), built now when not cached:
    name -> (path, seconds spent building)."""
    return for_level(level or UNNAMED_LEVEL).build(quiet=quiet)


def build_e2e_suites(*, quiet: bool = False, level: ApiLevel | None = None) -> dict[str, tuple[Path, float]]:
    """Both upstream e2e test binaries of ``level`` (default: ``UNNAMED_LEVEL``), built now when
    not cached: name -> (path, seconds)."""
    suites = for_level(level or UNNAMED_LEVEL).e2e_suites().values()
    return {suite.name: ensure_go_main(suite, quiet=quiet) for suite in suites}


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
    """The CRDs each original of ``level`` (default: ``UNNAMED_LEVEL``) ships."""
    return for_level(level or UNNAMED_LEVEL).crds()
