"""Runtime registry: ValidateObjects as the TrainJob webhook uses it, watches, robustness, divergences."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_fixtures import FakeReader, RecordingIndexer, rjob, tj_model, training_runtime, trainjob

from manager.meta.field import FieldError
from manager.scheme import ObjectKey
from trainer.runtime.errors import RuntimeFailure
from trainer.runtime.framework import Framework
from trainer.runtime.objects import LIMITRANGE_GVK
from trainer.runtime.plugins.watches import (
    by_controller_owner,
    suspended_trainjobs_in_namespace,
    suspended_trainjobs_using_runtime_class,
)
from trainer.runtime.registry import CLUSTER_TRAINING_RUNTIME_KEY, TRAINING_RUNTIME_KEY, new_runtimes
from trainer.runtime.resources import gpu_count

Json = dict[str, Any]

DEPRECATION = (
    'Referenced ClusterTrainingRuntime "test-runtime" is deprecated and will be removed in a future release of '
    "Kubeflow Trainer. See runtime deprecation policy: "
    "https://www.kubeflow.org/docs/components/trainer/operator-guides/runtime/#runtime-deprecation-policy"
)


async def runtimes(*objects: Json) -> Any:
    return await new_runtimes(FakeReader(objects), RecordingIndexer())


async def test_validate_clean_trainjob_on_cluster_runtime() -> None:
    # spec: trainer B1
    ctr = training_runtime(cluster=True)
    tj = trainjob(name="valid-job-name", kind="ClusterTrainingRuntime")
    assert await (await runtimes(ctr))[CLUSTER_TRAINING_RUNTIME_KEY].validate_objects(None, tj) == ([], [])


async def test_validate_missing_cluster_runtime_uses_capital_r_path() -> None:
    # spec: trainer B2
    tj = trainjob(runtime="unsupported-runtime", kind="ClusterTrainingRuntime")
    warnings, errors = await (await runtimes())[CLUSTER_TRAINING_RUNTIME_KEY].validate_objects(None, tj)
    assert warnings == []
    assert [str(e) for e in errors] == [
        'spec.RuntimeRef: Invalid value: {"name":"unsupported-runtime","apiGroup":"trainer.kubeflow.org",'
        '"kind":"ClusterTrainingRuntime"}: ClusterTrainingRuntime.trainer.kubeflow.org "unsupported-runtime" '
        "not found: specified clusterTrainingRuntime must be created before the TrainJob is created"
    ]


async def test_validate_deprecated_cluster_runtime_warns() -> None:
    # spec: trainer B3
    ctr = training_runtime(cluster=True, meta={"labels": {"trainer.kubeflow.org/support": "deprecated"}})
    tj = trainjob(kind="ClusterTrainingRuntime")
    assert await (await runtimes(ctr))[CLUSTER_TRAINING_RUNTIME_KEY].validate_objects(None, tj) == (
        [DEPRECATION],
        [],
    )


async def test_validate_missing_training_runtime() -> None:
    # spec: trainer B5
    warnings, errors = await (await runtimes())[TRAINING_RUNTIME_KEY].validate_objects(
        None, trainjob(runtime="invalid")
    )
    assert [(e.field, e.detail) for e in errors] == [
        (
            "spec.runtimeRef",
            'TrainingRuntime.trainer.kubeflow.org "invalid" not found: specified trainingRuntime must be created '
            "before the TrainJob is created",
        )
    ]
    assert warnings == []


async def test_deprecated_training_runtime_never_warns() -> None:
    tr = training_runtime(meta={"labels": {"trainer.kubeflow.org/support": "deprecated"}})
    assert await (await runtimes(tr))[TRAINING_RUNTIME_KEY].validate_objects(None, trainjob()) == ([], [])


async def test_validate_aggregates_plugin_errors_in_registry_order() -> None:
    # spec: trainer B7 B11 B13
    tr = training_runtime(ml_policy={"torch": {}})
    tr["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"][
        "containers"
    ] = []
    tj = trainjob(
        initializer={"model": {"storageUri": "hf://trainjob-model"}},
        trainer={"numProcPerNode": "invalid", "env": [{"name": "PET_NODE_RANK", "value": "1"}]},
    )
    warnings, errors = await (await runtimes(tr))[TRAINING_RUNTIME_KEY].validate_objects(None, tj)
    assert warnings == []
    assert [(e.field, e.detail) for e in errors] == [
        ("spec.trainer.numProcPerNode", "must have an int value or [auto cpu gpu]"),
        ("spec.trainer.env", "must not have reserved envs, invalid envs configured: [PET_NODE_RANK]"),
        ("spec.runtimeRef", "must have container with name - model-initializer in the model-initializer job"),
    ]


async def test_validate_mpi_num_proc() -> None:
    # spec: trainer B10
    tr = training_runtime(ml_policy={"mpi": {}})
    _, errors = await (await runtimes(tr))[TRAINING_RUNTIME_KEY].validate_objects(
        None, trainjob(trainer={"numProcPerNode": "invalid"})
    )
    assert errors == [
        FieldError.invalid(
            "spec.trainer.numProcPerNode", "invalid", "must have an int value for MPI TrainJob"
        )
    ]


async def test_validation_judges_what_the_go_struct_holds_not_the_schemas_constraints() -> None:
    """A TrainJob sent straight to the webhook has passed only the Go decode: the validators see
    the zero values Go leaves for what is missing (found by admission fuzzing: pydantic's "Field
    required" and "Value error, apiVersion" reached the denials). An old TrainJob without
    ``runtimeRef``, an empty ``apiVersion`` and an override without ``targetJobs`` are admitted as
    v2.1.0 admits them; an override whose target has no name is refused for naming no job."""
    old = trainjob(trainer={"numNodes": 2}, suspend=True)
    del old["spec"]["runtimeRef"]
    new = trainjob(
        trainer={"numNodes": 2}, suspend=True, podTemplateOverrides=[{"spec": {"nodeSelector": {"a": "b"}}}]
    )
    new["apiVersion"] = ""
    runtime = (await runtimes(training_runtime()))[TRAINING_RUNTIME_KEY]
    assert await runtime.validate_objects(old, new) == ([], [])

    nameless = trainjob(trainer={"numNodes": 2}, podTemplateOverrides=[{"targetJobs": [{}]}])
    _, errors = await runtime.validate_objects(None, nameless)
    assert [str(e) for e in errors] == [
        'spec.podTemplateOverrides: Invalid value: [{"targetJobs":[{}]}]: '
        "must not have targetJob that doesn't exist in the runtime job template"
    ]


async def test_malformed_runtime_template_is_a_failure_not_a_crash() -> None:
    """Divergence: a pod template of the wrong shape becomes a RuntimeFailure naming the plugin."""
    tr = training_runtime(rjobs=[rjob("node", "trainer", "not-a-list")])  # type: ignore[arg-type]
    with pytest.raises(RuntimeFailure, match=r"^malformed runtime template: "):
        await (await runtimes(tr))[TRAINING_RUNTIME_KEY].new_objects(trainjob(trainer={"numNodes": 2}))


async def test_validation_plugin_crash_is_an_internal_error() -> None:
    class Crashing:
        name = "Crashing"

        def __init__(self, _context: Any) -> None:
            pass

        async def validate(self, info: Any, old: Any, new: Any) -> tuple[list[str], list[FieldError]]:
            raise KeyError("containers")

    framework = await Framework.new(FakeReader(), {"Crashing": Crashing}, RecordingIndexer())
    _, errors = await framework.run_custom_validation_plugins(None, None, tj_model())
    assert [str(e) for e in errors] == ["spec: Internal error: plugin Crashing: 'containers'"]


async def test_cluster_runtime_registers_no_watches() -> None:
    registry = await runtimes()
    assert registry[CLUSTER_TRAINING_RUNTIME_KEY].event_handler_registrars() == []
    assert len(registry[TRAINING_RUNTIME_KEY].event_handler_registrars()) == 9


async def test_runtime_factory_index_errors() -> None:
    class Failing(RecordingIndexer):
        async def index_field(self, gvk: Any, name: str, fn: Any) -> None:
            if name == ".spec.runtimeRef.kind=clusterTrainingRuntime":
                raise ValueError("indexer closed")
            await super().index_field(gvk, name, fn)

    with pytest.raises(RuntimeFailure) as failure:
        await new_runtimes(FakeReader(), Failing())
    assert failure.value.message == (
        'initializing runtime "TrainingRuntime.trainer.kubeflow.org": '
        "setting index on ClusterTrainingRuntime for TrainJob: indexer closed"
    )


# -- watch mappers -----------------------------------------------------------------------------


async def test_owner_mapper_uses_controller_trainjob_owner() -> None:
    owned = {
        "metadata": {
            "name": "x",
            "namespace": "ns",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "p", "controller": False},
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "name": "tj",
                    "controller": True,
                },
            ],
        }
    }
    assert await by_controller_owner(FakeReader(), owned) == [ObjectKey("ns", "tj")]
    owned["metadata"]["ownerReferences"][1]["controller"] = False  # type: ignore[index]
    assert await by_controller_owner(FakeReader(), owned) == []


async def test_limit_range_requeues_suspended_trainjobs_of_its_namespace() -> None:
    reader = FakeReader(
        [
            trainjob(name="a", namespace="ns", suspend=True),
            trainjob(name="b", namespace="ns", suspend=False),
            trainjob(name="c", namespace="other", suspend=True),
        ]
    )
    limit_range = {
        "apiVersion": "v1",
        "kind": LIMITRANGE_GVK.kind,
        "metadata": {"name": "l", "namespace": "ns"},
    }
    assert await suspended_trainjobs_in_namespace(reader, limit_range) == [ObjectKey("ns", "a")]


async def test_runtime_class_requeues_suspended_trainjobs_of_runtimes_using_it() -> None:
    """Matches by runtime name across namespaces (upstream), every duplicate dropped (divergence)."""
    uses = [rjob("node", "trainer", [], pod_extra={"runtimeClassName": "gvisor"})] * 2
    reader = FakeReader(
        [
            training_runtime("tr", namespace="ns1", rjobs=uses),
            training_runtime("ctr", cluster=True, rjobs=uses),
            training_runtime("unrelated", namespace="ns1"),
            trainjob(name="a", namespace="ns1", runtime="tr", suspend=True),
            trainjob(name="b", namespace="ns2", runtime="tr", suspend=True),
            trainjob(name="a", namespace="ns2", runtime="tr", suspend=True),
            trainjob(name="c", namespace="ns1", runtime="ctr", kind="ClusterTrainingRuntime", suspend=True),
            trainjob(name="d", namespace="ns1", runtime="ctr", kind="ClusterTrainingRuntime", suspend=False),
            trainjob(name="e", namespace="ns1", runtime="unrelated", suspend=True),
        ]
    )
    runtime_class = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "gvisor"}}
    assert await suspended_trainjobs_using_runtime_class(reader, runtime_class) == [
        ObjectKey("ns1", "a"),
        ObjectKey("ns2", "a"),  # upstream's name-only compaction would drop this one
        ObjectKey("ns2", "b"),
        ObjectKey("ns1", "c"),
    ]


def test_gpu_resource_choice_is_stable() -> None:
    """Divergence: Go picks among several ``*gpu*`` resources in map order; we take the first by name."""
    resources = {"requests": {"z.com/gpu": "8", "a.com/gpu": "2"}}
    assert gpu_count(resources) == 2
    assert gpu_count({"requests": {"cpu": "1"}, "limits": {"nvidia.com/GPU": "1500m"}}) == 2


async def test_watch_event_rules() -> None:
    """Owner watches react to every event and to both versions on update; gang watches only to changes."""
    watches = {
        (w.kind.kind, w.kind.group): w
        for w in (await runtimes())[TRAINING_RUNTIME_KEY].event_handler_registrars()
    }
    owner = watches[("JobSet", "jobset.x-k8s.io")]
    assert owner.events == {"create", "update", "delete", "generic"} and owner.map_old_on_update
    assert owner.register_anyway and owner.missing_crd_message == "JobSet CRDs must be installed in advance"
    for kind in (("LimitRange", ""), ("RuntimeClass", "node.k8s.io")):
        watch = watches[kind]
        assert watch.events == {"create", "update", "delete"} and not watch.map_old_on_update
        assert watch.missing_crd_message == "PodGroup CRDs must be installed in advance"
        assert not watch.register_anyway and watch.requires_crd is not None
