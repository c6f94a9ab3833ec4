"""Level v2.3's CRDs: committed = generated from the v2.3 models, and what upstream v2.3.0 says.

Field-by-field expectations below are written out from upstream's published CRDs (Trainer
v2.3.0, JobSet v0.12.0); ``test_crds_vs_upstream.py`` compares the whole schemas.
"""

from __future__ import annotations

import functools
import json
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from trainer.api import crdgen
from trainer.api.core import ObjectMeta
from trainer.api.v2_3 import kinds as v2_3
from trainer.levels import LEVELS
from trainer.levels.v2_3 import V2_3

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "config"
OVERLAY = CONFIG / V2_3.crd_dir
IMMUTABLE = [{"rule": "self == oldSelf", "message": "field is immutable"}]
JOBSET_IMMUTABLE = [{"rule": "self == oldSelf", "message": "Value is immutable"}]
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
TJ = "trainer.kubeflow.org_trainjobs.yaml"
TR = "trainer.kubeflow.org_trainingruntimes.yaml"
CTR = "trainer.kubeflow.org_clustertrainingruntimes.yaml"
JS = "jobset.x-k8s.io_jobsets.yaml"


def _without_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_descriptions(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [_without_descriptions(v) for v in node]
    return node


def at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """Walk ``a.b[].c``: properties by name, ``[]`` into array items."""
    node = schema
    for part in path.split("."):
        node = node["properties"][part.removesuffix("[]")]
        if part.endswith("[]"):
            node = node["items"]
    return node


def walk(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        return [node, *(n for value in node.values() for n in walk(value))]
    if isinstance(node, list):
        return [n for value in node for n in walk(value)]
    return []


def _models(model: type[BaseModel], seen: set[type[BaseModel]]) -> set[type[BaseModel]]:
    """Every model class reachable from ``model`` (root metadata excluded: its schema is ``object``)."""
    if model in seen or model is ObjectMeta:
        return seen
    seen.add(model)
    for info in model.model_fields.values():
        for sub in _nested(info.annotation):
            _models(sub, seen)
    return seen


def _nested(tp: Any) -> list[type[BaseModel]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for arg in typing.get_args(tp) for m in _nested(arg)]


@functools.cache
def _generated() -> dict[str, str]:
    return crdgen.generate(kinds=v2_3.CRD_KINDS, snapshot=v2_3.OPENAPI_SNAPSHOT)


def load(name: str) -> dict[str, Any]:
    return dict(yaml.load(_generated()[name], Loader=LOADER))


def schema_of(name: str) -> dict[str, Any]:
    return dict(_without_descriptions(load(name)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]))


def test_committed_v2_3_crds_match_the_models() -> None:
    on_disk = {p.name: p.read_text() for p in OVERLAY.glob("*.yaml") if p.name != "kustomization.yaml"}
    assert sorted(on_disk) == sorted(_generated()), "run `make manifests`"
    for name, text in _generated().items():
        assert on_disk[name] == text, f"{OVERLAY.relative_to(ROOT)}/{name} is stale: run `make manifests`"


@pytest.mark.parametrize("level", list(LEVELS.values()), ids=lambda level: level.name)
def test_every_crd_a_level_installs_is_committed(level: Any) -> None:
    """A level's own CRDs are in its ``crd_dir``; the kinds it shares with v2.1 in ``crd/bases``."""
    assert level.generated_crd_kinds() == level.crd_kinds()[: len(level.generated_crd_kinds())]
    assert sorted(k.kind for k in level.crd_kinds()) == sorted(
        ["TrainJob", "TrainingRuntime", "ClusterTrainingRuntime", "JobSet", "PodGroup", "ElasticQuota"]
    )
    for kind in level.crd_kinds():
        own = kind in level.generated_crd_kinds()
        path = CONFIG / (level.crd_dir if own else "crd/bases") / crdgen.file_name(kind)
        assert path.read_text() == crdgen.render(kind, level.openapi_snapshot()), f"{path} is stale"


def test_the_levels_share_only_the_scheduling_crds() -> None:
    from trainer.levels.v2_1 import V2_1

    shared = set(V2_1.crd_kinds()) & set(V2_3.crd_kinds())
    assert sorted(k.kind for k in shared) == ["ElasticQuota", "PodGroup"]
    assert V2_3.openapi_snapshot() == "k8s-v1.36.json" and V2_1.openapi_snapshot() == "k8s-v1.34.json"


def test_crdgen_cli_writes_a_levels_crds(tmp_path: Path) -> None:
    assert crdgen.main([f"--models={V2_3.api_models}", str(tmp_path)]) == 0
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == _generated()
    with pytest.raises(ValueError, match="declares no CRD_KINDS"):
        crdgen.models("trainer.api.base")


def test_the_feature_gate_variants_are_v2_1s() -> None:
    with pytest.raises(ValueError, match=r"trainerStatus already"):
        crdgen.generate(frozenset({"TrainJobStatus"}), kinds=v2_3.CRD_KINDS, snapshot=v2_3.OPENAPI_SNAPSHOT)


# -- TrainJob -------------------------------------------------------------------------------------


def test_trainjob_spec_fields() -> None:
    spec = at(schema_of(TJ), "spec")
    assert set(spec["properties"]) == {
        "runtimeRef",
        "initializer",
        "trainer",
        "runtimePatches",
        "suspend",
        "activeDeadlineSeconds",
        "managedBy",
    }
    assert spec["required"] == ["runtimeRef"]
    assert V2_3.owns_trainjob_crd(load(TJ))
    assert not LEVELS["v2.1"].owns_trainjob_crd(load(TJ))


def test_active_deadline_seconds_is_positive_and_immutable() -> None:
    assert at(schema_of(TJ), "spec.activeDeadlineSeconds") == {
        "type": "integer",
        "format": "int64",
        "minimum": 1,
        "x-kubernetes-validations": IMMUTABLE,
    }


def test_num_proc_per_node_is_an_int32() -> None:
    s = schema_of(TJ)
    assert at(s, "spec.trainer.numProcPerNode") == {"type": "integer", "format": "int32"}
    assert at(s, "spec.trainer")["x-kubernetes-validations"] == IMMUTABLE
    assert at(s, "spec.initializer")["x-kubernetes-validations"] == IMMUTABLE


def test_runtime_patches_are_keyed_by_manager() -> None:
    patches = at(schema_of(TJ), "spec.runtimePatches")
    assert patches["x-kubernetes-list-type"] == "map"
    assert patches["x-kubernetes-list-map-keys"] == ["manager"]
    assert patches["maxItems"] == 16
    item = patches["items"]
    assert item["required"] == ["manager"]
    assert item["properties"]["manager"] == {
        "type": "string",
        "minLength": 1,
        "maxLength": 253,
        "x-kubernetes-validations": IMMUTABLE,
    }
    assert item["properties"]["time"] == {"type": "string", "format": "date-time"}


def test_runtime_patch_reaches_a_restricted_pod_spec() -> None:
    patches = at(schema_of(TJ), "spec.runtimePatches[]")
    template = at(patches, "trainingRuntimeSpec.template")
    assert set(template["properties"]) == {"metadata", "spec"}
    jobs = at(template, "spec.replicatedJobs")
    assert jobs["x-kubernetes-list-map-keys"] == ["name"] and jobs["maxItems"] == 100
    pod = at(template, "spec.replicatedJobs[].template.spec.template.spec")
    assert set(pod["properties"]) == {
        "serviceAccountName",
        "volumes",
        "initContainers",
        "containers",
        "imagePullSecrets",
        "securityContext",
        "nodeSelector",
        "affinity",
        "tolerations",
        "schedulingGates",
        "terminationGracePeriodSeconds",
    }
    immutable = {name for name, prop in pod["properties"].items() if prop.get("x-kubernetes-validations")}
    assert immutable == {
        "serviceAccountName",
        "volumes",
        "initContainers",
        "containers",
        "imagePullSecrets",
        "securityContext",
        "terminationGracePeriodSeconds",
    }
    assert all(pod["properties"][name]["x-kubernetes-validations"] == IMMUTABLE for name in immutable)
    container = pod["properties"]["containers"]["items"]
    assert set(container["properties"]) == {"name", "env", "volumeMounts", "securityContext"}
    assert container["properties"]["volumeMounts"]["x-kubernetes-list-map-keys"] == ["name"]
    # Core types come from the Kubernetes 1.36 snapshot.
    assert "seLinuxChangePolicy" in pod["properties"]["securityContext"]["properties"]
    assert "procMount" in container["properties"]["securityContext"]["properties"]


def test_trainjob_status_has_trainer_status_and_bounds() -> None:
    status = at(schema_of(TJ), "status")
    assert set(status["properties"]) == {"conditions", "jobsStatus", "trainerStatus"}
    assert status["properties"]["conditions"]["maxItems"] == 8
    assert status["properties"]["jobsStatus"]["maxItems"] == 100
    assert status["properties"]["trainerStatus"]["x-kubernetes-validations"] == [
        {
            "rule": "has(self.lastUpdatedTime)",
            "message": "lastUpdatedTime is required when trainerStatus is present",
        }
    ]


# -- runtimes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("file", [TR, CTR])
def test_ml_policy(file: str) -> None:
    policy = at(schema_of(file), "spec.mlPolicy")
    assert set(policy["properties"]) == {"numNodes", "torch", "mpi", "flux", "jax", "xgboost"}
    assert policy["x-kubernetes-validations"] == [
        {
            "rule": "[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost),has(self.flux)]"
            ".filter(x, x).size() <= 1",
            "message": "Only one of the policy can be configured",
        }
    ]
    assert policy["properties"]["jax"] == {"type": "object"}
    assert policy["properties"]["xgboost"] == {"type": "object"}
    assert at(policy, "flux.numProcPerNode") == {
        "type": "integer",
        "format": "int32",
        "default": 1,
        "x-kubernetes-validations": [
            {"rule": "self >= 1", "message": "NumProcPerNode in fluxPolicy must be >= 1"}
        ],
    }
    torch = at(policy, "torch")
    assert set(torch["properties"]) == {"envInjection"}  # numProcPerNode and elasticPolicy are gone
    targets = at(torch, "envInjection.targets")
    assert targets["x-kubernetes-list-map-keys"] == ["jobName"] and targets["maxItems"] == 16
    names = targets["items"]["properties"]["containerNames"]
    assert names["x-kubernetes-list-type"] == "set"
    assert (names["minItems"], names["maxItems"], names["items"]["maxLength"]) == (1, 8, 63)
    # The embedded JobSet spec is JobSet v0.12.0's.
    assert at(schema_of(file), "spec.template.spec") == at(schema_of(JS), "spec")


# -- JobSet ---------------------------------------------------------------------------------------


def test_jobset_volume_claim_policies() -> None:
    policies = at(schema_of(JS), "spec.volumeClaimPolicies")
    assert policies["maxItems"] == 50
    assert policies["x-kubernetes-list-type"] == "atomic"
    assert policies["x-kubernetes-validations"] == JOBSET_IMMUTABLE
    item = policies["items"]
    assert (
        item["x-kubernetes-validations"][0]["message"]
        == "namespace cannot be set for VolumeClaimPolicies templates"
    )
    assert at(item, "retentionPolicy.whenDeleted") == {
        "type": "string",
        "enum": ["Delete", "Retain"],
        "default": "Delete",
    }
    pvc = item["properties"]["templates"]["items"]
    assert set(pvc["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}
    assert set(pvc["properties"]["metadata"]["properties"]) == {
        "labels",
        "annotations",
        "finalizers",
        "name",
        "namespace",
    }


def test_jobset_restart_strategies_actions_and_status() -> None:
    s = schema_of(JS)
    assert at(s, "spec.failurePolicy.restartStrategy")["enum"] == [
        "Recreate",
        "BlockingRecreate",
        "InPlaceRestart",
    ]
    assert at(s, "spec.failurePolicy.rules[].action")["enum"] == [
        "FailJobSet",
        "RestartJobSet",
        "RestartJobSetAndIgnoreMaxRestarts",
        "RestartJob",
        "RestartJobAndIgnoreMaxRestarts",
    ]
    status = at(s, "status")
    assert {"previousInPlaceRestartAttempt", "currentInPlaceRestartAttempt"} <= set(status["properties"])
    restarts = at(s, "status.replicatedJobsStatus[].jobRestarts")
    assert restarts == {
        "type": "array",
        "items": {"type": "integer", "format": "int32"},
        "maxItems": 1024,
        "x-kubernetes-list-type": "atomic",
    }


# -- shared checks --------------------------------------------------------------------------------


@pytest.mark.parametrize("file", [TJ, TR, CTR, JS])
def test_no_unknown_field_blankets_and_no_openapi_leftovers(file: str) -> None:
    for node in walk(schema_of(file)):
        assert "x-kubernetes-preserve-unknown-fields" not in node
        assert "$ref" not in node and "allOf" not in node and "oneOf" not in node
        assert not any(k.startswith("x-kubernetes-patch") for k in node)
    # The 1.36 spec files carry zero-value defaults for required fields; none may remain.
    defaults = [n["default"] for n in walk(schema_of(file)) if "default" in n]
    assert not [d for d in defaults if d == {} or (type(d) is int and d == 0)], defaults


def test_every_field_of_ours_is_documented_in_the_crds() -> None:
    undocumented = []
    for kind in v2_3.CRD_KINDS:
        assert kind.__doc__, kind
        for model in _models(kind, set()):
            for name, info in model.model_fields.items():
                if not info.description and name != "metadata":
                    undocumented.append(f"{model.__module__}.{model.__name__}.{name}")
    assert undocumented == []
    raw = load(TJ)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    deadline = raw["properties"]["spec"]["properties"]["activeDeadlineSeconds"]["description"]
    assert "DeadlineExceeded" in deadline
    assert json.dumps(raw).count("Possible enum values") == 0  # the module's spec files have no enums
