"""The bridge CRDs of ``config/migration/v2.1-to-v2.3`` and which TrainJob CRD a cluster has.

Why a bridge: migrate must write the v2.3 form of every stored object while the API server
still serves what is stored, and neither level's CRDs accept both forms:

* v2.1's TrainJob CRD prunes ``spec.runtimePatches`` (an update carrying it loses it);
* v2.1's runtime CRDs default ``mlPolicy.torch.numProcPerNode`` to ``auto``, on write and on
  every read, so it cannot be removed under them;
* v2.3's CRDs prune ``spec.podTemplateOverrides``, ``spec.labels``, ``spec.annotations`` and the
  runtimes' torch fields on read (they stay in etcd but no client sees them any more), and make
  ``spec.trainer`` immutable, so ``numProcPerNode`` could not be rewritten under them.

The bridge is v2.1's CRDs (so a v2.1 manager and v2.1 clients keep working over it) with two
changes: the TrainJob's ``spec`` also has v2.3.0's ``runtimePatches`` property (its schema and
CEL rules as v2.3's CRD has them), and the runtimes' ``torch.numProcPerNode`` has no default.
``make manifests`` writes them from the two levels' CRD files; a unit test keeps the
committed files equal to what this module makes.
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml

from manager.meta.object import Json

__all__ = [
    "BRIDGE_ANNOTATION",
    "BRIDGE_DIR",
    "CrdForm",
    "bridge_crds",
    "trainjob_crd_form",
]

ROOT = Path(__file__).resolve().parents[2]
V2_1_DIR = ROOT / "config" / "crd" / "bases"
V2_3_DIR = ROOT / "config" / "overlays" / "v2.3" / "crd"
BRIDGE_DIR = ROOT / "config" / "migration" / "v2.1-to-v2.3"
TRAINJOBS = "trainer.kubeflow.org_trainjobs.yaml"
RUNTIMES = ("trainer.kubeflow.org_trainingruntimes.yaml", "trainer.kubeflow.org_clustertrainingruntimes.yaml")
BRIDGE_ANNOTATION = "trainer.kubeflow.org/migration-bridge"
"""Set on the bridge CRDs (value ``v2.1-to-v2.3``): what they are, for whoever lists CRDs."""
BRIDGE = "v2.1-to-v2.3"

CrdForm = Literal["v2.1", "bridge", "v2.3", "unknown", "missing"]


def _load(path: Path) -> Json:
    with path.open() as f:
        doc: Json = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return doc


def _storage_schema(crd: Mapping[str, Any]) -> Json:
    for version in (crd.get("spec") or {}).get("versions") or ():
        if version.get("storage"):
            schema: Json = version["schema"]["openAPIV3Schema"]
            return schema
    raise ValueError(f"CustomResourceDefinition {crd.get('metadata', {}).get('name')}: no storage version")


def _mark(crd: Json) -> Json:
    annotations = crd.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[BRIDGE_ANNOTATION] = BRIDGE
    return crd


def bridge_trainjob_crd(v2_1: Json, v2_3: Json) -> Json:
    """v2.1's TrainJob CRD whose ``spec`` also has v2.3's ``runtimePatches``."""
    bridge = _mark(copy.deepcopy(v2_1))
    spec = _storage_schema(bridge)["properties"]["spec"]["properties"]
    spec["runtimePatches"] = copy.deepcopy(
        _storage_schema(v2_3)["properties"]["spec"]["properties"]["runtimePatches"]
    )
    return bridge


def bridge_runtime_crd(v2_1: Json) -> Json:
    """v2.1's runtime CRD whose ``mlPolicy.torch.numProcPerNode`` has no default."""
    bridge = _mark(copy.deepcopy(v2_1))
    spec = _storage_schema(bridge)["properties"]["spec"]["properties"]
    torch = spec["mlPolicy"]["properties"]["torch"]["properties"]
    torch["numProcPerNode"].pop("default", None)
    return bridge


def bridge_crds() -> dict[str, Json]:
    """File name -> bridge CRD, from the v2.1 and v2.3 CRD files of this checkout."""
    out = {TRAINJOBS: bridge_trainjob_crd(_load(V2_1_DIR / TRAINJOBS), _load(V2_3_DIR / TRAINJOBS))}
    for name in RUNTIMES:
        out[name] = bridge_runtime_crd(_load(V2_1_DIR / name))
    return out


def _spec_fields(crd: Mapping[str, Any]) -> set[str]:
    try:
        return set(_storage_schema(crd)["properties"]["spec"].get("properties") or {})
    except (KeyError, ValueError, TypeError):
        return set()


def trainjob_crd_form(crd: Mapping[str, Any] | None) -> CrdForm:
    """Which TrainJob CRD this is: v2.1's (``podTemplateOverrides``), v2.3's (``runtimePatches``)
    or the bridge (both)."""
    if crd is None:
        return "missing"
    fields = _spec_fields(crd)
    if {"podTemplateOverrides", "runtimePatches"} <= fields:
        return "bridge"
    if "podTemplateOverrides" in fields:
        return "v2.1"
    if "runtimePatches" in fields:
        return "v2.3"
    return "unknown"


def runtime_crd_defaults_torch_num_proc(crd: Mapping[str, Any] | None) -> bool:
    """Whether a runtime CRD still defaults ``mlPolicy.torch.numProcPerNode`` (v2.1's does)."""
    if crd is None:
        return False
    try:
        torch = _storage_schema(crd)["properties"]["spec"]["properties"]["mlPolicy"]["properties"]["torch"]
        return "default" in torch["properties"]["numProcPerNode"]
    except (KeyError, ValueError, TypeError):
        return False


HEADER = (
    "# The bridge CRDs of a v2.1 -> v2.3 migration (docs/migration.md), written by\n"
    "# `make manifests` (trainer/migrate/crds.py): v2.1's {name} CRD{change}.\n"
)


def write(directory: Path = BRIDGE_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, crd in bridge_crds().items():
        change = (
            " whose spec also has v2.3's runtimePatches"
            if name == TRAINJOBS
            else " without the default of mlPolicy.torch.numProcPerNode"
        )
        path = directory / name
        text = HEADER.format(name=crd["spec"]["names"]["kind"], change=change)
        text += yaml.safe_dump(crd, sort_keys=False, default_flow_style=False, width=100)
        path.write_text(text)
        written.append(path)
    kustomization = directory / "kustomization.yaml"
    kustomization.write_text(
        "# `kubectl apply --server-side -k config/migration/v2.1-to-v2.3`: the bridge CRDs, in place of\n"
        "# v2.1's, before `trainer-controller-manager migrate --to v2.3` (docs/migration.md).\n"
        "apiVersion: kustomize.config.k8s.io/v1beta1\n"
        "kind: Kustomization\n"
        "resources:\n" + "".join(f"  - {name}\n" for name in bridge_crds())
    )
    written.append(kustomization)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.migrate.crds", description=__doc__)
    parser.add_argument("--dir", default=str(BRIDGE_DIR), help="where to write the bridge CRDs")
    args = parser.parse_args(argv)
    for path in write(Path(args.dir)):
        print(path, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
