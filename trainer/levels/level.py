"""The ``ApiLevel`` value and its errors."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
    jobset_version: str
    """The JobSet release whose API and behaviour this level has."""
    trainjob_spec_fields: frozenset[str]
    """``spec`` properties only this level's TrainJob CRD has: how an installed CRD is told apart."""
    manifests: str
    """The kustomize directory (under ``config/``) that installs this level."""

    def owns_trainjob_crd(self, crd: Mapping[str, Any]) -> bool:
        """Whether ``crd`` (a TrainJob CustomResourceDefinition) is this level's."""
        spec_fields = _trainjob_spec_fields(crd)
        return bool(spec_fields) and self.trainjob_spec_fields <= spec_fields

    def describe(self) -> str:
        return f"{self.name} (trainer {self.trainer_version}, jobset {self.jobset_version})"


def _trainjob_spec_fields(crd: Mapping[str, Any]) -> frozenset[str]:
    for version in (crd.get("spec") or {}).get("versions") or ():
        if not version.get("storage"):
            continue
        root = ((version.get("schema") or {}).get("openAPIV3Schema")) or {}
        spec = (root.get("properties") or {}).get("spec") or {}
        return frozenset((spec.get("properties") or {}).keys())
    return frozenset()
