"""PlainML and Torch plugins (docs/behaviour/trainer.md §10 F1-F37): counts, PET_* env, ports, numProcPerNode, validation."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from runtime_fixtures import tj_model

from manager.meta.field import FieldError
from trainer.api.trainer_v1alpha1 import MLPolicy
from trainer.runtime.info import ContainerInfo, Info, PodSet, RuntimePolicy, TemplateSpec
from trainer.runtime.plugins.plainml import PlainML
from trainer.runtime.plugins.torch import Torch

Json = dict[str, Any]

NODE_RANK = {
    "name": "PET_NODE_RANK",
    "valueFrom": {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    },
}


def trainer_info(ml_policy: Json | None, count: int = 1, env: list[Json] | None = None, **info: Any) -> Info:
    pod_set = PodSet(
        name="node", ancestor="trainer", count=count, containers=[ContainerInfo(name="node", env=env or [])]
    )
    policy = MLPolicy.from_dict(ml_policy) if ml_policy is not None else None
    return Info(
        runtime_policy=RuntimePolicy(ml_policy=policy), template_spec=TemplateSpec(pod_sets=[pod_set]), **info
    )


# -- PlainML ------------------------------------------------------------------------------------


def test_f1_plain_ml_nil_info() -> None:
    # spec: trainer F1
    PlainML().enforce_ml_policy(None, tj_model(trainer={"numNodes": 2}))


@pytest.mark.parametrize(
    "policy",
    [
        {"torch": {"numProcPerNode": "auto"}},  # spec: trainer F2
        {"mpi": {}},  # spec: trainer F3
    ],
)
def test_f2_f3_plain_ml_ignores_torch_and_mpi(policy: Json) -> None:
    info = trainer_info(policy, count=100)
    before = copy.deepcopy(info)
    PlainML().enforce_ml_policy(
        info, tj_model(trainer={"numNodes": 200, "env": [{"name": "A", "value": "b"}]})
    )
    assert info == before


def test_f4_plain_ml_num_nodes() -> None:
    # spec: trainer F4
    info = trainer_info({}, count=100)
    PlainML().enforce_ml_policy(info, tj_model(trainer={"numNodes": 200}))
    assert info.template_spec.pod_sets[0].count == 200


def test_f5_plain_ml_env_upsert_keeps_one_entry() -> None:
    # spec: trainer F5
    info = trainer_info({}, count=100, env=[{"name": "CONFLICT", "value": "FROM_TRAINER"}])
    PlainML().enforce_ml_policy(
        info, tj_model(trainer={"numNodes": 1, "env": [{"name": "CONFLICT", "value": "FROM_TRAINER"}]})
    )
    assert info.template_spec.pod_sets[0].count == 1
    assert info.template_spec.pod_sets[0].containers[0].env == [{"name": "CONFLICT", "value": "FROM_TRAINER"}]


# -- Torch EnforceMLPolicy ------------------------------------------------------------------------


def test_f6_torch_nil_info() -> None:
    # spec: trainer F6
    Torch().enforce_ml_policy(None, tj_model(trainer={"numNodes": 2}))


def test_f7_torch_without_ml_policy() -> None:
    # spec: trainer F7
    info = trainer_info(None, labels={"key": "value"})
    before = copy.deepcopy(info)
    Torch().enforce_ml_policy(info, tj_model(trainer={"numNodes": 2}))
    assert info == before


def test_f8_torch_with_empty_ml_policy() -> None:
    # spec: trainer F8
    info = trainer_info({})
    before = copy.deepcopy(info)
    Torch().enforce_ml_policy(info, tj_model(trainer={"numNodes": 2}))
    assert info == before


def torch_env(name: str, nnodes: str, nproc: str) -> list[Json]:
    return [
        {"name": "PET_NNODES", "value": nnodes},
        {"name": "PET_NPROC_PER_NODE", "value": nproc},
        NODE_RANK,
        {"name": "PET_MASTER_ADDR", "value": f"{name}-node-0-0.{name}"},
        {"name": "PET_MASTER_PORT", "value": "29500"},
    ]


def test_f9_torch_num_nodes_env_and_port() -> None:
    # spec: trainer F9
    info = trainer_info({"torch": {"numProcPerNode": "auto"}})
    Torch().enforce_ml_policy(info, tj_model(name="trainJob", trainer={"numNodes": 2}))
    pod_set = info.template_spec.pod_sets[0]
    assert pod_set.count == 2
    assert pod_set.containers[0].ports == [{"containerPort": 29500}]
    assert pod_set.containers[0].env == torch_env("trainJob", "2", "1")


@pytest.mark.parametrize(
    ("name", "nproc", "resources", "expected"),
    [
        ("test-job", "auto", {"requests": {"cpu": "4"}}, "4"),  # spec: trainer F10
        ("test-job", "auto", None, "1"),  # spec: trainer F11
        ("test-job", "auto", {"requests": {"cpu": "2"}}, "2"),  # spec: trainer F12
        ("test-job", "auto", {"requests": {"cpu": "3"}}, "3"),  # spec: trainer F13
        ("test-job", "auto", {"requests": {"cpu": "2.5"}}, "3"),  # spec: trainer F14
        ("test-job", "auto", {"requests": {"cpu": "0.7"}}, "1"),  # spec: trainer F15
        ("test-job", "auto", {"requests": {"example.com/gpu": "2"}}, "auto"),  # spec: trainer F16
        ("test-job", 3, {"requests": {"cpu": "8"}}, "3"),  # spec: trainer F17
        ("test-job", "auto", {"requests": {"cpu": "2500m"}}, "3"),  # spec: trainer F18
        ("cpu-job", "cpu", {"requests": {"cpu": "4"}}, "4"),  # spec: trainer F19
        ("cpu-job", "cpu", {"requests": {"cpu": "6", "example.com/gpu": "2"}}, "6"),  # spec: trainer F20
        ("cpu-job", "cpu", {"requests": {"cpu": "3.7"}}, "4"),  # spec: trainer F21
    ],
)
def test_f10_to_f21_num_proc_per_node_resolution(
    name: str, nproc: Any, resources: Json | None, expected: str
) -> None:
    info = trainer_info({"torch": {"numProcPerNode": "auto"}})
    trainer: Json = {"numProcPerNode": nproc}
    if resources is not None:
        trainer["resourcesPerNode"] = resources
    Torch().enforce_ml_policy(info, tj_model(name=name, trainer=trainer))
    assert info.template_spec.pod_sets[0].containers[0].env == torch_env(name, "1", expected)


def test_f22_gpu_job_keeps_auto_and_labels() -> None:
    # spec: trainer F22
    labels = {"app": "pytorch-training", "env": "production"}
    info = trainer_info({"torch": {"numProcPerNode": "auto"}}, count=2, labels=dict(labels))
    resources = {"requests": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "4"}}
    Torch().enforce_ml_policy(
        info,
        tj_model(
            name="gpu-job", trainer={"numNodes": 4, "numProcPerNode": "auto", "resourcesPerNode": resources}
        ),
    )
    assert info.template_spec.pod_sets[0].count == 4
    assert info.template_spec.pod_sets[0].containers[0].env == torch_env("gpu-job", "4", "auto")
    assert info.labels == labels


@pytest.mark.parametrize(
    ("runtime", "num_nodes", "nproc", "gpus", "count", "expected_nproc"),
    [
        ("torchtune-llama3.2-1b", 1, "auto", "4", 1, "auto"),  # spec: trainer F23
        ("torchtune-llama3.2-1b", 1, 1, "1", 1, "1"),  # spec: trainer F24
        ("torchtune-llama3.3-70b", 2, 8, "8", 2, "8"),  # spec: trainer F25
    ],
)
def test_f23_to_f25_torchtune_env_has_no_master(
    runtime: str, num_nodes: int, nproc: Any, gpus: str, count: int, expected_nproc: str
) -> None:
    info = trainer_info({"torch": {"numProcPerNode": "auto"}}, count=count)
    tj = tj_model(
        runtime=runtime,
        kind="ClusterTrainingRuntime",
        trainer={
            "command": ["tune", "run"],
            "numNodes": num_nodes,
            "numProcPerNode": nproc,
            "resourcesPerNode": {"limits": {"nvidia.com/gpu": gpus}},
        },
    )
    Torch().enforce_ml_policy(info, tj)
    container = info.template_spec.pod_sets[0].containers[0]
    assert container.env == [
        {"name": "PET_NNODES", "value": str(num_nodes)},
        {"name": "PET_NPROC_PER_NODE", "value": expected_nproc},
        NODE_RANK,
    ]
    assert container.ports == [{"containerPort": 29500}]


def test_torch_without_trainer_section_adds_nothing() -> None:
    """docs/behaviour/trainer.md §9 quirk 8: a TrainJob without ``spec.trainer`` gets no PET_* env and no port."""
    info = trainer_info({"torch": {"numProcPerNode": "auto"}})
    Torch().enforce_ml_policy(info, tj_model())
    assert info.template_spec.pod_sets[0].containers[0] == ContainerInfo(name="node")


# -- Torch Validate ---------------------------------------------------------------------------------


async def torch_validate(policy: Json | None, **tj: Any) -> list[FieldError]:
    info = trainer_info(policy) if policy is not None else Info()
    warnings, errors = await Torch().validate(info, None, tj_model(**tj))
    assert warnings == []
    return errors


async def test_f26_validate_nil_info() -> None:
    # spec: trainer F26
    assert await Torch().validate(None, None, tj_model(trainer={"numProcPerNode": "npu"})) == ([], [])


async def test_f27_validate_without_ml_policy() -> None:
    # spec: trainer F27
    assert await torch_validate(None, trainer={"numProcPerNode": "npu"}) == []


async def test_f28_validate_ml_policy_without_torch() -> None:
    # spec: trainer F28
    assert await torch_validate({}, trainer={"numProcPerNode": "npu"}) == []


async def test_f29_validate_without_num_proc_per_node() -> None:
    # spec: trainer F29
    assert await torch_validate({"torch": {}}, trainer={}) == []


async def test_f30_unknown_num_proc_word() -> None:
    # spec: trainer F30
    assert await torch_validate({"torch": {}}, trainer={"numProcPerNode": "npu"}) == [
        FieldError.invalid("spec.trainer.numProcPerNode", "npu", "must have an int value or [auto cpu gpu]")
    ]


async def test_f31_auto_is_valid() -> None:
    # spec: trainer F31
    assert await torch_validate({"torch": {}}, trainer={"numProcPerNode": "auto"}) == []


async def test_f32_env_without_num_proc_is_not_checked() -> None:
    # spec: trainer F32
    env = [{"name": "test", "value": "value"}, {"name": "test2", "value": "value"}]
    assert await torch_validate({"torch": {}}, trainer={"env": env}) == []


async def test_f33_reserved_env() -> None:
    # spec: trainer F33
    env = [{"name": "test", "value": "value"}, {"name": "PET_NPROC_PER_NODE", "value": "value"}]
    errors = await torch_validate({"torch": {}}, trainer={"numProcPerNode": "auto", "env": env})
    assert errors == [
        FieldError.invalid(
            "spec.trainer.env",
            env,
            "must not have reserved envs, invalid envs configured: [PET_NPROC_PER_NODE]",
        )
    ]
    assert str(errors[0]) == (
        'spec.trainer.env: Invalid value: [{"name":"test","value":"value"},{"name":"PET_NPROC_PER_NODE",'
        '"value":"value"}]: must not have reserved envs, invalid envs configured: [PET_NPROC_PER_NODE]'
    )


def tune(**trainer: Any) -> Json:
    return {"command": ["tune", "run"], "numProcPerNode": "auto", **trainer}


async def test_f34_unsupported_torchtune_model() -> None:
    # spec: trainer F34
    errors = await torch_validate({"torch": {}}, runtime="torchtune-llama3.1-70b", trainer=tune(numNodes=1))
    assert errors == [
        FieldError.invalid(
            "spec.runtimeRef.name",
            "torchtune-llama3.1-70b",
            "must have a supported pretrained model, invalid model configured: llama3_1/70B",
        )
    ]


async def test_f35_multi_node_only_for_70b() -> None:
    # spec: trainer F35
    errors = await torch_validate({"torch": {}}, runtime="torchtune-llama3.2-3b", trainer=tune(numNodes=2))
    assert errors == [FieldError.invalid("spec.trainer.numNodes", 2, "must be 1 for llama3_2/3B model")]
    assert str(errors[0]) == "spec.trainer.numNodes: Invalid value: 2: must be 1 for llama3_2/3B model"


QLORA_ARGS = ["model.lora_attn_modules=[q_proj, v_proj, output_proj]", "model.quantize_base=True"]


async def test_f36_qlora_not_for_qwen() -> None:
    # spec: trainer F36
    errors = await torch_validate(
        {"torch": {}}, runtime="torchtune-qwen2.5-1.5b", trainer=tune(numNodes=1, args=QLORA_ARGS)
    )
    assert errors == [
        FieldError.invalid(
            "spec.runtimeRef.name", "torchtune-qwen2.5-1.5b", "QLoRA is not supported for qwen2_5/1.5B model"
        )
    ]


async def test_f37_qlora_needs_one_gpu_for_small_llama() -> None:
    # spec: trainer F37
    resources = {"requests": {"example.com/gpu": "2"}}
    errors = await torch_validate(
        {"torch": {}},
        runtime="torchtune-llama3.2-1b",
        trainer=tune(numNodes=1, args=QLORA_ARGS, resourcesPerNode=resources),
    )
    assert errors == [
        FieldError.invalid(
            "spec.trainer.numProcPerNode", "auto", "must be auto or 1 for llama3_2/1B model when using QLoRA"
        ),
        FieldError.invalid(
            "spec.trainer.resourcesPerNode",
            resources,
            "must have gpu resource with value 1 for llama3_2/1B model when using QLoRA",
        ),
    ]


async def test_torchtune_without_num_nodes_is_denied_not_crashed() -> None:
    """docs/behaviour/trainer.md §9 quirk 7: upstream panics (HTTP 500); we deny with a Required error."""
    errors = await torch_validate({"torch": {}}, runtime="torchtune-llama3.2-1b", trainer=tune())
    assert [str(e) for e in errors] == [
        "spec.trainer.numNodes: Required value: must be set for a torchtune TrainJob"
    ]


async def test_qlora_resources_error_prints_go_struct_order_and_canonical_quantities() -> None:
    resources = {"requests": {"cpu": "3.7"}, "limits": {"example.com/gpu": 2}}
    errors = await torch_validate(
        {"torch": {}},
        runtime="torchtune-llama3.2-1b",
        trainer=tune(numNodes=1, args=QLORA_ARGS, resourcesPerNode=resources),
    )
    assert str(errors[1]) == (
        'spec.trainer.resourcesPerNode: Invalid value: {"limits":{"example.com/gpu":"2"},"requests":{"cpu":"3700m"}}: '
        "must have gpu resource with value 1 for llama3_2/1B model when using QLoRA"
    )
