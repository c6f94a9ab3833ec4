"""Each level's generated CRDs are upstream's, descriptions aside.

Upstream's CRDs are read from the Go module cache (``go mod download`` of the Trainer and
JobSet releases the level names, as ``trainer.conformance.originals`` does): the TrainJob,
TrainingRuntime and ClusterTrainingRuntime CRDs of ``kubeflow/trainer`` and the JobSet CRD of
``sigs.k8s.io/jobset``. Compared with every ``description`` stripped (ours are our own words)
and without the ``controller-gen.kubebuilder.io/version`` annotation; everything else (types,
formats, required fields, defaults, enums, bounds, list and map types, CEL rules and their
messages, printer columns, names, scope, subresources) must be equal.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager.envtest.assets import GoMain
from trainer.api import crdgen
from trainer.conformance.originals import module_dir
from trainer.levels import LEVELS
from trainer.levels.level import ApiLevel

TRAINER_MODULE = "github.com/kubeflow/trainer/v2"
JOBSET_MODULE = "sigs.k8s.io/jobset"
TRAINER_CRDS = "manifests/base/crds"
JOBSET_CRDS = "config/components/crd/bases"
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def _module(module: str, version: str) -> Path:
    return module_dir(GoMain(module, version, module, "source-only"))


def upstream_crd(level: ApiLevel, file: str) -> Path:
    if file.startswith("jobset."):
        return _module(JOBSET_MODULE, level.jobset_version) / JOBSET_CRDS / file
    return _module(TRAINER_MODULE, level.trainer_version) / TRAINER_CRDS / file


def comparable(document: dict[str, Any]) -> dict[str, Any]:
    out = dict(_without_descriptions(document))
    metadata = dict(out["metadata"])
    annotations = {
        k: v
        for k, v in (metadata.pop("annotations", None) or {}).items()
        if k != "controller-gen.kubebuilder.io/version"
    }
    if annotations:
        metadata["annotations"] = annotations
    out["metadata"] = metadata
    return out


def _without_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_descriptions(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [_without_descriptions(v) for v in node]
    return node


def differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Readable differences by JSON path (the first ones are enough to see what broke)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        found = []
        for key in sorted(set(ours) | set(theirs)):
            if key not in theirs:
                found.append(f"{path}.{key}: only ours: {json.dumps(ours[key])[:200]}")
            elif key not in ours:
                found.append(f"{path}.{key}: only upstream's: {json.dumps(theirs[key])[:200]}")
            else:
                found.extend(differences(ours[key], theirs[key], f"{path}.{key}"))
        return found
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [
            d
            for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    if ours != theirs:
        return [f"{path}: ours {json.dumps(ours)[:200]} != upstream's {json.dumps(theirs)[:200]}"]
    return []


CASES = [
    (level, kind)
    for level in LEVELS.values()
    for kind in level.crd_kinds()
    if kind.group() in ("trainer.kubeflow.org", "jobset.x-k8s.io")
]


@pytest.mark.parametrize(("level", "kind"), CASES, ids=[f"{level.name}-{kind.kind}" for level, kind in CASES])
def test_generated_crd_is_upstreams_without_descriptions(level: ApiLevel, kind: Any) -> None:
    ours = yaml.load(crdgen.render(kind, level.openapi_snapshot()), Loader=LOADER)
    documents = [
        d for d in yaml.load_all(upstream_crd(level, crdgen.file_name(kind)).read_text(), Loader=LOADER) if d
    ]
    assert len(documents) == 1
    diff = differences(comparable(ours), comparable(documents[0]))
    assert diff == [], f"{level.describe()}: {kind.kind} differs from upstream's CRD in {len(diff)} places"


def test_the_comparison_sees_a_difference() -> None:
    level = LEVELS["v2.3"]
    (trainjob,) = [k for k in level.crd_kinds() if k.kind == "TrainJob"]
    theirs = comparable(yaml.load(upstream_crd(level, crdgen.file_name(trainjob)).read_text(), Loader=LOADER))
    v2_1_trainjob = yaml.load(crdgen.render(LEVELS["v2.1"].crd_kinds()[0]), Loader=LOADER)
    diff = differences(comparable(v2_1_trainjob), theirs)
    assert any("runtimePatches: only upstream's" in d for d in diff), diff[:5]
    assert any("podTemplateOverrides: only ours" in d for d in diff), diff[:5]
