"""Models: JSON names, defaults, unset-field omission, errors, and lossless round trips."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from modelgen import kind_object
from pydantic import BaseModel, ValidationError

from manager.meta.conditions import find_condition
from manager.meta.quantity import Quantity
from trainer.api import jobset_constants, scheduling_constants, trainer_constants
from trainer.api.config_v1alpha1 import Configuration
from trainer.api.core import container_requests, containers, env_value, pod_spec
from trainer.api.jobset_v1alpha2 import JobSet, JobSetSpec, Network
from trainer.api.scheduling_v1alpha1 import ElasticQuota, PodGroup
from trainer.api.trainer_v1alpha1 import (
    ClusterTrainingRuntime,
    MPIMLPolicySource,
    RuntimeRef,
    TrainingRuntime,
    TrainJob,
    TrainJobSpec,
)

KINDS = [TrainJob, TrainingRuntime, ClusterTrainingRuntime, JobSet, PodGroup, ElasticQuota, Configuration]


@pytest.mark.parametrize("kind", KINDS)
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=st.data())
def test_random_objects_with_unknown_fields_round_trip(kind: Any, data: st.DataObject) -> None:
    obj = data.draw(kind_object(kind))
    loaded = kind.from_dict(obj)
    assert loaded.to_dict() == obj
    # Through JSON text too, as objects arrive from the API server.
    assert kind.model_validate_json(json.dumps(obj)).to_dict() == obj


def _assembled_as_model_construct(model: Any) -> None:
    """``model`` (and every model in it) holds what ``model_construct`` makes of the same values:
    field order, defaults, fields set and unknown fields alike."""
    cls = type(model)
    given = {
        name: value
        for name, value in vars(model).items()
        if name in model.model_fields_set or cls.model_fields[name].is_required()
    }
    reference = cls.model_construct(set(model.model_fields_set), **given, **(model.model_extra or {}))
    assert list(vars(model).items()) == list(vars(reference).items())
    assert model.model_fields_set == reference.model_fields_set
    assert model.model_extra == reference.model_extra
    for value in vars(model).values():
        for item in (
            value if isinstance(value, list) else value.values() if isinstance(value, dict) else [value]
        ):
            if isinstance(item, BaseModel):
                _assembled_as_model_construct(item)


@pytest.mark.parametrize("kind", KINDS)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=st.data())
def test_from_go_of_a_valid_object_is_what_from_dict_holds(kind: Any, data: st.DataObject) -> None:
    """``from_go`` assembles its models itself (the admission hot path): for an object the schema
    accepts it holds what the validating load holds, each model as ``model_construct`` makes it."""
    obj = data.draw(kind_object(kind))
    held = kind.from_go(obj)
    assert held == kind.from_dict(obj)
    assert held.to_dict() == obj
    _assembled_as_model_construct(held)


def test_class_attributes_name_the_kind() -> None:
    assert (TrainJob.api_version, TrainJob.kind) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert (TrainingRuntime.api_version, TrainingRuntime.kind) == (
        "trainer.kubeflow.org/v1alpha1",
        "TrainingRuntime",
    )
    assert ClusterTrainingRuntime.kind == "ClusterTrainingRuntime" and not ClusterTrainingRuntime.namespaced
    assert (JobSet.api_version, JobSet.kind) == ("jobset.x-k8s.io/v1alpha2", "JobSet")
    assert (PodGroup.api_version, PodGroup.kind) == ("scheduling.x-k8s.io/v1alpha1", "PodGroup")
    assert (ElasticQuota.api_version, ElasticQuota.kind) == ("scheduling.x-k8s.io/v1alpha1", "ElasticQuota")
    assert Configuration.api_version == "config.trainer.kubeflow.org/v1alpha1"


def test_dump_omits_unset_fields_and_always_names_the_kind() -> None:
    job = TrainJob(metadata={"name": "j"}, spec=TrainJobSpec(runtime_ref=RuntimeRef(name="torch")))
    assert job.to_dict() == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "j"},
        "spec": {"runtimeRef": {"name": "torch"}},
    }
    # Defaults are readable without being dumped (the CRD applies them server-side).
    assert job.spec is not None
    assert job.spec.suspend is False
    assert job.spec.managed_by == trainer_constants.TrainJobControllerName
    assert job.spec.runtime_ref.kind == "ClusterTrainingRuntime"
    assert job.spec.runtime_ref.api_group == "trainer.kubeflow.org"
    # Assigning marks the field as set.
    job.spec.suspend = True
    assert job.to_dict()["spec"]["suspend"] is True


def test_json_names() -> None:
    net = Network(enable_dns_hostnames=True, publish_not_ready_addresses=False)
    assert net.to_dict() == {"enableDNSHostnames": True, "publishNotReadyAddresses": False}
    assert Network.from_dict({"enableDNSHostnames": False}).enable_dns_hostnames is False
    mpi = MPIMLPolicySource(ssh_auth_mount_path="/x", run_launcher_as_node=True)
    assert mpi.to_dict() == {"sshAuthMountPath": "/x", "runLauncherAsNode": True}
    spec = JobSetSpec.from_dict({"ttlSecondsAfterFinished": 5, "replicatedJobs": []})
    assert spec.ttl_seconds_after_finished == 5
    assert spec.to_dict() == {"ttlSecondsAfterFinished": 5, "replicatedJobs": []}


def test_explicit_null_survives() -> None:
    data = {"apiVersion": PodGroup.api_version, "kind": "PodGroup", "status": {"scheduleStartTime": None}}
    assert PodGroup.from_dict(data).to_dict() == data


def errors(kind: Any, data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as info:
        kind.from_dict(data)
    return [(".".join(str(p) for p in e["loc"]), e["type"]) for e in info.value.errors()]


def test_validation_errors_name_the_path_and_reason() -> None:
    assert errors(TrainJob, {"spec": {"runtimeRef": {"name": ""}}}) == [
        ("spec.runtimeRef.name", "string_too_short")
    ]
    assert errors(TrainJob, {"spec": {}}) == [("spec.runtimeRef", "missing")]
    assert errors(TrainJob, {"spec": {"runtimeRef": {"name": "x"}, "trainer": {"numNodes": "2"}}}) == [
        ("spec.trainer.numNodes", "int_type")
    ]
    assert errors(TrainingRuntime, {"spec": {"mlPolicy": {"mpi": {"mpiImplementation": "Intel"}}}}) == [
        ("spec.mlPolicy.mpi.mpiImplementation", "literal_error")
    ]
    assert errors(
        JobSet, {"spec": {"replicatedJobs": [{"name": "a", "template": {}, "dependsOn": [{"name": "b"}]}]}}
    ) == [("spec.replicatedJobs.0.dependsOn.0.status", "missing")]
    assert errors(PodGroup, {"spec": {"minMember": 0}}) == [("spec.minMember", "greater_than_equal")]
    bad = errors(PodGroup, {"spec": {"minResources": {"cpu": "lots"}}})
    assert bad[0][0].startswith("spec.minResources.cpu")
    status = {"conditions": [{"type": "Complete", "status": "Maybe", "reason": "x", "message": ""}]}
    assert ("status.conditions.0.status", "literal_error") in errors(TrainJob, {"status": status})
    assert ("status.conditions.0.lastTransitionTime", "missing") in errors(TrainJob, {"status": status})


def test_wrong_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="kind: Invalid value: 'JobSet'"):
        TrainJob.from_dict({"apiVersion": TrainJob.api_version, "kind": "JobSet"})
    with pytest.raises(ValueError, match="apiVersion"):
        JobSet.from_dict({"apiVersion": "jobset.x-k8s.io/v1alpha1", "kind": "JobSet"})
    with pytest.raises(ValidationError, match="kind: Invalid value"):
        PodGroup.model_validate_json('{"kind": "ElasticQuota"}')


def test_resource_accessors() -> None:
    pg = PodGroup.from_dict({"spec": {"minResources": {"cpu": "1250m", "memory": "2.5Gi"}}})
    assert pg.spec is not None
    assert pg.spec.min_resources == {"cpu": "1250m", "memory": "2.5Gi"}  # kept as written
    assert pg.spec.min_resources_quantities() == {"cpu": Quantity("1.25"), "memory": Quantity("2560Mi")}
    template = {
        "spec": {
            "containers": [
                {
                    "name": "node",
                    "resources": {"requests": {"cpu": 1, "memory": "4Gi"}},
                    "env": [{"name": "A", "value": "1"}],
                }
            ],
            "initContainers": [{"name": "init"}],
        }
    }
    spec = pod_spec(template)
    (node,) = containers(spec)
    assert container_requests(node) == {"cpu": Quantity("1"), "memory": Quantity("4Gi")}
    assert [c["name"] for c in containers(spec, init=True)] == ["init"]
    assert env_value(node["env"], "A") == "1" and env_value(node["env"], "B") is None
    job = TrainJob.from_dict(
        {
            "status": {
                "conditions": [
                    {
                        "type": "Suspended",
                        "status": "True",
                        "reason": "Suspended",
                        "message": "TrainJob is suspended",
                        "lastTransitionTime": "2025-01-01T00:00:00Z",
                    }
                ]
            }
        }
    )
    assert job.status is not None
    assert [c.type for c in job.status.conditions or []] == [trainer_constants.TrainJobSuspended]
    status = job.to_dict()["status"]  # the dict view the controllers read
    found = find_condition(status, trainer_constants.TrainJobSuspended)
    assert found is not None and found["message"] == trainer_constants.TrainJobSuspendedMessage
    assert find_condition(status, trainer_constants.TrainJobFailed) is None


def test_constants_are_upstream_strings() -> None:
    assert trainer_constants.LabelTrainJobAncestor == "trainer.kubeflow.org/trainjob-ancestor-step"
    assert trainer_constants.ResourceInUseFinalizer == "trainer.kubeflow.org/resource-in-use"
    assert trainer_constants.TrainJobRuntimeNotSupportedReason == "TrainingRuntimeNotSupported"
    assert jobset_constants.JobKey == "jobset.sigs.k8s.io/job-key"
    assert jobset_constants.JobSetControllerName == "jobset.sigs.k8s.io/jobset-controller"
    assert jobset_constants.JobSetSuspendedReason == "SuspendedJobs"
    assert scheduling_constants.PodGroupLabel == "scheduling.x-k8s.io/pod-group"


def test_from_go_holds_what_the_go_struct_holds() -> None:
    """``Model.from_go``: an object that passed only the Go decode, as the struct holds it: no
    schema constraint checked, absent required fields at Go's zero values (left out by
    ``to_dict``, as ``json.Marshal`` leaves out the Trainer API's ``omitempty`` fields), unknown
    fields kept."""
    tj = TrainJob.from_go(
        {
            "apiVersion": "",
            "kind": "TrainJob",
            "metadata": {"name": "x"},
            "spec": {
                "runtimeRef": {"apiGroup": "trainer.kubeflow.org"},
                "podTemplateOverrides": [{"targetJobs": [{}, None]}],
                "runtimePatches": [{"manager": "m"}],
            },
            "status": {"conditions": [{"type": "Bad Type"}]},
        }
    )
    assert tj.spec is not None and tj.spec.runtime_ref.name == ""
    overrides = tj.spec.pod_template_overrides or []
    assert [t.name for t in overrides[0].target_jobs] == ["", ""]
    assert tj.to_dict()["spec"] == {
        "runtimeRef": {"apiGroup": "trainer.kubeflow.org"},
        "podTemplateOverrides": [{"targetJobs": [{}, {}]}],
        "runtimePatches": [{"manager": "m"}],
    }
    assert tj.status is not None and tj.status.conditions is not None
    assert (tj.status.conditions[0].type, tj.status.conditions[0].status) == ("Bad Type", "")
    with pytest.raises(ValidationError):  # what from_dict, for objects the API server checked, refuses
        TrainJob.from_dict(tj.to_dict() | {"apiVersion": "trainer.kubeflow.org/v1alpha1"})
