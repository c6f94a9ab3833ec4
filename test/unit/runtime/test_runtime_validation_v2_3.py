"""The TrainJob webhook's runtime validation at API level v2.3 (Trainer v2.3.0's jobset, torch and
mpi plugins; docs/behaviour/trainer.md §12.5), through ``validate_objects`` as the webhook calls
it, and v2.1's rules unchanged beside them."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_fixtures import FakeReader, RecordingIndexer, rjob, training_runtime, trainjob

from manager.client.errors import InternalError
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.runtime.levels import RuntimeLevel
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.levels.v2_3 import V2_3
from trainer.runtime.levels.v2_3_admission import (
    runtime_patches_equal,
    validate_runtime_patch_targets,
)
from trainer.runtime.registry import CLUSTER_TRAINING_RUNTIME_KEY, TRAINING_RUNTIME_KEY, new_runtimes

Json = dict[str, Any]


async def validate(
    level: RuntimeLevel, runtime: Json, new: Json, old: Json | None = None, *objects: Json, errors: Any = None
) -> list[str]:
    reader = FakeReader([runtime, *objects], errors=errors)
    runtimes = await new_runtimes(reader, RecordingIndexer(), level=level)
    key = (
        CLUSTER_TRAINING_RUNTIME_KEY if runtime["kind"] == "ClusterTrainingRuntime" else TRAINING_RUNTIME_KEY
    )
    _, found = await runtimes[key].validate_objects(old, new)
    return [str(e) for e in found]


def node_runtime(**kwargs: Any) -> Json:
    node = rjob("node", "trainer", [{"name": "node", "image": "img"}], init_containers=[{"name": "init"}])
    return training_runtime(rjobs=[node], **kwargs)


def patch(manager: str = "example.com/kueue", *, job: str = "node", **pod_spec: Any) -> Json:
    rjob_patch: Json = {"name": job}
    if pod_spec:
        rjob_patch["template"] = {"spec": {"template": {"spec": pod_spec}}}
    return {
        "manager": manager,
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [rjob_patch]}}},
    }


# -- runtimePatches: what they name ------------------------------------------------------------------


async def test_a_patch_naming_a_job_the_runtime_lacks_is_admitted_as_upstream_does() -> None:
    # The rule checks the info, and newRuntimeInfo has merged the patches into it: the job the
    # patch adds is in the runtime the plugin sees (Trainer v2.3.0 admits this TrainJob).
    assert await validate(V2_3, node_runtime(), trainjob(runtimePatches=[patch(job="launcher")])) == []


def test_the_job_rule_refuses_a_job_missing_from_the_info_on_the_whole_list() -> None:
    # upstream's plugin test: an info the patch is not merged into
    tj = TrainJob.from_dict(trainjob(runtimePatches=[patch(job="invalid")]))
    assert [str(e) for e in validate_runtime_patch_targets(tj, {"node": {"node"}})] == [
        'spec.runtimePatches: Invalid value: [{"manager":"example.com/kueue","trainingRuntimeSpec":{"template":'
        '{"spec":{"replicatedJobs":[{"name":"invalid"}]}}}}]: must not have replicated job that doesn\'t exist '
        "in the runtime job template"
    ]
    tj = TrainJob.from_dict(
        trainjob(
            runtimePatches=[
                patch(initContainers=[{"name": "missing-init"}], containers=[{"name": "sidecar"}])
            ]
        )
    )
    assert [str(e).rsplit(": ", 1)[1] for e in validate_runtime_patch_targets(tj, {"node": {"node"}})] == [
        "must not have initContainer that doesn't exist in the runtime job node",
        "must not have container that doesn't exist in the runtime job node",
    ]


async def test_a_patch_setting_env_of_the_node_container_is_refused() -> None:
    tj = trainjob(
        runtimePatches=[
            patch(
                initContainers=[{"name": "missing-init"}],
                containers=[{"name": "sidecar"}, {"name": "node", "env": [{"name": "A", "value": "1"}]}],
            )
        ]
    )
    # the patched containers are merged into the info: only the env rule is left to refuse it
    assert await validate(V2_3, node_runtime(), tj) == [
        'spec.runtimePatches: Invalid value: [{"manager":"example.com/kueue","trainingRuntimeSpec":{"template":'
        '{"spec":{"replicatedJobs":[{"name":"node","template":{"spec":{"template":{"spec":{"initContainers":'
        '[{"name":"missing-init"}],"containers":[{"name":"sidecar"},{"name":"node","env":[{"name":"A","value":'
        '"1"}]}]}}}}}]}}}}]: must not have envs for the dataset-initializer, model-initializer, node containers'
    ]


async def test_a_patch_of_existing_jobs_and_containers_is_admitted() -> None:
    tj = trainjob(
        runtimePatches=[
            patch(
                initContainers=[{"name": "init", "env": [{"name": "A", "value": "1"}]}],
                containers=[{"name": "node", "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
                nodeSelector={"pool": "gpu"},
            )
        ]
    )
    assert await validate(V2_3, node_runtime(), tj) == []


async def test_the_manager_must_be_a_domain_prefixed_path() -> None:
    found = await validate(V2_3, node_runtime(), trainjob(runtimePatches=[{"manager": "kueue"}]))
    assert found == [
        'spec.runtimePatches.manager: Invalid value: "kueue": must be a domain-prefixed path (such as "acme.io/foo")'
    ]
    found = await validate(V2_3, node_runtime(), trainjob(runtimePatches=[{"manager": "Kueue.io/m"}]))
    assert found == [
        'spec.runtimePatches.manager: Invalid value: "Kueue.io": a lowercase RFC 1123 subdomain must consist of '
        "lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character "
        "(e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    ]


async def test_the_bad_value_is_written_in_go_field_order() -> None:
    # the API server hands the webhook sorted keys; Go prints its structs' field order
    pod_spec = {
        "containers": [
            {"env": [{"value": "1", "name": "A"}], "name": "node", "securityContext": {"runAsUser": 1}}
        ],
        "nodeSelector": {"a": "b"},
        "serviceAccountName": "sa",
    }
    tj = trainjob(runtimePatches=[{**patch("example.com/m", **pod_spec), "time": "2026-01-01T00:00:00Z"}])
    assert await validate(V2_3, node_runtime(), tj) == [
        'spec.runtimePatches: Invalid value: [{"manager":"example.com/m","time":"2026-01-01T00:00:00Z",'
        '"trainingRuntimeSpec":{"template":{"spec":{"replicatedJobs":[{"name":"node","template":{"spec":'
        '{"template":{"spec":{"serviceAccountName":"sa","containers":[{"name":"node","env":[{"name":"A",'
        '"value":"1"}],"securityContext":{"runAsUser":1}}],"nodeSelector":{"a":"b"}}}}}}]}}}}]: must not have '
        "envs for the dataset-initializer, model-initializer, node containers"
    ]


# -- runtimePatches: when they may change ------------------------------------------------------------

RUNNING = {"spec": {}, "status": {"replicatedJobsStatus": [{"name": "node", "active": 1}]}}


def jobset(**status: Any) -> Json:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "test-job", "namespace": "default"},
        "spec": {},
        "status": {"replicatedJobsStatus": [{"name": n, "active": a} for n, a in status.items()]},
    }


async def test_a_change_while_running_on_both_sides_is_forbidden() -> None:
    old = trainjob(suspend=False, runtimePatches=[patch(nodeSelector={"a": "1"})])
    new = trainjob(suspend=False, runtimePatches=[patch(nodeSelector={"a": "2"})])
    assert await validate(V2_3, node_runtime(), new, old) == [
        "spec.runtimePatches: Forbidden: RuntimePatches can only be modified when the TrainJob is suspended "
        "before or after the update"
    ]


async def test_a_change_with_suspend_toggled_in_the_same_request_is_allowed_either_way() -> None:
    running = trainjob(runtimePatches=[patch(nodeSelector={"a": "1"})])
    suspended = trainjob(suspend=True, runtimePatches=[patch(nodeSelector={"a": "2"})])
    assert await validate(V2_3, node_runtime(), suspended, running) == []  # Kueue: suspend and patch
    assert await validate(V2_3, node_runtime(), {**running, "spec": {**running["spec"]}}, suspended) == []


async def test_a_change_is_refused_while_the_jobsets_jobs_are_still_active() -> None:
    old = trainjob(suspend=True, runtimePatches=[patch(nodeSelector={"a": "1"})])
    new = trainjob(suspend=True, runtimePatches=[patch(nodeSelector={"a": "2"})])
    found = await validate(V2_3, node_runtime(), new, old, jobset(**{"dataset-initializer": 1, "node": 2}))
    assert found == [
        "spec.runtimePatches: Forbidden: RuntimePatches cannot be modified when the JobSet's ReplicatedJob "
        "dataset-initializer is still active",
        "spec.runtimePatches: Forbidden: RuntimePatches cannot be modified when the JobSet's ReplicatedJob node "
        "is still active",
    ]
    assert await validate(V2_3, node_runtime(), new, old, jobset(node=0)) == []


async def test_a_jobset_that_cannot_be_read_is_an_internal_error() -> None:
    old = trainjob(suspend=True, runtimePatches=[patch(nodeSelector={"a": "1"})])
    new = trainjob(suspend=True, runtimePatches=[patch(nodeSelector={"a": "2"})])
    found = await validate(V2_3, node_runtime(), new, old, errors={"JobSet": InternalError("client error")})
    assert found == ["spec.runtimePatches: Internal error: client error"]


@pytest.mark.parametrize(
    ("old", "new", "equal"),
    [
        ({"serviceAccountName": "sa", "nodeSelector": {}}, {"serviceAccountName": "sa"}, True),
        ({"serviceAccountName": "sa", "tolerations": []}, {"serviceAccountName": "sa"}, True),
        (
            {"volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1024Mi"}}]},
            {"volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1Gi"}}]},
            True,
        ),
        ({"serviceAccountName": ""}, {"nodeSelector": {"a": "b"}}, False),
        ({"serviceAccountName": "a"}, {"serviceAccountName": "b"}, False),
    ],
)
async def test_only_a_semantic_change_needs_the_suspension(old: Json, new: Json, equal: bool) -> None:
    """Semantic.DeepEqual as upstream's ValidateObjects answers it (checked against the Go original)."""
    found = await validate(
        V2_3, node_runtime(), trainjob(runtimePatches=[patch(**new)]), trainjob(runtimePatches=[patch(**old)])
    )
    assert (found == []) is equal, found


def test_semantic_times_are_instants() -> None:
    at = [{"manager": "m", "time": "2026-01-01T00:00:00Z"}]
    assert runtime_patches_equal(at, [{"manager": "m", "time": "2026-01-01T02:00:00+02:00"}])
    assert not runtime_patches_equal(at, [{"manager": "m", "time": "2026-01-01T00:00:01Z"}])
    assert runtime_patches_equal(None, [])
    assert not runtime_patches_equal([{"manager": "m"}], [{"manager": "m", "trainingRuntimeSpec": {}}])


def pod_patch(**pod_spec: Any) -> list[Json]:
    return [patch(**pod_spec)]


def test_semantic_equality_is_of_the_go_structs() -> None:
    """Semantic.DeepEqual of v2.3.0's typed RuntimePatch (``gocodec.semantic_form``): an absent
    field equals its zero value (``readOnly: false``, ``manager: ""``), an empty map or list an
    absent one, a nil pointer nothing else (``affinity: {}``), unknown fields are not compared
    (a review sent straight to the webhook keeps them; the API server prunes them)."""
    mount = {"name": "v", "mountPath": "/v"}
    with_false = pod_patch(containers=[{"name": "node", "volumeMounts": [{**mount, "readOnly": False}]}])
    assert runtime_patches_equal(
        with_false, pod_patch(containers=[{"name": "node", "volumeMounts": [mount]}])
    )
    assert runtime_patches_equal([{"manager": ""}], [{}])
    named = {"serviceAccountName": "a"}
    assert runtime_patches_equal(pod_patch(**named, nodeSelector={}, tolerations=[]), pod_patch(**named))
    assert not runtime_patches_equal(pod_patch(**named, affinity={}), pod_patch(**named))
    assert runtime_patches_equal([{"manager": "m", "unknownField": 1}], [{"manager": "m"}])
    sized = pod_patch(volumes=[{"name": "v", "emptyDir": {"sizeLimit": "1Gi"}}])
    assert runtime_patches_equal(
        sized, pod_patch(volumes=[{"name": "v", "emptyDir": {"sizeLimit": "1024Mi"}}])
    )


# -- initializers -------------------------------------------------------------------------------------


def initializer_runtime(mounts: bool) -> Json:
    def job(name: str, ancestor: str) -> Json:
        container: Json = {"name": name}
        if mounts:
            container["volumeMounts"] = [{"name": "initializer", "mountPath": "/workspace"}]
        return rjob(name, ancestor, [container])

    node = rjob("node", "trainer", [{"name": "node"}])
    return training_runtime(
        rjobs=[
            job("dataset-initializer", "dataset-initializer"),
            job("model-initializer", "model-initializer"),
            node,
        ]
    )


async def test_v2_3_initializer_containers_must_mount_the_initializer_volume() -> None:
    tj = trainjob(initializer={"dataset": {"storageUri": "hf://x"}, "model": {"storageUri": "hf://y"}})
    found = await validate(V2_3, initializer_runtime(mounts=False), tj)
    assert [text.rsplit(": ", 1)[1] for text in found] == [
        "must have volumeMount with name - initializer in container dataset-initializer of the "
        "dataset-initializer job",
        "must have volumeMount with name - initializer in container model-initializer of the model-initializer job",
    ]
    assert all(text.startswith('spec.runtimeRef: Invalid value: {"name":"test-runtime"') for text in found)
    assert await validate(V2_3, initializer_runtime(mounts=True), tj) == []
    assert await validate(V2_1, initializer_runtime(mounts=False), tj) == []


# -- torch and MPI ---------------------------------------------------------------------------------


def torch_runtime(**torch: Any) -> Json:
    node = rjob("node", "trainer", [{"name": "node"}], init_containers=[{"name": "warmup"}])
    return training_runtime(rjobs=[node], ml_policy={"numNodes": 1, "torch": torch})


async def test_v2_3_torch_checks_reserved_envs_without_num_proc_per_node() -> None:
    tj = trainjob(trainer={"env": [{"name": "PET_NNODES", "value": "2"}]})
    assert await validate(V2_3, torch_runtime(), tj) == [
        'spec.trainer.env: Invalid value: [{"name":"PET_NNODES","value":"2"}]: must not have reserved envs, '
        "invalid envs configured: [PET_NNODES]"
    ]
    assert await validate(V2_1, torch_runtime(), tj) == [], "v2.1.0 checks nothing without numProcPerNode"


async def test_v2_3_torch_has_no_num_proc_per_node_word_rule() -> None:
    tj = trainjob(trainer={"numProcPerNode": "npu"})  # the v2.3 CRD refuses it before admission
    assert await validate(V2_3, torch_runtime(), tj) == []
    assert await validate(V2_1, torch_runtime(), tj) == [
        'spec.trainer.numProcPerNode: Invalid value: "npu": must have an int value or [auto cpu gpu]'
    ]


async def test_v2_3_torch_env_injection_targets_must_exist_in_the_runtime() -> None:
    injection = {"targets": [{"jobName": "node", "containerNames": ["warmup", "missing"]}]}
    assert await validate(V2_3, torch_runtime(envInjection=injection), trainjob()) == [
        'spec.runtimeRef: Invalid value: {"jobName":"node","containerNames":["warmup","missing"]}: envInjection '
        'target podSet "node" container "missing" not found in runtime template'
    ]
    found = await validate(
        V2_3, torch_runtime(envInjection={"targets": [{"jobName": "x", "containerNames": ["c"]}]}), trainjob()
    )
    assert found[0].endswith('envInjection target podSet "x" container "c" not found in runtime template')


def mpi_runtime() -> Json:
    launcher = rjob("launcher", None, [{"name": "node"}])
    node = rjob("node", "trainer", [{"name": "node"}])
    return training_runtime(
        rjobs=[launcher, node], ml_policy={"numNodes": 1, "mpi": {"runLauncherAsNode": True}}
    )


async def test_v2_3_mpi_refuses_reserved_openmpi_envs_after_the_node_rule() -> None:
    env = [
        {"name": "OMPI_MCA_plm_rsh_args", "value": "x"},
        {"name": "OMPI_MCA_orte_default_hostfile", "value": "y"},
    ]
    tj = trainjob(trainer={"env": env})
    assert await validate(V2_3, mpi_runtime(), tj) == [
        'spec.trainer.env: Invalid value: [{"name":"OMPI_MCA_plm_rsh_args","value":"x"},'
        '{"name":"OMPI_MCA_orte_default_hostfile","value":"y"}]: must not have reserved envs, invalid envs '
        "configured: [OMPI_MCA_orte_default_hostfile OMPI_MCA_plm_rsh_args]"
    ]
    assert await validate(V2_1, mpi_runtime(), tj) == []


async def test_v2_3_mpi_has_no_int_value_rule() -> None:
    tj = trainjob(trainer={"numProcPerNode": "auto"})
    assert await validate(V2_3, mpi_runtime(), tj) == []
    assert await validate(V2_1, mpi_runtime(), tj) == [
        'spec.trainer.numProcPerNode: Invalid value: "auto": must have an int value for MPI TrainJob'
    ]


# -- the deprecated-runtime warning ---------------------------------------------------------------------


async def test_the_deprecation_warning_links_the_levels_policy() -> None:
    ctr = training_runtime(cluster=True, meta={"labels": {"trainer.kubeflow.org/support": "deprecated"}})
    tj = trainjob(kind="ClusterTrainingRuntime")
    urls = {}
    for level in (V2_1, V2_3):
        runtimes = await new_runtimes(FakeReader([ctr]), RecordingIndexer(), level=level)
        (warning,) = (await runtimes[CLUSTER_TRAINING_RUNTIME_KEY].validate_objects(None, tj))[0]
        urls[level.name] = warning.rsplit(" ", 1)[1]
    assert urls == {
        "v2.1": "https://www.kubeflow.org/docs/components/trainer/operator-guides/runtime/#runtime-deprecation-policy",
        "v2.3": "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy",
    }


async def test_v2_3_torch_reports_env_injection_before_reserved_envs_as_upstream() -> None:
    injection = {"targets": [{"jobName": "node", "containerNames": ["warmup", "missing"]}]}
    tj = trainjob(trainer={"env": [{"name": "PET_NNODES", "value": "2"}]})
    assert await validate(V2_3, torch_runtime(envInjection=injection), tj) == [
        'spec.runtimeRef: Invalid value: {"jobName":"node","containerNames":["warmup","missing"]}: envInjection '
        'target podSet "node" container "missing" not found in runtime template',
        'spec.trainer.env: Invalid value: [{"name":"PET_NNODES","value":"2"}]: must not have reserved envs, '
        "invalid envs configured: [PET_NNODES]",
    ]
