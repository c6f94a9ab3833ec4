"""The ``ApiLevel`` value and its errors."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainer.api.base import KindModel

from trainer.jobset.levels import JobSetLevel
from trainer.runtime.levels import RuntimeLevel

__all__ = ["ApiLevel", "CrdLevelMismatch"]


class CrdLevelMismatch(RuntimeError):
    """The TrainJob CRD in the cluster is not the one of the manager's level."""


@dataclass(frozen=True)
class ApiLevel:
    """One upstream release line, as the manager speaks it."""

    name: str
    """The Configuration's ``apiLevel`` value, e.g. ``v2.3``."""
    trainer_version: str
    """The Kubeflow Trainer release whose API and behaviour this level has."""
    jobset: JobSetLevel
    """The JobSet release whose API and behaviour this level has (``trainer/jobset/levels``)."""
    trainjob_spec_fields: frozenset[str]
    """``spec`` properties only this level's TrainJob CRD has: how an installed CRD is told apart."""
    manifests: str
    """The kustomize directory (under ``config/``) that installs this level (``make deploy``)."""
    local_manifests: str
    """The kustomize directory (under ``config/``, ``resources:`` only) that ``make install`` and
    ``make run`` put into a cluster for a manager outside it: CRDs, runtimes, webhooks."""
    runtimes: str
    """The kustomize directory (under ``config/``) of the ClusterTrainingRuntimes shipped at this
    level (``make deploy`` applies it once the manager is ready)."""
    api_models: str
    """The module naming this level's API models (``CRD_KINDS``, ``ALL_CRD_KINDS``,
    ``OPENAPI_SNAPSHOT``), e.g. ``trainer.api.v2_3.kinds``; imported on first use, so a manager
    of one level never loads the other level's models. ``crdgen --models=`` takes the same name."""
    crd_dir: str
    """The directory (under ``config/``) ``make manifests`` writes this level's ``CRD_KINDS`` to;
    the other kinds of ``ALL_CRD_KINDS`` are v2.1's classes, whose CRDs are in ``crd/bases``."""
    runtime: RuntimeLevel
    """How a TrainJob customises its runtime at this level (``trainer/runtime/levels``)."""
    status_server: str = "trainer.statusserver"
    """The module of the TrainJob status server (TrainJobStatus gate) at this level: its
    ``setup_status_server(mgr, port=, qps=, burst=, cert_dir=, host=)`` builds the server; the
    entry point imports it only with the gate on (v2.1: ``trainer.statusserver``, TokenReview;
    v2.3: ``trainer.statusserver_v2_3``, Trainer v2.3.0's OIDC verification)."""

    @property
    def jobset_version(self) -> str:
        """The JobSet release of this level, e.g. ``v0.12.0``."""
        return self.jobset.version

    def owns_trainjob_crd(self, crd: Mapping[str, Any]) -> bool:
        """Whether ``crd`` (a TrainJob CustomResourceDefinition) is this level's."""
        spec_fields = _trainjob_spec_fields(crd)
        return bool(spec_fields) and self.trainjob_spec_fields <= spec_fields

    def describe(self) -> str:
        return f"{self.name} (trainer {self.trainer_version}, jobset {self.jobset_version})"

    def crd_kinds(self) -> tuple[type[KindModel], ...]:
        """Every kind whose CRD this level installs, as this level's models."""
        return tuple(importlib.import_module(self.api_models).ALL_CRD_KINDS)

    def generated_crd_kinds(self) -> tuple[type[KindModel], ...]:
        """The kinds whose CRDs are generated into ``crd_dir`` for this level."""
        return tuple(importlib.import_module(self.api_models).CRD_KINDS)

    def openapi_snapshot(self) -> str:
        """The OpenAPI snapshot (``trainer/api/openapi``) of the core types this level's CRDs embed."""
        return str(importlib.import_module(self.api_models).OPENAPI_SNAPSHOT)


def _trainjob_spec_fields(crd: Mapping[str, Any]) -> frozenset[str]:
    for version in (crd.get("spec") or {}).get("versions") or ():
        if not version.get("storage"):
            continue
        root = ((version.get("schema") or {}).get("openAPIV3Schema")) or {}
        spec = (root.get("properties") or {}).get("spec") or {}
        return frozenset((spec.get("properties") or {}).keys())
    return frozenset()
