"""The committed CRDs are what the models generate, and they say what upstream's CRDs say.

Expectations below are written out by hand from upstream's published CRDs (Trainer v2.1.0,
JobSet v0.10.1, scheduler-plugins v0.34.1-devel): types, required fields, defaults, enums,
list types and CEL rules with their messages, field by field.
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
from trainer.api.base import QUANTITY_PATTERN
from trainer.api.core import ObjectMeta

ROOT = Path(__file__).resolve().parents[3]
BASES = ROOT / "config" / "crd" / "bases"
IMMUTABLE = [{"rule": "self == oldSelf", "message": "Value is immutable"}]
INT_OR_STRING = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
QUANTITY = {**INT_OR_STRING, "pattern": QUANTITY_PATTERN}


def test_committed_crds_match_the_models() -> None:
    generated = _generated()
    on_disk = {p.name: p.read_text() for p in BASES.glob("*.yaml")}
    assert sorted(on_disk) == sorted(generated), "run `make manifests`"
    for name, text in generated.items():
        assert on_disk[name] == text, f"{name} is stale: run `make manifests`"


@functools.cache
def _generated() -> dict[str, str]:
    return crdgen.generate()


@functools.cache
def _parsed(name: str) -> str:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return json.dumps(yaml.load(_generated()[name], Loader=loader))


def load(name: str) -> dict[str, Any]:
    """A fresh copy of a generated CRD (tests may not share mutable state)."""
    return dict(json.loads(_parsed(name)))


def _without_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_descriptions(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [_without_descriptions(v) for v in node]
    return node


def schema_of(name: str) -> dict[str, Any]:
    """The openAPIV3Schema, descriptions left out (they are checked on their own)."""
    return dict(_without_descriptions(load(name)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]))


def at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """Walk ``a.b[].c``: properties by name, ``[]`` into array items."""
    node = schema
    for part in path.split("."):
        items = part.endswith("[]")
        node = node["properties"][part.removesuffix("[]")]
        if items:
            node = node["items"]
    return node


def walk(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            found.extend(walk(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(walk(value))
    return found


# -- CRD resource facts ---------------------------------------------------------------------------

RESOURCES = [
    ("trainer.kubeflow.org_trainjobs.yaml", "TrainJob", "trainjobs", "Namespaced", True, None),
    (
        "trainer.kubeflow.org_trainingruntimes.yaml",
        "TrainingRuntime",
        "trainingruntimes",
        "Namespaced",
        False,
        None,
    ),
    (
        "trainer.kubeflow.org_clustertrainingruntimes.yaml",
        "ClusterTrainingRuntime",
        "clustertrainingruntimes",
        "Cluster",
        False,
        None,
    ),
    ("jobset.x-k8s.io_jobsets.yaml", "JobSet", "jobsets", "Namespaced", True, None),
    ("scheduling.x-k8s.io_podgroups.yaml", "PodGroup", "podgroups", "Namespaced", True, ["pg", "pgs"]),
    (
        "scheduling.x-k8s.io_elasticquotas.yaml",
        "ElasticQuota",
        "elasticquotas",
        "Namespaced",
        True,
        ["eq", "eqs"],
    ),
]


@pytest.mark.parametrize(("file", "kind", "plural", "scope", "status", "short"), RESOURCES)
def test_resource_facts(
    file: str, kind: str, plural: str, scope: str, status: bool, short: list[str] | None
) -> None:
    crd = load(file)
    spec = crd["spec"]
    assert crd["metadata"]["name"] == f"{plural}.{spec['group']}"
    assert spec["names"]["kind"] == kind
    assert spec["names"]["listKind"] == f"{kind}List"
    assert spec["names"]["plural"] == plural
    assert spec["names"]["singular"] == kind.lower()
    assert spec["names"].get("shortNames") == short
    assert "categories" not in spec["names"]
    assert spec["scope"] == scope
    (version,) = spec["versions"]
    assert version["served"] and version["storage"]
    assert ("subresources" in version) == status
    if status:
        assert version["subresources"] == {"status": {}}
    root = _without_descriptions(version["schema"]["openAPIV3Schema"])
    assert root["properties"]["apiVersion"] == {"type": "string"}
    assert root["properties"]["kind"] == {"type": "string"}
    assert root["properties"]["metadata"] == {"type": "object"}


def columns(file: str) -> list[tuple[str, str, str]]:
    version = load(file)["spec"]["versions"][0]
    return [(c["name"], c["type"], c["jsonPath"]) for c in version.get("additionalPrinterColumns", [])]


def test_printer_columns() -> None:
    assert columns("trainer.kubeflow.org_trainjobs.yaml") == [
        ("State", "string", ".status.conditions[-1:].type"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ]
    assert columns("trainer.kubeflow.org_trainingruntimes.yaml") == []
    assert columns("trainer.kubeflow.org_clustertrainingruntimes.yaml") == []
    assert columns("jobset.x-k8s.io_jobsets.yaml") == [
        ("TerminalState", "string", ".status.terminalState"),
        ("Restarts", "string", ".status.restarts"),
        ("Completed", "string", '.status.conditions[?(@.type=="Completed")].status'),
        ("Suspended", "string", ".spec.suspend"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ]
    assert columns("scheduling.x-k8s.io_podgroups.yaml") == [
        ("Phase", "string", ".status.phase"),
        ("MinMember", "integer", ".spec.minMember"),
        ("Running", "integer", ".status.running"),
        ("Succeeded", "integer", ".status.succeeded"),
        ("Failed", "integer", ".status.failed"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ]
    assert columns("scheduling.x-k8s.io_elasticquotas.yaml") == [
        ("Used", "string", ".status.used"),
        ("Max", "string", ".spec.max"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ]


def test_scheduling_crds_carry_the_api_approval_annotation() -> None:
    pg = load("scheduling.x-k8s.io_podgroups.yaml")["metadata"]["annotations"]
    eq = load("scheduling.x-k8s.io_elasticquotas.yaml")["metadata"]["annotations"]
    assert pg == {
        "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/scheduler-plugins/pull/50"
    }
    assert eq == {
        "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/scheduler-plugins/pull/52"
    }


# -- TrainJob -------------------------------------------------------------------------------------

TJ = "trainer.kubeflow.org_trainjobs.yaml"


def test_trainjob_root_rules() -> None:
    root = schema_of(TJ)
    assert root["x-kubernetes-validations"] == [
        {
            "rule": "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
            "message": "metadata.name must match RFC 1035 DNS label format",
        },
        {
            "rule": "size(self.metadata.name) <= 63",
            "message": "metadata.name must be no more than 63 characters",
        },
    ]
    assert "required" not in root
    assert root["properties"]["spec"]["required"] == ["runtimeRef"]


def test_trainjob_spec_fields() -> None:
    s = schema_of(TJ)
    assert at(s, "spec.runtimeRef") == {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "apiGroup": {"type": "string", "default": "trainer.kubeflow.org"},
            "kind": {"type": "string", "default": "ClusterTrainingRuntime"},
        },
        "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "runtimeRef is immutable"}],
    }
    assert at(s, "spec.suspend") == {"type": "boolean", "default": False}
    assert at(s, "spec.managedBy") == {
        "type": "string",
        "default": "trainer.kubeflow.org/trainjob-controller",
        "x-kubernetes-validations": [
            {
                "rule": "self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']",
                "message": "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set",
            },
            {"rule": "self == oldSelf", "message": "ManagedBy value is immutable"},
        ],
    }
    for field in ("labels", "annotations"):
        assert at(s, f"spec.{field}") == {"type": "object", "additionalProperties": {"type": "string"}}
    trainer = at(s, "spec.trainer")
    assert set(trainer["properties"]) == {
        "image",
        "command",
        "args",
        "env",
        "numNodes",
        "resourcesPerNode",
        "numProcPerNode",
    }
    assert at(s, "spec.trainer.numNodes") == {"type": "integer", "format": "int32"}
    assert at(s, "spec.trainer.numProcPerNode") == INT_OR_STRING
    for field in ("command", "args"):
        assert at(s, f"spec.trainer.{field}") == {
            "type": "array",
            "items": {"type": "string"},
            "x-kubernetes-list-type": "atomic",
        }
    env = at(s, "spec.trainer.env")
    assert env["x-kubernetes-list-type"] == "map" and env["x-kubernetes-list-map-keys"] == ["name"]
    assert env["items"]["required"] == ["name"]
    resources = at(s, "spec.trainer.resourcesPerNode")
    assert set(resources["properties"]) == {"limits", "requests", "claims"}
    assert resources["properties"]["requests"]["additionalProperties"] == QUANTITY
    for source in ("dataset", "model"):
        init = at(s, f"spec.initializer.{source}")
        assert set(init["properties"]) == {"storageUri", "env", "secretRef"}
        assert init["properties"]["secretRef"] == {
            "type": "object",
            "properties": {"name": {"type": "string", "default": ""}},
            "x-kubernetes-map-type": "atomic",
        }


def test_trainjob_pod_template_overrides() -> None:
    s = schema_of(TJ)
    overrides = at(s, "spec.podTemplateOverrides")
    assert overrides["x-kubernetes-list-type"] == "atomic"
    item = overrides["items"]
    assert item["required"] == ["targetJobs"]
    assert at(s, "spec.podTemplateOverrides[].targetJobs") == {
        "type": "array",
        "x-kubernetes-list-type": "atomic",
        "items": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string", "minLength": 1}},
        },
    }
    assert set(at(s, "spec.podTemplateOverrides[].metadata")["properties"]) == {
        "labels",
        "annotations",
        "finalizers",
        "name",
        "namespace",
    }
    spec = at(s, "spec.podTemplateOverrides[].spec")
    assert set(spec["properties"]) == {
        "serviceAccountName",
        "nodeSelector",
        "affinity",
        "tolerations",
        "volumes",
        "initContainers",
        "containers",
        "schedulingGates",
        "imagePullSecrets",
    }
    assert spec["properties"]["tolerations"]["x-kubernetes-list-type"] == "atomic"
    for keyed in ("volumes", "initContainers", "containers", "schedulingGates", "imagePullSecrets"):
        assert spec["properties"][keyed]["x-kubernetes-list-type"] == "map", keyed
        assert spec["properties"][keyed]["x-kubernetes-list-map-keys"] == ["name"], keyed
    container = at(s, "spec.podTemplateOverrides[].spec.containers[]")
    assert container["required"] == ["name"]
    assert container["properties"]["name"] == {"type": "string", "minLength": 1}
    # Upstream keys the override's volumeMounts by name (a Container keys them by mountPath).
    mounts = container["properties"]["volumeMounts"]
    assert mounts["x-kubernetes-list-map-keys"] == ["name"]
    assert mounts["items"]["required"] == ["mountPath", "name"]
    pull = at(s, "spec.podTemplateOverrides[].spec.imagePullSecrets[]")
    assert pull["properties"]["name"]["default"] == ""


def test_trainjob_status() -> None:
    s = schema_of(TJ)
    status = at(s, "status")
    assert status["minProperties"] == 1
    conditions = at(s, "status.conditions")
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    condition = conditions["items"]
    assert condition["required"] == ["lastTransitionTime", "message", "reason", "status", "type"]
    props = condition["properties"]
    assert props["status"]["enum"] == ["True", "False", "Unknown"]
    assert props["type"]["maxLength"] == 316
    assert props["reason"] == {
        "type": "string",
        "minLength": 1,
        "maxLength": 1024,
        "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
    }
    assert props["message"] == {"type": "string", "maxLength": 32768}
    assert props["lastTransitionTime"] == {"type": "string", "format": "date-time"}
    assert props["observedGeneration"] == {"type": "integer", "format": "int64", "minimum": 0}
    jobs = at(s, "status.jobsStatus")
    assert jobs["x-kubernetes-list-map-keys"] == ["name"]
    assert jobs["items"]["required"] == ["active", "failed", "name", "ready", "succeeded", "suspended"]
    for counter in ("active", "failed", "ready", "succeeded", "suspended"):
        assert jobs["items"]["properties"][counter] == {"type": "integer", "format": "int32", "minimum": 0}


# -- runtimes -------------------------------------------------------------------------------------

RUNTIMES = ["trainer.kubeflow.org_trainingruntimes.yaml", "trainer.kubeflow.org_clustertrainingruntimes.yaml"]


@pytest.mark.parametrize("file", RUNTIMES)
def test_runtime_schema(file: str) -> None:
    s = schema_of(file)
    assert "status" not in s["properties"]
    assert at(s, "spec")["minProperties"] == 1
    policy = at(s, "spec.mlPolicy")
    assert policy["x-kubernetes-validations"] == [
        {
            "rule": "!(has(self.numNodes) && (has(self.torch) && has(self.torch.elasticPolicy)))",
            "message": "numNodes should not be set if torch.elasticPolicy is configured",
        },
        {
            "rule": "!(has(self.torch) && has(self.mpi))",
            "message": "Only one of the policy can be configured",
        },
    ]
    assert at(s, "spec.mlPolicy.numNodes") == {"type": "integer", "format": "int32"}
    assert at(s, "spec.mlPolicy.torch.numProcPerNode") == {
        **INT_OR_STRING,
        "default": "auto",
        "x-kubernetes-validations": [
            {
                "rule": "self > 0 || self in ['auto', 'cpu', 'gpu']",
                "message": "NumProcPerNode must be equal to auto, cpu, gpu, or int value",
            }
        ],
    }
    elastic = at(s, "spec.mlPolicy.torch.elasticPolicy")
    for field in ("maxRestarts", "minNodes", "maxNodes"):
        assert elastic["properties"][field] == {"type": "integer", "format": "int32"}
    assert elastic["properties"]["metrics"]["x-kubernetes-list-type"] == "atomic"
    assert elastic["properties"]["metrics"]["items"]["required"] == ["type"]
    assert at(s, "spec.mlPolicy.mpi") == {
        "type": "object",
        "properties": {
            "numProcPerNode": {"type": "integer", "format": "int32", "default": 1},
            "mpiImplementation": {"type": "string", "enum": ["OpenMPI", ""], "default": "OpenMPI"},
            "sshAuthMountPath": {"type": "string", "default": "/root/.ssh"},
            "runLauncherAsNode": {"type": "boolean", "default": False},
        },
    }
    assert at(s, "spec.podGroupPolicy.coscheduling") == {
        "type": "object",
        "properties": {"scheduleTimeoutSeconds": {"type": "integer", "format": "int32", "default": 60}},
    }
    assert at(s, "spec.podGroupPolicy.volcano.networkTopology") == {
        "type": "object",
        "properties": {
            "mode": {"type": "string", "enum": ["hard", "soft"], "default": "hard"},
            "highestTierAllowed": {"type": "integer", "default": 1},
        },
    }
    template = at(s, "spec.template")
    assert template["minProperties"] == 1
    assert set(at(s, "spec.template.metadata")["properties"]) == {
        "labels",
        "annotations",
        "finalizers",
        "name",
        "namespace",
    }
    # The embedded JobSet spec is the JobSet CRD's spec, rules included.
    assert at(s, "spec.template.spec") == at(schema_of("jobset.x-k8s.io_jobsets.yaml"), "spec")


# -- JobSet ---------------------------------------------------------------------------------------

JS = "jobset.x-k8s.io_jobsets.yaml"


def test_jobset_spec() -> None:
    s = schema_of(JS)
    spec = at(s, "spec")
    assert spec["x-kubernetes-validations"] == [
        {
            "rule": "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
            "self.replicatedJobs.exists(x, has(x.dependsOn)))",
            "message": "StartupPolicy and DependsOn APIs are mutually exclusive",
        }
    ]
    assert "required" not in spec
    for immutable in ("network", "successPolicy", "failurePolicy", "startupPolicy"):
        assert at(s, f"spec.{immutable}")["x-kubernetes-validations"] == IMMUTABLE, immutable
    assert at(s, "spec.coordinator").get("x-kubernetes-validations") is None
    assert at(s, "spec.network")["properties"] == {
        "enableDNSHostnames": {"type": "boolean"},
        "subdomain": {"type": "string"},
        "publishNotReadyAddresses": {"type": "boolean"},
    }
    assert at(s, "spec.successPolicy") == {
        "type": "object",
        "required": ["operator"],
        "properties": {
            "operator": {"type": "string", "enum": ["All", "Any"]},
            "targetReplicatedJobs": {
                "type": "array",
                "items": {"type": "string"},
                "x-kubernetes-list-type": "atomic",
            },
        },
        "x-kubernetes-validations": IMMUTABLE,
    }
    failure = at(s, "spec.failurePolicy")
    assert failure["properties"]["maxRestarts"] == {"type": "integer", "format": "int32"}
    assert failure["properties"]["restartStrategy"] == {
        "type": "string",
        "enum": ["Recreate", "BlockingRecreate"],
        "default": "Recreate",
    }
    rules = failure["properties"]["rules"]
    assert "x-kubernetes-list-type" not in rules
    assert rules["items"]["required"] == ["action", "name"]
    assert rules["items"]["properties"]["action"]["enum"] == [
        "FailJobSet",
        "RestartJobSet",
        "RestartJobSetAndIgnoreMaxRestarts",
    ]
    assert rules["items"]["properties"]["onJobFailureReasons"] == {
        "type": "array",
        "items": {"type": "string"},
    }
    assert at(s, "spec.startupPolicy")["required"] == ["startupPolicyOrder"]
    assert at(s, "spec.startupPolicy.startupPolicyOrder")["enum"] == ["AnyOrder", "InOrder"]
    assert at(s, "spec.coordinator") == {
        "type": "object",
        "required": ["replicatedJob"],
        "properties": {
            "replicatedJob": {"type": "string"},
            "jobIndex": {"type": "integer"},
            "podIndex": {"type": "integer"},
        },
    }
    assert at(s, "spec.ttlSecondsAfterFinished") == {"type": "integer", "format": "int32", "minimum": 0}
    assert at(s, "spec.managedBy") == {"type": "string"}
    assert at(s, "spec.suspend") == {"type": "boolean"}


def test_jobset_replicated_jobs() -> None:
    s = schema_of(JS)
    rjobs = at(s, "spec.replicatedJobs")
    assert rjobs["x-kubernetes-list-type"] == "map" and rjobs["x-kubernetes-list-map-keys"] == ["name"]
    assert "minItems" not in rjobs
    rjob = rjobs["items"]
    assert rjob["required"] == ["name", "template"]
    assert rjob["properties"]["groupName"] == {"type": "string", "default": "default"}
    assert rjob["properties"]["replicas"] == {"type": "integer", "format": "int32", "default": 1}
    depends = rjob["properties"]["dependsOn"]
    assert depends["maxItems"] == 5
    assert depends["x-kubernetes-list-map-keys"] == ["name"]
    assert depends["x-kubernetes-validations"] == IMMUTABLE
    assert depends["items"]["required"] == ["name", "status"]
    assert depends["items"]["properties"]["status"]["enum"] == ["Ready", "Complete"]
    job = rjob["properties"]["template"]
    assert set(job["properties"]["metadata"]["properties"]) == {
        "labels",
        "annotations",
        "finalizers",
        "name",
        "namespace",
    }
    assert job["properties"]["spec"]["required"] == ["template"]


def test_jobset_status() -> None:
    s = schema_of(JS)
    status = at(s, "status")
    assert set(status["properties"]) == {
        "conditions",
        "restarts",
        "restartsCountTowardsMax",
        "terminalState",
        "replicatedJobsStatus",
    }
    assert "minProperties" not in status
    assert status["properties"]["restarts"] == {"type": "integer", "format": "int32"}
    rjs = status["properties"]["replicatedJobsStatus"]
    assert rjs["x-kubernetes-list-map-keys"] == ["name"]
    assert rjs["items"]["required"] == ["active", "failed", "name", "ready", "succeeded", "suspended"]


def test_embedded_pod_template_is_the_kubernetes_schema() -> None:
    s = schema_of(JS)
    pod = at(s, "spec.replicatedJobs[].template.spec.template.spec")
    assert pod["required"] == ["containers"]
    containers = pod["properties"]["containers"]
    assert containers["x-kubernetes-list-type"] == "map"
    assert containers["x-kubernetes-list-map-keys"] == ["name"]
    container = containers["items"]
    assert container["required"] == ["name"]
    ports = container["properties"]["ports"]
    assert ports["x-kubernetes-list-map-keys"] == ["containerPort", "protocol"]
    assert ports["items"]["properties"]["protocol"] == {"type": "string", "default": "TCP"}
    assert ports["items"]["properties"]["containerPort"] == {"type": "integer", "format": "int32"}
    assert container["properties"]["volumeMounts"]["x-kubernetes-list-map-keys"] == ["mountPath"]
    assert container["properties"]["env"]["x-kubernetes-list-map-keys"] == ["name"]
    assert container["properties"]["resources"]["properties"]["limits"]["additionalProperties"] == QUANTITY
    probe_port = container["properties"]["livenessProbe"]["properties"]["httpGet"]["properties"]["port"]
    assert probe_port == INT_OR_STRING
    assert pod["properties"]["tolerations"]["x-kubernetes-list-type"] == "atomic"
    assert pod["properties"]["volumes"]["x-kubernetes-list-map-keys"] == ["name"]
    assert pod["properties"]["nodeSelector"]["x-kubernetes-map-type"] == "atomic"
    assert (
        pod["properties"]["volumes"]["items"]["properties"]["configMap"]["x-kubernetes-map-type"] == "atomic"
    )
    # Only defaults Kubernetes declares on optional fields; none on required ones, no `{}`.
    disk = pod["properties"]["volumes"]["items"]["properties"]["azureDisk"]["properties"]
    assert disk["fsType"]["default"] == "ext4" and "default" not in disk["cachingMode"]
    defaults = [n["default"] for n in walk(pod) if "default" in n]
    assert not [d for d in defaults if d == {} or type(d) is int], defaults


@pytest.mark.parametrize("file", [name for name, *_ in RESOURCES])
def test_no_unknown_field_blankets_and_no_openapi_leftovers(file: str) -> None:
    for node in walk(schema_of(file)):
        assert "x-kubernetes-preserve-unknown-fields" not in node
        assert "$ref" not in node and "allOf" not in node and "oneOf" not in node
        assert not any(k.startswith("x-kubernetes-patch") for k in node)


def _models(model: type[BaseModel], seen: set[type[BaseModel]]) -> set[type[BaseModel]]:
    if model in seen or model is ObjectMeta:  # the server owns root metadata: schema is `type: object`
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


def test_every_field_of_ours_is_documented_in_the_crds() -> None:
    undocumented = []
    for kind in crdgen.CRD_KINDS:
        assert kind.__doc__, kind
        for model in _models(kind, set()):
            for name, info in model.model_fields.items():
                if not info.description and name != "metadata":
                    undocumented.append(f"{model.__name__}.{name}")
    assert undocumented == []
    raw = load(TJ)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert raw["description"] == "A training job built from a TrainingRuntime or ClusterTrainingRuntime."
    assert raw["properties"]["spec"]["properties"]["suspend"]["description"].startswith(
        "Suspend the TrainJob"
    )
    # Embedded core fields carry Kubernetes' own documentation.
    pod = raw["properties"]["spec"]["properties"]["podTemplateOverrides"]["items"]["properties"]["spec"]
    env_name = pod["properties"]["containers"]["items"]["properties"]["env"]["items"]["properties"]["name"]
    assert env_name["description"].startswith("Name of the environment variable.")


# -- scheduling -----------------------------------------------------------------------------------


def test_pod_group_schema() -> None:
    s = schema_of("scheduling.x-k8s.io_podgroups.yaml")
    assert at(s, "spec") == {
        "type": "object",
        "properties": {
            "minMember": {"type": "integer", "format": "int32", "minimum": 1},
            "minResources": {"type": "object", "additionalProperties": QUANTITY},
            "scheduleTimeoutSeconds": {"type": "integer", "format": "int32"},
        },
    }
    assert at(s, "status") == {
        "type": "object",
        "properties": {
            "phase": {"type": "string"},
            "occupiedBy": {"type": "string"},
            "running": {"type": "integer", "format": "int32"},
            "succeeded": {"type": "integer", "format": "int32"},
            "failed": {"type": "integer", "format": "int32"},
            "scheduleStartTime": {"type": "string", "format": "date-time"},
        },
    }


def test_elastic_quota_schema() -> None:
    s = schema_of("scheduling.x-k8s.io_elasticquotas.yaml")
    resource_map = {"type": "object", "additionalProperties": QUANTITY}
    assert at(s, "spec") == {"type": "object", "properties": {"min": resource_map, "max": resource_map}}
    assert at(s, "status") == {"type": "object", "properties": {"used": resource_map}}
    assert all("default" not in n for n in walk(s))


def test_trainjob_status_gate_crd_variant_is_committed_and_adds_only_trainer_status() -> None:
    """config/progress/crd is generated (stale = fail); it differs from bases only by the gate's parts."""
    variant = crdgen.generate(frozenset({"TrainJobStatus"}))
    progress_dir = ROOT / "config" / "progress" / "crd"
    on_disk = {p.name: p.read_text() for p in progress_dir.glob("*.yaml")}
    assert on_disk == variant, "run `make manifests`"
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    gated = yaml.load(variant["trainer.kubeflow.org_trainjobs.yaml"], Loader=loader)
    default = load("trainer.kubeflow.org_trainjobs.yaml")
    gated_version, default_version = gated["spec"]["versions"][0], default["spec"]["versions"][0]
    status = gated_version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    trainer_status = status.pop("trainerStatus")
    assert gated_version["schema"] == default_version["schema"]
    assert "trainerStatus" not in json.dumps(default)
    props = trainer_status["properties"]
    assert props["progressPercentage"]["minimum"] == 0 and props["progressPercentage"]["maximum"] == 100
    assert props["estimatedRemainingSeconds"]["minimum"] == 0
    assert props["metrics"]["maxItems"] == 256
    assert props["metrics"]["x-kubernetes-list-type"] == "atomic"
    assert props["metrics"]["items"]["required"] == ["name", "value"]
    assert props["lastUpdatedTime"]["format"] == "date-time"
    assert trainer_status["x-kubernetes-validations"] == [
        {
            "rule": "has(self.lastUpdatedTime)",
            "message": "lastUpdatedTime is required when trainerStatus is present",
        }
    ]
    names = [c["name"] for c in gated_version["additionalPrinterColumns"]]
    default_names = [c["name"] for c in default_version["additionalPrinterColumns"]]
    assert names == [*default_names[:-1], "Progress", "ETA", default_names[-1]]
    with pytest.raises(ValueError, match="no CRD variant for feature gate"):
        crdgen.generate(frozenset({"Nope"}))


def test_trainjob_state_gate_crd_variant_is_committed_and_changes_only_the_state_column() -> None:
    """config/state/crd is generated (stale = fail): ``status.state`` and ``State`` reading it."""
    variant = crdgen.generate(frozenset({"TrainJobState"}))
    on_disk = {p.name: p.read_text() for p in (ROOT / "config" / "state" / "crd").glob("*.yaml")}
    assert on_disk == variant, "run `make manifests`"
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    gated = yaml.load(variant["trainer.kubeflow.org_trainjobs.yaml"], Loader=loader)
    default = load("trainer.kubeflow.org_trainjobs.yaml")
    gated_version, default_version = gated["spec"]["versions"][0], default["spec"]["versions"][0]
    status = gated_version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    state = status.pop("state")
    assert state["type"] == "string"
    assert state["enum"] == ["Pending", "Suspended", "Running", "Complete", "Failed"]
    assert gated_version["schema"] == default_version["schema"]
    columns = {c["name"]: c["jsonPath"] for c in gated_version["additionalPrinterColumns"]}
    default_columns = {c["name"]: c["jsonPath"] for c in default_version["additionalPrinterColumns"]}
    assert default_columns["State"] == ".status.conditions[-1:].type"  # upstream's, gate off
    assert columns == {**default_columns, "State": ".status.state"}
    # both gates: one CRD with both changes
    both = yaml.load(
        crdgen.generate(frozenset({"TrainJobState", "TrainJobStatus"}))[
            "trainer.kubeflow.org_trainjobs.yaml"
        ],
        Loader=loader,
    )
    both_version = both["spec"]["versions"][0]
    assert {"state", "trainerStatus"} <= set(
        both_version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    )
    names = [c["name"] for c in both_version["additionalPrinterColumns"]]
    assert names == ["State", "Progress", "ETA", "Age"]
