"""JobSet plugin (docs/behaviour/trainer.md §10 F56-F79): pod network endpoints and TrainJob validation."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from runtime_fixtures import FakeReader, rjob, tj_model

from manager.client.errors import InternalError
from manager.meta.field import FieldError
from trainer.api.trainer_v1alpha1 import MLPolicy
from trainer.runtime.info import Info, PodSet, RuntimePolicy, TemplateSpec
from trainer.runtime.plugins.base import PluginContext
from trainer.runtime.plugins.jobset import JobSet

Json = dict[str, Any]


def plugin(reader: FakeReader | None = None) -> JobSet:
    return JobSet(PluginContext(reader or FakeReader()))


# -- IdentifyPodNetwork -----------------------------------------------------------------------------


def network_info(spec: Json | None) -> Info:
    return Info(
        runtime_policy=RuntimePolicy(ml_policy=MLPolicy.from_dict({"mpi": {}})),
        template_spec=TemplateSpec(
            obj_apply=spec,
            pod_sets=[PodSet(name="launcher"), PodSet(name="node", ancestor="trainer", count=2)],
        ),
    )


def launcher_node_spec(**spec: Any) -> Json:
    return {
        "replicatedJobs": [
            rjob("launcher", None, [{"name": "node"}]),
            rjob("node", "trainer", [{"name": "node"}], parallelism=2),
        ],
        **spec,
    }


def test_f56_network_nil_info() -> None:
    # spec: trainer F56
    plugin().identify_pod_network(None, tj_model())


def test_f57_network_nil_trainjob() -> None:
    # spec: trainer F57
    info = network_info(launcher_node_spec())
    before = copy.deepcopy(info)
    plugin().identify_pod_network(info, None)
    assert info == before


def test_f58_network_without_jobset_spec() -> None:
    # spec: trainer F58
    info = network_info(None)
    before = copy.deepcopy(info)
    plugin().identify_pod_network(info, tj_model(name="trainJob"))
    assert info == before


def endpoints(info: Info) -> list[list[str]]:
    return [list(ps.endpoints or ()) for ps in info.template_spec.pod_sets]


def test_f59_endpoints_follow_count() -> None:
    # spec: trainer F59
    info = network_info(launcher_node_spec())
    plugin().identify_pod_network(info, tj_model(name="trainJob"))
    assert endpoints(info) == [
        ["trainJob-launcher-0-0.trainJob"],
        ["trainJob-node-0-0.trainJob", "trainJob-node-0-1.trainJob"],
    ]


def test_f60_custom_subdomain() -> None:
    # spec: trainer F60
    info = network_info(launcher_node_spec(network={"subdomain": "kubeflow.org"}))
    info.template_spec.pod_sets[1].count = 1
    plugin().identify_pod_network(info, tj_model(name="trainJob"))
    assert endpoints(info) == [["trainJob-launcher-0-0.kubeflow.org"], ["trainJob-node-0-0.kubeflow.org"]]


# -- Validate -----------------------------------------------------------------------------------------

RUNTIME_REF = {"name": "test-runtime", "apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime"}


def spec_info(*rjobs: Json) -> Info:
    return Info(template_spec=TemplateSpec(obj_apply={"replicatedJobs": list(rjobs)}))


async def validate(
    info: Info, new: Any, old: Any = None, reader: FakeReader | None = None
) -> list[FieldError]:
    warnings, errors = await plugin(reader).validate(info, old, new)
    assert warnings == []
    return errors


async def test_f61_nothing_configured() -> None:
    # spec: trainer F61
    assert await validate(Info(template_spec=TemplateSpec(obj_apply={})), tj_model()) == []


async def test_f62_null_dataset() -> None:
    # spec: trainer F62
    assert await validate(spec_info(), tj_model(initializer={"dataset": None})) == []


async def test_f63_dataset_needs_job() -> None:
    # spec: trainer F63
    errors = await validate(spec_info(rjob("random", None, [])), tj_model(initializer={"dataset": {}}))
    assert errors == [
        FieldError.invalid(
            "spec.runtimeRef",
            tj_model().spec.runtime_ref,  # type: ignore[union-attr]
            "must have dataset-initializer job when trainJob is configured with input datasetConfig",
        )
    ]
    assert str(errors[0]) == (
        'spec.runtimeRef: Invalid value: {"name":"test-runtime","apiGroup":"trainer.kubeflow.org",'
        '"kind":"TrainingRuntime"}: must have dataset-initializer job when trainJob is configured with input '
        "datasetConfig"
    )


async def test_f64_dataset_job_needs_container() -> None:
    # spec: trainer F64
    errors = await validate(
        spec_info(rjob("dataset-initializer", None, [])), tj_model(initializer={"dataset": {}})
    )
    assert [(e.field, e.bad_value, e.detail) for e in errors] == [
        (
            "spec.runtimeRef",
            tj_model().spec.runtime_ref,  # type: ignore[union-attr]
            "must have container with name - dataset-initializer in the dataset-initializer job",
        )
    ]


async def test_f65_null_dataset_with_job() -> None:
    # spec: trainer F65
    assert (
        await validate(
            spec_info(rjob("dataset-initializer", None, [])), tj_model(initializer={"dataset": None})
        )
        == []
    )


async def test_f66_model_needs_job() -> None:
    # spec: trainer F66
    errors = await validate(spec_info(rjob("random", None, [])), tj_model(initializer={"model": {}}))
    assert [(e.type, e.field, e.detail) for e in errors] == [
        (
            FieldError.invalid("", None, "").type,
            "spec.runtimeRef",
            "must have model-initializer job when trainJob is configured with input modelConfig",
        )
    ]


async def test_f67_model_job_needs_container() -> None:
    # spec: trainer F67
    errors = await validate(
        spec_info(rjob("model-initializer", None, [])), tj_model(initializer={"model": {}})
    )
    assert [e.detail for e in errors] == [
        "must have container with name - model-initializer in the model-initializer job"
    ]


def override_errors(overrides: list[Json], *details: str) -> list[FieldError]:
    return [FieldError.invalid("spec.podTemplateOverrides", overrides, d) for d in details]


async def test_f68_unknown_target_job() -> None:
    # spec: trainer F68
    overrides = [{"targetJobs": [{"name": "invalid"}]}]
    errors = await validate(
        spec_info(rjob("node", "trainer", [{"name": "node"}])), tj_model(podTemplateOverrides=overrides)
    )
    assert errors == override_errors(
        overrides, "must not have targetJob that doesn't exist in the runtime job template"
    )


NODE_WITH_INIT = rjob("node", "trainer", [{"name": "node"}], init_containers=[{"name": "custom-init"}])


async def test_f69_unknown_init_container() -> None:
    # spec: trainer F69
    overrides = [{"targetJobs": [{"name": "node"}], "spec": {"initContainers": [{"name": "invalid"}]}}]
    errors = await validate(spec_info(NODE_WITH_INIT), tj_model(podTemplateOverrides=overrides))
    assert errors == override_errors(
        overrides, "must not have initContainer that doesn't exist in the runtime job node"
    )


async def test_f70_unknown_container() -> None:
    # spec: trainer F70
    overrides = [{"targetJobs": [{"name": "node"}], "spec": {"containers": [{"name": "invalid"}]}}]
    errors = await validate(spec_info(NODE_WITH_INIT), tj_model(podTemplateOverrides=overrides))
    assert errors == override_errors(
        overrides, "must not have container that doesn't exist in the runtime job node"
    )


async def test_f71_env_on_reserved_container() -> None:
    # spec: trainer F71
    overrides = [
        {
            "targetJobs": [{"name": "node"}],
            "spec": {"containers": [{"name": "node", "env": [{"name": "ENV_NAME", "value": "OVERRIDE"}]}]},
        }
    ]
    errors = await validate(spec_info(NODE_WITH_INIT), tj_model(podTemplateOverrides=overrides))
    assert errors == override_errors(
        overrides, "must not have envs for the dataset-initializer, model-initializer, node containers"
    )


def sa_override(name: str) -> list[Json]:
    return [{"targetJobs": [{"name": "node"}], "spec": {"serviceAccountName": name}}]


NODE_ONLY = rjob("node", "trainer", [{"name": "node"}])


async def test_f72_create_with_override() -> None:
    # spec: trainer F72
    assert await validate(spec_info(NODE_ONLY), tj_model(podTemplateOverrides=sa_override("a"))) == []


async def test_f73_update_with_identical_overrides() -> None:
    # spec: trainer F73
    old = tj_model(podTemplateOverrides=sa_override("a"))
    assert await validate(spec_info(NODE_ONLY), tj_model(podTemplateOverrides=sa_override("a")), old) == []


async def test_f74_update_while_running_is_forbidden() -> None:
    # spec: trainer F74
    old = tj_model(podTemplateOverrides=sa_override("a"))
    new = tj_model(podTemplateOverrides=sa_override("b"))
    errors = await validate(spec_info(NODE_ONLY), new, old)
    assert errors == [
        FieldError.forbidden(
            "spec.podTemplateOverrides",
            "PodTemplateOverrides can only be modified when the TrainJob is suspended",
        )
    ]
    assert str(errors[0]) == (
        "spec.podTemplateOverrides: Forbidden: PodTemplateOverrides can only be modified when the TrainJob is suspended"
    )


def jobset(actives: dict[str, int]) -> Json:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "test-job", "namespace": "default"},
        "status": {
            "replicatedJobsStatus": [
                {"name": n, "ready": 0, "succeeded": 0, "failed": 0, "active": a, "suspended": 0}
                for n, a in actives.items()
            ]
        },
    }


async def suspended_update(reader: FakeReader) -> list[FieldError]:
    old = tj_model(suspend=True, podTemplateOverrides=sa_override("a"))
    new = tj_model(suspend=True, podTemplateOverrides=sa_override("b"))
    return await validate(spec_info(NODE_ONLY), new, old, reader)


async def test_f75_suspended_without_jobset() -> None:
    # spec: trainer F75
    assert await suspended_update(FakeReader()) == []


async def test_f76_suspended_with_inactive_jobset() -> None:
    # spec: trainer F76
    assert await suspended_update(FakeReader([jobset({"dataset-initializer": 0, "node": 0})])) == []


def active_error(name: str) -> FieldError:
    return FieldError.forbidden(
        "spec.podTemplateOverrides",
        f"PodTemplateOverrides cannot be modified when the JobSet's ReplicatedJob {name} is still active",
    )


async def test_f77_active_job_forbids_change() -> None:
    # spec: trainer F77
    assert await suspended_update(FakeReader([jobset({"node": 2})])) == [active_error("node")]


async def test_f78_two_active_jobs_in_status_order() -> None:
    # spec: trainer F78
    errors = await suspended_update(FakeReader([jobset({"dataset-initializer": 1, "node": 2})]))
    assert errors == [active_error("dataset-initializer"), active_error("node")]


async def test_f79_jobset_read_error() -> None:
    # spec: trainer F79
    errors = await suspended_update(FakeReader(errors={"JobSet": InternalError("client error")}))
    assert errors == [FieldError.internal("spec.podTemplateOverrides", "client error")]
    assert str(errors[0]) == "spec.podTemplateOverrides: Internal error: client error"


@pytest.mark.parametrize("bad", [None, Info(template_spec=TemplateSpec(obj_apply=None))])
async def test_validate_without_jobset_spec_is_a_no_op(bad: Info | None) -> None:
    assert await validate(bad, tj_model(initializer={"dataset": {}})) == []
