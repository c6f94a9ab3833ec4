"""The Trainer validating webhooks at API level v2.3 (docs/behaviour/trainer.md §12.5): the TrainJob,
TrainingRuntime and ClusterTrainingRuntime objects decoded as the trainer v2.3.0 binary's Go types
decode them (``RuntimeLevel.trainer_go_types``), so an object v2.3.0's structs refuse gets
controller-runtime's 400 with encoding/json's words, and v2.1's types stay at v2.1; the
ClusterTrainingRuntime deprecation warning links the level's policy page.

The messages are what ``json.Unmarshal`` into v2.3.0's ``TrainJob`` / ``TrainingRuntime`` says
(``pkg/apis/trainer/v1alpha1``: ``TrainerStatus.progressPercentage *int32``,
``FluxMLPolicySource.numProcPerNode *int32``, ``EnvInjectionTarget.containerNames []string``,
``Trainer.numProcPerNode *int32``); upstream's v2.3.0 runtime webhooks keep v2.1.0's rules.
"""

from __future__ import annotations

from typing import Any

import pytest

from manager.webhook import AdmissionRequest, AdmissionResponse, Handler
from trainer.runtime.levels import RuntimeLevel
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.levels.v2_3 import V2_3
from trainer.runtime.registry import new_runtimes
from webhooks import register_trainer

Json = dict[str, Any]
GROUP = "trainer.kubeflow.org"
TJ = "/validate-trainer-kubeflow-org-v1alpha1-trainjob"
TR = "/validate-trainer-kubeflow-org-v1alpha1-trainingruntime"
CTR = "/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime"
V2_3_URL = "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
V2_1_URL = (
    "https://www.kubeflow.org/docs/components/trainer/operator-guides/runtime/#runtime-deprecation-policy"
)


class Capture:
    """Stands in for the webhook server: keeps what ``register_trainer`` registers."""

    def __init__(self) -> None:
        self.handlers: dict[str, Handler] = {}

    def register(self, path: str, handler: Handler) -> None:
        self.handlers[path] = handler


async def answer(level: RuntimeLevel, path: str, obj: Json, operation: str = "CREATE") -> AdmissionResponse:
    server = Capture()
    register_trainer(server, await new_runtimes(None, None, level=level), level)  # type: ignore[arg-type]
    kind = obj["kind"]
    request = AdmissionRequest(
        uid="u",
        kind={"group": GROUP, "version": "v1alpha1", "kind": kind},
        resource={"group": GROUP, "version": "v1alpha1", "resource": kind.lower() + "s"},
        operation=operation,
        object=obj,
        old_object=obj if operation == "UPDATE" else None,
    )
    return await server.handlers[path](request)


def node_job(**pod: Any) -> Json:
    return {
        "name": "node",
        "replicas": 1,
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "busybox"}], **pod}}},
        },
    }


def runtime(kind: str = "TrainingRuntime", ml_policy: Json | None = None, **meta: Any) -> Json:
    spec: Json = {"template": {"spec": {"replicatedJobs": [node_job()]}}}
    if ml_policy is not None:
        spec["mlPolicy"] = ml_policy
    return {"apiVersion": f"{GROUP}/v1alpha1", "kind": kind, "metadata": {"name": "rt", **meta}, "spec": spec}


def trainjob(**extra: Any) -> Json:
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "default"},
        "spec": {"runtimeRef": {"name": "rt", "apiGroup": GROUP, "kind": "Unknown"}},
        **extra,
    }


# -- runtimes: v2.3.0's types ----------------------------------------------------------------------------


@pytest.mark.parametrize("path_kind", [(TR, "TrainingRuntime"), (CTR, "ClusterTrainingRuntime")])
@pytest.mark.parametrize(
    ("ml_policy", "message"),
    [
        (
            {"flux": {"numProcPerNode": "4"}},
            "json: cannot unmarshal string into Go struct field FluxMLPolicySource.spec.mlPolicy.MLPolicySource.flux.numProcPerNode "
            "of type int32",
        ),
        (
            {"torch": {"envInjection": {"targets": [{"jobName": "node", "containerNames": "node"}]}}},
            "json: cannot unmarshal string into Go struct field EnvInjectionTarget.spec.mlPolicy.MLPolicySource.torch.envInjection."
            "targets.containerNames of type []string",
        ),
        (
            {"jax": []},
            "json: cannot unmarshal array into Go struct field MLPolicy.spec.mlPolicy.MLPolicySource.jax of type "
            "v1alpha1.JAXMLPolicySource",
        ),
    ],
)
async def test_v2_3_runtimes_are_decoded_with_v2_3_0s_types(
    path_kind: tuple[str, str], ml_policy: Json, message: str
) -> None:
    path, kind = path_kind
    got = await answer(V2_3, path, runtime(kind, ml_policy))
    assert (got.allowed, got.code, got.message) == (False, 400, message)
    # v2.1.0's types have none of these fields: Go's decoder ignores them
    assert (await answer(V2_1, path, runtime(kind, ml_policy))).allowed


async def test_v2_3_ignores_the_removed_torch_fields_as_gos_decoder_does() -> None:
    # torch.numProcPerNode and elasticPolicy are gone from v2.3.0's TorchMLPolicySource (the CRD
    # prunes them; a direct request with them decodes, the unknown fields dropped)
    policy = {"torch": {"numProcPerNode": ["not", "an", "int-or-string"], "elasticPolicy": "x"}}
    assert (await answer(V2_3, TR, runtime(ml_policy=policy))).allowed
    got = await answer(V2_1, TR, runtime(ml_policy=policy))
    assert (got.allowed, got.code) == (False, 400)


async def test_v2_3_runtime_rules_are_v2_1_0s_with_v2_3_0s_container_rendering() -> None:
    bad = runtime()
    job = bad["spec"]["template"]["spec"]["replicatedJobs"][0]
    job["replicas"] = 2
    job["template"]["spec"]["template"]["spec"]["containers"] = [{"name": "trainer", "image": "busybox"}]
    got = await answer(V2_3, TR, bad)
    assert (got.allowed, got.code) == (False, 403)
    assert got.message == (
        "[spec.template.spec.replicatedJobs[0].replicas: Invalid value: 2: always must be 1, "
        "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers: Invalid value: "
        '[{"name":"trainer","image":"busybox","resources":{}}]: must contain the required container for the '
        "ancestor: trainer]"
    )
    # TrainingRuntime updates are not validated; ClusterTrainingRuntime updates are
    assert (await answer(V2_3, TR, bad, "UPDATE")).allowed
    bad["kind"] = "ClusterTrainingRuntime"
    assert not (await answer(V2_3, CTR, bad, "UPDATE")).allowed


@pytest.mark.parametrize(("level", "url"), [(V2_3, V2_3_URL), (V2_1, V2_1_URL)])
async def test_the_deprecation_warning_links_the_levels_policy_page(level: RuntimeLevel, url: str) -> None:
    deprecated = runtime("ClusterTrainingRuntime", labels={"trainer.kubeflow.org/support": "deprecated"})
    got = await answer(level, CTR, deprecated)
    assert got.allowed
    assert got.warnings == [
        'ClusterTrainingRuntime "rt" is deprecated and will be removed in a future release of Kubeflow '
        f"Trainer. See runtime deprecation policy: {url}"
    ]
    assert (await answer(level, CTR, deprecated, "UPDATE")).warnings in (None, [])


# -- the TrainJob validator: v2.3.0's types --------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"status": {"trainerStatus": {"progressPercentage": "50"}}},
            "json: cannot unmarshal string into Go struct field TrainerStatus.status.trainerStatus.progressPercentage "
            "of type int32",
        ),
        (
            {"status": {"trainerStatus": {"metrics": [{"name": "loss", "value": 0.5}]}}},
            "json: cannot unmarshal number into Go struct field Metric.status.trainerStatus.metrics.value of type "
            "string",
        ),
        (
            {"status": {"trainerStatus": {"lastUpdatedTime": "yesterday"}}},
            'parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"',
        ),
    ],
)
async def test_v2_3_trainjob_status_trainer_status_is_typed(extra: Json, message: str) -> None:
    got = await answer(V2_3, TJ, trainjob(**extra))
    assert (got.allowed, got.code, got.message) == (False, 400, message)
    # v2.1.0's TrainJobStatus has no trainerStatus: decoded, then the runtime kind is unknown
    got = await answer(V2_1, TJ, trainjob(**extra))
    assert (got.code, got.message) == (403, "unsupported runtime: Unknown.trainer.kubeflow.org")


async def test_v2_3_trainjob_num_proc_per_node_is_an_int32() -> None:
    tj = trainjob()
    tj["spec"]["trainer"] = {"numProcPerNode": "auto"}
    got = await answer(V2_3, TJ, tj)
    assert (got.allowed, got.code, got.message) == (
        False,
        400,
        "json: cannot unmarshal string into Go struct field Trainer.spec.trainer.numProcPerNode of type int32",
    )
    tj["spec"]["trainer"] = {"numProcPerNode": 4}
    got = await answer(V2_3, TJ, tj)
    assert (got.code, got.message) == (403, "unsupported runtime: Unknown.trainer.kubeflow.org")


async def test_v2_3_trainjob_runtime_patches_and_deadline_are_typed() -> None:
    got = await answer(V2_3, TJ, trainjob(spec={"runtimeRef": {"name": "rt"}, "activeDeadlineSeconds": "60"}))
    assert got.message == (
        "json: cannot unmarshal string into Go struct field TrainJobSpec.spec.activeDeadlineSeconds of type int64"
    )
    got = await answer(
        V2_3, TJ, trainjob(spec={"runtimeRef": {"name": "rt"}, "runtimePatches": [{"manager": 1}]})
    )
    assert got.message == (
        "json: cannot unmarshal number into Go struct field RuntimePatch.spec.runtimePatches.manager of type string"
    )


async def test_only_v2_3_names_the_embedded_struct_in_the_error_path() -> None:
    # MLPolicy embeds MLPolicySource: the sigs.k8s.io/json of trainer v2.3.0 puts the embedded
    # field's Go name into the path, the one of trainer v2.1.0 does not
    got = await answer(V2_3, TR, runtime(ml_policy={"mpi": []}))
    assert got.message == (
        "json: cannot unmarshal array into Go struct field MLPolicy.spec.mlPolicy.MLPolicySource.mpi of type "
        "v1alpha1.MPIMLPolicySource"
    )
    got = await answer(V2_1, TR, runtime(ml_policy={"mpi": []}))
    assert got.message == (
        "json: cannot unmarshal array into Go struct field MLPolicy.spec.mlPolicy.mpi of type v1alpha1.MPIMLPolicySource"
    )
    # a core type's embedded struct too: Volume embeds VolumeSource
    bad = runtime()
    bad["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "volumes"
    ] = [{"name": "v", "emptyDir": []}]
    got = await answer(V2_3, TR, bad)
    assert got.message == (
        "json: cannot unmarshal array into Go struct field Volume.spec.template.spec.replicatedJobs.template.spec."
        "template.spec.volumes.VolumeSource.emptyDir of type v1.EmptyDirVolumeSource"
    )
