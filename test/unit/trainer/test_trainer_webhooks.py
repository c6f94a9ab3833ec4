"""Validating webhooks for TrainJob, TrainingRuntime and ClusterTrainingRuntime (docs/behaviour/trainer.md §5, §10 B1-B3, C)."""

from __future__ import annotations

from typing import Any

import pytest
from trainer_unit_fixtures import (
    ClientReader,
    container,
    fake_client,
    rjob,
    runtime,
    trainjob,
    wrapper_rjobs,
)

from manager.meta.field import ErrorType, FieldError
from manager.webhook import AdmissionRequest, validating_handler
from trainer.runtime.registry import new_runtimes
from webhooks.trainingruntime import (
    ClusterTrainingRuntimeValidator,
    TrainingRuntimeValidator,
    validate_replicated_jobs,
)
from webhooks.trainjob import TrainJobValidator

Json = dict[str, Any]
URL = "https://www.kubeflow.org/docs/components/trainer/operator-guides/runtime/#runtime-deprecation-policy"


async def validator(*objects: Json) -> TrainJobValidator:
    return TrainJobValidator(await new_runtimes(ClientReader(fake_client(objects)), None))


def ctr(**kwargs: Any) -> Json:
    return runtime(namespace=None, **kwargs)


def request(operation: str, obj: Json | None, old: Json | None = None) -> AdmissionRequest:
    return AdmissionRequest(uid="1", kind={}, resource={}, operation=operation, object=obj, old_object=old)


async def test_valid_trainjob_on_cluster_runtime() -> None:
    # spec: trainer B1
    tj = trainjob("valid-job-name", kind="ClusterTrainingRuntime")
    assert await (await validator(ctr())).validate_create(tj) == []


async def test_missing_cluster_runtime_is_one_invalid_error_on_capital_runtime_ref() -> None:
    # spec: trainer B2
    tj = trainjob(runtime_name="unsupported-runtime", kind="ClusterTrainingRuntime")
    runtimes = await new_runtimes(ClientReader(fake_client()), None)
    warnings, errors = await runtimes["ClusterTrainingRuntime.trainer.kubeflow.org"].validate_objects(
        None, tj
    )
    assert warnings == []
    [error] = errors
    assert (error.type, error.field) == (ErrorType.INVALID, "spec.RuntimeRef")
    assert error.bad_value.to_dict() == {
        "name": "unsupported-runtime",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    with pytest.raises(Exception, match=r"^spec\.RuntimeRef: Invalid value: "):
        await (await validator()).validate_create(tj)


async def test_deprecated_cluster_runtime_warns() -> None:
    # spec: trainer B3
    tj = trainjob(kind="ClusterTrainingRuntime")
    deprecated = ctr(labels={"trainer.kubeflow.org/support": "deprecated"})
    assert await (await validator(deprecated)).validate_create(tj) == [
        'Referenced ClusterTrainingRuntime "test-runtime" is deprecated and will be removed in a future '
        f"release of Kubeflow Trainer. See runtime deprecation policy: {URL}"
    ]


async def test_unknown_runtime_kind_is_denied_with_403() -> None:
    handler = validating_handler(await validator())
    response = await handler(request("CREATE", trainjob(group="example.com", kind="Foo")))
    assert (response.allowed, response.code, response.reason) == (False, 403, "Forbidden")
    assert response.message == "unsupported runtime: Foo.example.com"


async def test_denial_keeps_warnings_and_upstream_text() -> None:
    deprecated = ctr(labels={"trainer.kubeflow.org/support": "deprecated"})
    tj = trainjob(kind="ClusterTrainingRuntime", initializer={"model": {"storageUri": "hf://m"}})
    deprecated["spec"]["template"]["spec"]["replicatedJobs"] = [rjob("node", "trainer", [container("node")])]
    response = await validating_handler(await validator(deprecated))(request("CREATE", tj))
    assert (response.allowed, response.code) == (False, 403)
    assert response.message == (
        'spec.runtimeRef: Invalid value: {"name":"test-runtime","apiGroup":"trainer.kubeflow.org",'
        '"kind":"ClusterTrainingRuntime"}: must have model-initializer job when trainJob is configured with '
        "input modelConfig"
    )
    assert len(response.warnings) == 1


async def test_update_and_delete() -> None:
    tj = trainjob(kind="ClusterTrainingRuntime")
    handler = validating_handler(await validator(ctr()))
    assert (await handler(request("UPDATE", tj, tj))).allowed
    assert (await handler(request("DELETE", None, tj))).allowed


# -- runtimes --------------------------------------------------------------------------------------

LAUNCHER = rjob("launcher", None, [container("node", command=["mpirun"], args=["echo.sh"])])


def with_launcher(rjobs: list[Json]) -> list[Json]:
    return [*rjobs[:2], LAUNCHER, rjobs[2]]


async def test_plain_cluster_runtime_is_admitted_silently() -> None:
    # spec: trainer C1
    assert await ClusterTrainingRuntimeValidator().validate_create(ctr()) == []


async def test_deprecated_cluster_runtime_create_warns() -> None:
    # spec: trainer C2
    deprecated = ctr(labels={"trainer.kubeflow.org/support": "deprecated"})
    assert await ClusterTrainingRuntimeValidator().validate_create(deprecated) == [
        'ClusterTrainingRuntime "test-runtime" is deprecated and will be removed in a future release of '
        f"Kubeflow Trainer. See runtime deprecation policy: {URL}"
    ]
    assert await ClusterTrainingRuntimeValidator().validate_update(deprecated, deprecated) == []


def test_wrapper_with_launcher_is_valid() -> None:
    # spec: trainer C3
    assert validate_replicated_jobs(runtime(rjobs=with_launcher(wrapper_rjobs()))) == []


def test_unknown_ancestors_are_skipped() -> None:
    # spec: trainer C4
    rjobs = wrapper_rjobs(replicas=2)
    for job in rjobs:
        job["template"]["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = (
            "user-specified"
        )
    assert validate_replicated_jobs(runtime(rjobs=rjobs)) == []


def test_replicas_must_be_one() -> None:
    # spec: trainer C5
    rjobs = with_launcher(wrapper_rjobs(replicas=2))
    rjobs[2]["replicas"] = 2
    errors = validate_replicated_jobs(runtime(rjobs=rjobs))
    assert errors == [
        FieldError.invalid(f"spec.template.spec.replicatedJobs[{i}].replicas", 2, "always must be 1")
        for i in (0, 1, 3)
    ]
    assert (
        str(errors[0]) == "spec.template.spec.replicatedJobs[0].replicas: Invalid value: 2: always must be 1"
    )


def test_required_containers() -> None:
    # spec: trainer C6
    rjobs = wrapper_rjobs()
    for job in rjobs:
        job["template"]["spec"]["template"]["spec"]["containers"] = [container("test")]
    errors = validate_replicated_jobs(runtime(rjobs=rjobs))
    ancestors = ["dataset-initializer", "model-initializer", "trainer"]
    # the containers as json.Marshal of []corev1.Container prints them (Go's field.Invalid)
    assert [str(e) for e in errors] == [
        f"spec.template.spec.replicatedJobs[{i}].template.spec.template.spec.containers: Invalid value: "
        f'[{{"name":"test","resources":{{}}}}]: must contain the required container for the ancestor: {ancestors[i]}'
        for i in range(3)
    ]


async def test_training_runtime_updates_are_not_validated() -> None:
    bad = runtime(rjobs=wrapper_rjobs(replicas=2))
    with pytest.raises(Exception, match="always must be 1"):
        await TrainingRuntimeValidator().validate_create(bad)
    assert await TrainingRuntimeValidator().validate_update(bad, bad) is None
    with pytest.raises(Exception, match="always must be 1"):
        await ClusterTrainingRuntimeValidator().validate_update(bad, bad)
