"""What a benchmark runs at one API level: the one place a scenario learns it (docs/bench.md).

Every scenario that puts TrainJobs on a cluster (``burst.py``, ``admission.py``, ``scale.py``,
``floor.py``; ``kueue_burst.py`` takes the ``ApiLevel`` straight to the harness) takes
``--level`` (choices: ``trainer.levels.LEVELS``, default ``levels.DEFAULT``, v2.3) and reads
from a ``BenchLevel`` what the level gives it, all of it from the level seam
(``trainer.levels.ApiLevel``, ``trainer.conformance.harness.LevelInputs``,
``trainer.conformance.originals``, ``trainer.install``):

- the cluster's CRDs and the webhook configurations each side registers (ours: the level's
  manifests; theirs: upstream's of the level's releases);
- our manager's ``--api-level``, and the Go originals of the level (built once, cached under
  ``~/.cache/trainer-py/k8s-assets/go-mains``);
- the runtimes the level ships (``ApiLevel.runtimes``: what ``make deploy`` applies);
- the TrainJob the scenarios create, valid at the level, and the webhooks that answer its create;
- the name of each result file, so that two levels' runs into one directory stay apart.

The harness's unnamed level (``originals.UNNAMED_LEVEL``, v2.1) is started as every benchmark
before levels existed was (``config/crd``, ``config/webhook``): the v2.1 figures of docs/bench.md
stay comparable with a new v2.1 run.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from manager.envtest.certs import TinyCA
from trainer import install, levels
from trainer.conformance import harness, originals
from trainer.conformance.webhook_probes import configurations
from trainer.levels import ApiLevel

Json = dict[str, Any]

LEVEL_NAMES = tuple(levels.LEVELS)
"""The levels a benchmark runs at (``--level`` choices)."""
DEFAULT = levels.DEFAULT.name
"""``--level`` when none is named: the product's default level (v2.3)."""
UNRECORDED = originals.UNNAMED_LEVEL.name
"""The level of a result that records none: every run before the benchmarks took ``--level`` was
at the harness's unnamed level, v2.1."""
RUNTIME = "torch-distributed"
"""The runtime of every benchmark TrainJob (each level ships one of that name)."""
TRAINJOB_API = "trainer.kubeflow.org/v1alpha1"


@dataclass(frozen=True)
class BenchLevel:
    """One API level as the benchmarks run it."""

    api: ApiLevel

    @property
    def name(self) -> str:
        return self.api.name

    @property
    def inputs(self) -> harness.LevelInputs:
        return harness.LevelInputs(self.api)

    @property
    def harness_level(self) -> ApiLevel | None:
        """What ``harness.start_ours``/``start_theirs`` take as ``level``: None for the harness's
        unnamed level (its ``config/crd`` and ``config/webhook``, as the v2.1 figures were taken)."""
        return None if self.api is originals.UNNAMED_LEVEL else self.api

    def originals(self) -> originals.Originals:
        """The Go jobset and trainer managers of the level (theirs)."""
        return originals.for_level(self.api)

    def crds(self) -> list[Path]:
        """The CRD files or directories of a cluster our manager serves at this level (the scale
        scenario's one cluster serves both sides)."""
        return [harness.CRD_DIR] if self.harness_level is None else self.inputs.our_crds()

    def runtimes(self) -> list[Path]:
        """The ClusterTrainingRuntimes the level ships (``config/<ApiLevel.runtimes>``), in order."""
        return install.resource_files(install.ROOT / "config" / self.api.runtimes)

    def our_manager(
        self, ca: TinyCA, base: Path, kubeconfig: Path, config_overrides: dict[str, Any] | None = None
    ) -> harness.OurManager:
        """Our manager at this level (``--api-level``), every component on; ``config_overrides``:
        Configuration fields beyond the harness's (the shipped ``controller`` and ``clientConnection``)."""
        return harness.our_manager(
            ca, base, kubeconfig, api_level=self.api, config_overrides=config_overrides
        )

    def go_managers(self, ca: TinyCA, base: Path, kubeconfig: Path, **kwargs: Any) -> harness.GoManagers:
        """The level's Go originals (built now when not cached) configured under ``base``;
        ``kwargs`` are ``harness.go_managers``'."""
        return harness.go_managers(
            self.originals().build(quiet=True),
            ca,
            base,
            kubeconfig,
            jobset_release=self.api.jobset_version,
            **kwargs,
        )

    def our_hooks(self, ours: harness.OurManager) -> list[tuple[Json, int]]:
        """The webhook configurations our manager answers at this level, with its port."""
        if self.harness_level is None:
            return _with_ports(ours.webhook_ports())
        return ours.level_hooks(self.inputs)

    def our_configurations(self) -> list[Json]:
        """The webhook configurations our manager registers at this level."""
        if self.harness_level is None:
            return configurations(sorted(harness.WEBHOOK_DIR.glob("*.yaml")))
        return self.inputs.our_webhooks()

    def their_hooks(self, go: harness.GoManagers) -> list[tuple[Json, int]]:
        """The webhook configurations the Go managers answer at this level, each with its port."""
        if self.harness_level is None:
            return _with_ports(go.webhook_ports())
        return go.level_hooks(self.inputs)

    def trainjob(self, name: str, namespace: str, suspend: bool) -> Json:
        """A TrainJob on ``RUNTIME``: its runtime's defaults only, nothing the level removed
        (no ``podTemplateOverrides``, ``labels`` or ``annotations``, which v2.3 dropped)."""
        return {
            "apiVersion": TRAINJOB_API,
            "kind": "TrainJob",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"runtimeRef": {"name": RUNTIME}, "suspend": suspend},
        }

    def trainjob_webhooks(self) -> list[str]:
        """The webhooks a TrainJob create goes through at this level (ours and Go's are named
        alike), mutating first as the API server calls them."""
        found = [
            (doc["kind"] != "MutatingWebhookConfiguration", hook["name"])
            for doc in self.our_configurations()
            for hook in doc.get("webhooks") or []
            if any(
                "trainjobs" in (rule.get("resources") or []) and "CREATE" in (rule.get("operations") or [])
                for rule in hook.get("rules") or []
            )
        ]
        return [name for _validating, name in sorted(found)]

    def result_name(self, stem: str, suffix: str) -> str:
        """The result file of a scenario run at this level, e.g. ``burst-running-v2.3.json``."""
        return f"{stem}-{self.name}{suffix}"


def _with_ports(hook_ports: dict[Path, int]) -> list[tuple[Json, int]]:
    return [(doc, port) for path, port in hook_ports.items() for doc in configurations([path])]


def get(name: str) -> BenchLevel:
    """The level named ``name`` (one of ``LEVEL_NAMES``)."""
    return BenchLevel(levels.get(name))


def add_argument(parser: argparse.ArgumentParser) -> None:
    """``--level``, as every scenario takes it."""
    parser.add_argument(
        "--level",
        choices=LEVEL_NAMES,
        default=DEFAULT,
        help=f"the API level the cluster, our manager and the Go originals run (default {DEFAULT})",
    )
