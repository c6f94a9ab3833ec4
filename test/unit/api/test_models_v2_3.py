"""The v2.3 models (Trainer v2.3.0, JobSet v0.12.0): the rules users meet, and upstream's own objects.

The CRD enforces these rules at the API server; the models refuse the same objects, with the
field path in the error, so a controller or a test never builds one the server would reject.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from manager.envtest.assets import GoMain
from trainer.api import jobset_v1alpha2 as jobset_v0_10
from trainer.api import trainer_v1alpha1 as v2_1
from trainer.api.base import KindModel
from trainer.api.v2_3 import jobset_constants as jc23
from trainer.api.v2_3 import jobset_v1alpha2 as jobset
from trainer.api.v2_3 import trainer_constants as c23
from trainer.api.v2_3 import trainer_v1alpha1 as v2_3
from trainer.api.v2_3.kinds import CRD_KINDS
from trainer.conformance.originals import module_dir

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def trainjob(**spec: Any) -> v2_3.TrainJob:
    return v2_3.TrainJob.from_dict(
        {
            "metadata": {"name": "t", "namespace": "ns"},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec},
        }
    )


def error(**spec: Any) -> str:
    with pytest.raises(ValidationError) as info:
        trainjob(**spec)
    return str(info.value)


# -- numProcPerNode ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["auto", "cpu", "gpu", "4"])
def test_num_proc_per_node_refuses_strings_at_v2_3(value: str) -> None:
    message = error(trainer={"numProcPerNode": value})
    assert "spec.trainer.numProcPerNode" in message and "valid integer" in message
    # ... which v2.1 accepts (IntOrString there).
    assert v2_1.Trainer.from_dict({"numProcPerNode": value}).num_proc_per_node == value


def test_num_proc_per_node_is_an_integer() -> None:
    assert trainjob(trainer={"numProcPerNode": 8}).spec.trainer.num_proc_per_node == 8  # type: ignore[union-attr]
    assert "numProcPerNode" not in v2_3.TorchMLPolicySource.model_fields  # gone from torch
    assert "elasticPolicy" not in {f.alias for f in v2_3.TorchMLPolicySource.model_fields.values()}


# -- runtimePatches ---------------------------------------------------------------------------


def patch(manager: str, **spec: Any) -> dict[str, Any]:
    return {"manager": manager, **({"trainingRuntimeSpec": spec} if spec else {})}


def test_runtime_patches_round_trip() -> None:
    patches = [
        patch(
            "kueue.x-k8s.io/manager",
            template={
                "metadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"}},
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {"annotations": {"a": "b"}},
                                "spec": {
                                    "template": {
                                        "spec": {
                                            "nodeSelector": {"pool": "gpu"},
                                            "tolerations": [{"key": "gpu", "operator": "Exists"}],
                                            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
                                            "containers": [
                                                {
                                                    "name": "node",
                                                    "env": [{"name": "A", "value": "1"}],
                                                    "securityContext": {"runAsNonRoot": True},
                                                }
                                            ],
                                            "securityContext": {"fsGroup": 1000},
                                            "terminationGracePeriodSeconds": 30,
                                        }
                                    }
                                },
                            },
                        }
                    ]
                },
            },
        ),
        {"manager": "user", "time": "2026-01-01T00:00:00Z"},
    ]
    job = trainjob(runtimePatches=patches)
    assert job.to_dict()["spec"]["runtimePatches"] == patches
    assert job.spec is not None and job.spec.runtime_patches is not None
    first = job.spec.runtime_patches[0].training_runtime_spec
    assert first is not None and first.template is not None and first.template.spec is not None
    (rjob,) = first.template.spec.replicated_jobs or []
    assert rjob.name == "node"


def test_runtime_patches_are_keyed_by_manager() -> None:
    message = error(runtimePatches=[patch("kueue.x-k8s.io/manager"), patch("kueue.x-k8s.io/manager")])
    assert "spec.runtimePatches" in message and "Duplicate value" in message
    assert "spec.runtimePatches.0.manager" in error(runtimePatches=[patch("")])
    assert "spec.runtimePatches.0.manager" in error(runtimePatches=[{"trainingRuntimeSpec": {}}])
    assert "at most 253" in error(runtimePatches=[patch("m" * 254)])


def test_at_most_16_runtime_patches() -> None:
    assert len(trainjob(runtimePatches=[patch(f"m{i}") for i in range(16)]).spec.runtime_patches or []) == 16  # type: ignore[union-attr]
    message = error(runtimePatches=[patch(f"m{i}") for i in range(17)])
    assert "spec.runtimePatches" in message and "at most 16 items" in message


def test_patched_containers_and_replicated_jobs_are_keyed_by_name() -> None:
    pod = {"containers": [{"name": "node"}, {"name": "node"}]}
    template = {
        "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]}
    }
    assert "Duplicate value" in error(runtimePatches=[patch("m", template=template)])
    jobs = {"spec": {"replicatedJobs": [{"name": "node"}, {"name": "node"}]}}
    assert "Duplicate value" in error(runtimePatches=[patch("m", template=jobs)])
    env = {"containers": [{"name": "node", "env": [{"name": "A"}, {"name": "A"}]}]}
    template = {
        "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": env}}}}]}
    }
    assert "Duplicate value" in error(runtimePatches=[patch("m", template=template)])


def test_pod_spec_patch_allows_only_its_fields() -> None:
    """Other pod fields are not the patch's: they load as unknown fields, which the API server prunes."""
    assert set(v2_3.PodSpecPatch.model_fields) == {
        "service_account_name",
        "volumes",
        "init_containers",
        "containers",
        "image_pull_secrets",
        "security_context",
        "node_selector",
        "affinity",
        "tolerations",
        "scheduling_gates",
        "termination_grace_period_seconds",
    }
    assert "spec.runtimePatches.0" in error(
        runtimePatches=[
            patch(
                "m",
                template={
                    "spec": {
                        "replicatedJobs": [
                            {
                                "name": "node",
                                "template": {
                                    "spec": {"template": {"spec": {"terminationGracePeriodSeconds": -1}}}
                                },
                            }
                        ]
                    }
                },
            )
        ]
    )


# -- activeDeadlineSeconds ------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1])
def test_active_deadline_seconds_is_at_least_one(value: int) -> None:
    message = error(activeDeadlineSeconds=value)
    assert "spec.activeDeadlineSeconds" in message and "greater than or equal to 1" in message


def test_active_deadline_seconds() -> None:
    assert trainjob(activeDeadlineSeconds=1).spec.active_deadline_seconds == 1  # type: ignore[union-attr]
    assert trainjob(activeDeadlineSeconds=2**40).to_dict()["spec"]["activeDeadlineSeconds"] == 2**40  # int64
    assert "spec.activeDeadlineSeconds" in error(activeDeadlineSeconds="60")
    assert trainjob().spec.active_deadline_seconds is None  # type: ignore[union-attr]
    assert c23.TrainJobDeadlineExceededReason == "DeadlineExceeded"
    assert c23.TrainJobDeadlineExceededMessage == "TrainJob exceeded its active deadline"


# -- the rest of the TrainJob -------------------------------------------------------------------


def test_trainjob_defaults_and_removed_fields() -> None:
    job = trainjob()
    assert job.spec is not None
    assert job.spec.suspend is False
    assert job.spec.managed_by == "trainer.kubeflow.org/trainjob-controller"
    assert job.spec.runtime_ref.kind == "ClusterTrainingRuntime"
    assert job.to_dict()["spec"] == {"runtimeRef": {"name": "torch-distributed"}}
    aliases = {info.alias for info in v2_3.TrainJobSpec.model_fields.values()}
    assert aliases.isdisjoint({"labels", "annotations", "podTemplateOverrides"})
    assert {"runtimePatches", "activeDeadlineSeconds"} <= aliases


def test_trainjob_bounds() -> None:
    assert "spec.trainer.image" in error(trainer={"image": "x" * 501})
    assert "spec.trainer.command" in error(trainer={"command": ["x"] * 129})
    assert "spec.initializer.dataset.storageUri" in error(initializer={"dataset": {"storageUri": "x" * 2049}})
    assert "spec.runtimeRef.name" in error(runtimeRef={"name": "n" * 254})
    assert "spec.managedBy" in error(managedBy="m" * 254)


def test_trainjob_status_trainer_status_and_conditions() -> None:
    condition = {
        "type": "Failed",
        "status": "True",
        "reason": c23.TrainJobDeadlineExceededReason,
        "message": c23.TrainJobDeadlineExceededMessage,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    status = {
        "conditions": [condition],
        "trainerStatus": {"progressPercentage": 50, "lastUpdatedTime": "2026-01-01T00:00:00Z"},
    }
    job = v2_3.TrainJob.from_dict({"metadata": {"name": "t"}, "status": status})
    assert job.to_dict()["status"] == status
    too_many = [{**condition, "type": f"T{i}"} for i in range(9)]
    with pytest.raises(ValidationError, match=r"status\.conditions"):
        v2_3.TrainJob.from_dict({"metadata": {"name": "t"}, "status": {"conditions": too_many}})


# -- runtimes ----------------------------------------------------------------------------------


def test_ml_policies() -> None:
    spec = v2_3.TrainingRuntimeSpec.from_dict({"mlPolicy": {"numNodes": 2, "flux": {}}})
    assert spec.ml_policy is not None and spec.ml_policy.flux is not None
    assert spec.ml_policy.flux.num_proc_per_node == 1
    for name in ("jax", "xgboost", "torch"):
        policy = v2_3.MLPolicy.from_dict({name: {}})
        assert policy.to_dict() == {name: {}}
    torch = v2_3.TorchMLPolicySource.from_dict(
        {"envInjection": {"targets": [{"jobName": "node", "containerNames": ["sidecar"]}]}}
    )
    assert torch.env_injection is not None and torch.env_injection.targets is not None
    with pytest.raises(ValidationError, match="containerNames"):
        v2_3.EnvInjectionTarget.from_dict({"jobName": "node", "containerNames": []})
    with pytest.raises(ValidationError, match="jobName"):
        v2_3.EnvInjection.from_dict({"targets": [{"jobName": "a", "containerNames": ["x"]}] * 2})


def test_unchanged_classes_are_v2_1s() -> None:
    assert v2_3.PodGroupPolicy is v2_1.PodGroupPolicy
    assert v2_3.TrainerStatus.__module__ == "trainer.api.trainjob_progress_v1alpha1"
    assert jobset.ReplicatedJob is jobset_v0_10.ReplicatedJob
    assert jobset.SuccessPolicy is jobset_v0_10.SuccessPolicy
    assert v2_3.JobSetTemplateSpec is not v2_1.JobSetTemplateSpec  # it embeds JobSet v0.12.0's spec


# -- JobSet v0.12.0 ------------------------------------------------------------------------------


def test_jobset_volume_claim_policies_and_restarts() -> None:
    spec = jobset.JobSetSpec.from_dict(
        {
            "volumeClaimPolicies": [
                {
                    "templates": [
                        {
                            "metadata": {"name": "model-cache"},
                            "spec": {
                                "accessModes": ["ReadWriteMany"],
                                "resources": {"requests": {"storage": "10Gi"}},
                            },
                        }
                    ]
                }
            ],
            "failurePolicy": {
                "restartStrategy": jc23.InPlaceRestart,
                "rules": [{"name": "r", "action": jc23.RestartJob}],
            },
        }
    )
    (policy,) = spec.volume_claim_policies or []
    assert policy.retention_policy is None
    assert jobset.VolumeRetentionPolicy().when_deleted == jc23.RetentionPolicyDelete
    with pytest.raises(ValidationError):
        jobset_v0_10.FailurePolicy.from_dict({"restartStrategy": jc23.InPlaceRestart})
    with pytest.raises(ValidationError, match="volumeClaimPolicies"):
        jobset.JobSetSpec.from_dict({"volumeClaimPolicies": [{}] * 51})
    status = jobset.JobSetStatus.from_dict(
        {
            "replicatedJobsStatus": [
                {
                    "name": "w",
                    "ready": 0,
                    "succeeded": 0,
                    "failed": 0,
                    "active": 1,
                    "suspended": 0,
                    "jobRestarts": [0, 2],
                }
            ],
            "currentInPlaceRestartAttempt": 1,
        }
    )
    assert status.replicated_jobs_status is not None and status.replicated_jobs_status[0].job_restarts == [
        0,
        2,
    ]
    assert jc23.JobSetRestarting == "RestartingJobSet"


# -- upstream's own objects -----------------------------------------------------------------------


@functools.cache
def _module(module: str, version: str) -> Path:
    return module_dir(GoMain(module, version, module, "source-only"))


KINDS = {kind.kind: kind for kind in CRD_KINDS}


def upstream_objects() -> list[tuple[str, dict[str, Any]]]:
    trainer = _module("github.com/kubeflow/trainer/v2", "v2.3.0")
    jobset_dir = _module("sigs.k8s.io/jobset", "v0.12.0")
    files = [
        *sorted((trainer / "manifests/base/runtimes").rglob("*.yaml")),
        *sorted((trainer / "examples").rglob("*.yaml")),
        *sorted((jobset_dir / "config/samples").rglob("*.yaml")),
    ]
    found = []
    for path in files:
        try:
            documents = list(yaml.load_all(path.read_text(), Loader=LOADER))
        except yaml.YAMLError:
            continue  # templated examples
        for i, doc in enumerate(documents):
            if isinstance(doc, dict) and doc.get("kind") in KINDS and "v1alpha" in str(doc.get("apiVersion")):
                found.append((f"{path.relative_to(path.parents[2])}#{i}", doc))
    return found


def test_upstream_runtimes_and_examples_load_and_round_trip() -> None:
    objects = upstream_objects()
    kinds = {doc["kind"] for _, doc in objects}
    assert kinds == set(KINDS), kinds  # every v2.3 kind is exercised
    failures = []
    for name, doc in objects:
        try:
            loaded = KINDS[doc["kind"]].from_dict(doc)
        except ValidationError as err:
            failures.append(f"{name}: {err}")
            continue
        if loaded.to_dict() != json.loads(json.dumps(doc)):
            failures.append(f"{name}: does not round-trip")
        failures.extend(f"{name}: unknown field {path}" for path in unknown_fields(loaded, doc["kind"]))
    assert failures == []


def unknown_fields(model: BaseModel, path: str) -> list[str]:
    """Fields our typed models kept as unknown (``extra``): upstream uses a field we lack."""
    type_meta = ("apiVersion", "kind") if isinstance(model, KindModel) else ()
    found = [f"{path}.{key}" for key in (model.model_extra or {}) if key not in type_meta]
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        for i, item in enumerate(value if isinstance(value, list) else [value]):
            if isinstance(item, BaseModel):
                suffix = f"[{i}]" if isinstance(value, list) else ""
                found.extend(unknown_fields(item, f"{path}.{info.alias or name}{suffix}"))
    return found


def test_unknown_fields_are_found() -> None:
    job = trainjob(
        podTemplateOverrides=[{"targetJobs": [{"name": "node"}]}], runtimePatches=[{"manager": "m", "x": 1}]
    )
    assert unknown_fields(job, "TrainJob") == [
        "TrainJob.spec.podTemplateOverrides",
        "TrainJob.spec.runtimePatches[0].x",
    ]
