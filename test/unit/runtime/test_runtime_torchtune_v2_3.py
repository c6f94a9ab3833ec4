"""The Torch plugin's torchtune rules at API level v2.3 (Trainer v2.3.0 ``torchtune.go``;
docs/behaviour/trainer.md §12.5), and v2.1's unchanged beside them.

The expected answers are those of upstream v2.3.0's ``validateTorchTune`` (its own plugin tests,
``torch_test.go`` "lora is not supported for multi-node training in torchtune", "immutable
runtime config must not be set in trainer args", ...) and of ``getRecipeAndConfig`` with
v2.3.0's ``isBoolArgEnabled``, rendered as ``field.Error.Error()`` prints them.
"""

from __future__ import annotations

from typing import Any

import pytest
from runtime_fixtures import FakeReader, tj_model

from trainer.api.trainer_v1alpha1 import MLPolicy
from trainer.runtime.info import ContainerInfo, Info, PodSet, RuntimePolicy, TemplateSpec
from trainer.runtime.levels import RuntimeLevel
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.levels.v2_3 import V2_3
from trainer.runtime.levels.v2_3_torchtune import bool_arg_enabled, uses_qlora
from trainer.runtime.plugins.base import PluginContext
from trainer.runtime.plugins.torch import Torch

Json = dict[str, Any]
LORA = "model.lora_attn_modules=[q_proj, v_proj, output_proj]"


def info() -> Info:
    pod_set = PodSet(name="node", ancestor="trainer", count=1, containers=[ContainerInfo(name="node")])
    return Info(
        runtime_policy=RuntimePolicy(ml_policy=MLPolicy.from_dict({"torch": {}})),
        template_spec=TemplateSpec(pod_sets=[pod_set]),
    )


async def validate(level: RuntimeLevel, runtime: str, **trainer: Any) -> list[str]:
    tj = tj_model(
        runtime=runtime, kind="ClusterTrainingRuntime", trainer={"command": ["tune", "run"], **trainer}
    )
    warnings, errors = await Torch(PluginContext(FakeReader(), level)).validate(info(), None, tj)
    assert warnings == []
    return [str(e) for e in errors]


def command(level: RuntimeLevel, runtime: str, **trainer: Any) -> list[str]:
    tj = tj_model(
        name="tune",
        runtime=runtime,
        kind="ClusterTrainingRuntime",
        trainer={"command": ["tune", "run"], **trainer},
    )
    Torch(PluginContext(FakeReader(), level)).enforce_ml_policy(info(), tj)
    assert tj.spec is not None and tj.spec.trainer is not None
    return list(tj.spec.trainer.command or ())


# -- LoRA on several nodes ------------------------------------------------------------------------------


async def test_v2_3_refuses_lora_on_several_nodes() -> None:
    assert await validate(V2_3, "torchtune-llama3.3-70b", numNodes=2, args=[LORA]) == [
        "spec.trainer.numNodes: Invalid value: 2: LoRA fine-tuning is not supported for multi-node training in TorchTune"
    ]


async def test_v2_3_refuses_qlora_on_several_nodes_after_the_model_rule() -> None:
    assert await validate(V2_3, "torchtune-llama3.2-1b", numNodes=3, args=["model.quantize_base=True"]) == [
        "spec.trainer.numNodes: Invalid value: 3: must be 1 for llama3_2/1B model",
        "spec.trainer.numNodes: Invalid value: 3: LoRA fine-tuning is not supported for multi-node training in TorchTune",
    ]


async def test_v2_3_admits_lora_on_one_node() -> None:
    assert await validate(V2_3, "torchtune-llama3.3-70b", numNodes=1, args=[LORA]) == []


async def test_v2_1_admits_lora_on_several_nodes() -> None:
    assert await validate(V2_1, "torchtune-llama3.3-70b", numNodes=2, args=[LORA]) == []


# -- configs the runtime manages ---------------------------------------------------------------------------


async def test_v2_3_refuses_each_arg_setting_a_managed_config() -> None:
    args = [
        "output_dir=custom-output",
        "epochs=2",
        "tokenizer.path=/some/path",
        "checkpointer.checkpoint_dir",
    ]
    assert await validate(V2_3, "torchtune-llama3.2-1b", numNodes=1, args=args) == [
        'spec.trainer.args[0]: Invalid value: "output_dir=custom-output": must not set immutable config '
        '"output_dir" in trainer args; it is managed by the runtime',
        'spec.trainer.args[2]: Invalid value: "tokenizer.path=/some/path": must not set immutable config '
        '"tokenizer.path" in trainer args; it is managed by the runtime',
        'spec.trainer.args[3]: Invalid value: "checkpointer.checkpoint_dir": must not set immutable config '
        '"checkpointer.checkpoint_dir" in trainer args; it is managed by the runtime',
    ]


async def test_a_key_only_containing_a_managed_name_is_not_refused() -> None:
    # the key before the first "=" must be the name itself
    assert await validate(V2_3, "torchtune-llama3.2-1b", numNodes=1, args=["my.output_dir=/x"]) == []


async def test_v2_1_lets_the_args_set_managed_configs() -> None:
    assert await validate(V2_1, "torchtune-llama3.2-1b", numNodes=1, args=["output_dir=/x"]) == []


async def test_the_v2_3_rules_come_after_the_shared_ones_in_upstreams_order() -> None:
    errors = await validate(V2_3, "torchtune-llama3.1-8b", numNodes=2, args=[LORA, "tokenizer.merges_file=m"])
    assert errors == [
        'spec.runtimeRef.name: Invalid value: "torchtune-llama3.1-8b": must have a supported pretrained model, '
        "invalid model configured: llama3_1/8B",
        "spec.trainer.numNodes: Invalid value: 2: must be 1 for llama3_1/8B model",
        "spec.trainer.numNodes: Invalid value: 2: LoRA fine-tuning is not supported for multi-node training in TorchTune",
        'spec.trainer.args[1]: Invalid value: "tokenizer.merges_file=m": must not set immutable config '
        '"tokenizer.merges_file" in trainer args; it is managed by the runtime',
    ]


# -- numNodes unset ---------------------------------------------------------------------------------------


async def test_v2_3_counts_a_trainjob_without_num_nodes_as_one_node() -> None:
    # ptr.Deref(numNodes, 1): admitted (v2.1.0 dereferenced it and panicked; ours says Required)
    assert await validate(V2_3, "torchtune-llama3.2-1b") == []
    # (v2.1.0 checks nothing without numProcPerNode)
    assert await validate(V2_1, "torchtune-llama3.2-1b", numProcPerNode="auto") == [
        "spec.trainer.numNodes: Required value: must be set for a torchtune TrainJob"
    ]


# -- QLoRA by the args' values ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "v2_3", "v2_1"),
    [
        (["model.quantize_base=True"], True, True),
        (["model.quantize_base= TRUE "], True, True),
        (["model.quantize_base=False"], False, True),
        (["model.quantize_base"], False, True),
        (["model.quantize_base=True", "model.use_dora=True"], False, False),
        (["model.quantize_base=True", "model.use_dora=False"], True, False),
        (["model.use_dora=False", "model.quantize_base=True"], True, False),
        (["model.use_dora=True", "model.quantize_base=True"], False, False),
        ([], False, False),
    ],
)
def test_qlora_is_read_from_the_values_at_v2_3(args: list[str], v2_3: bool, v2_1: bool) -> None:
    from trainer.runtime.plugins import torchtune

    assert uses_qlora(args) is v2_3
    assert torchtune.uses_qlora(args) is v2_1


def test_bool_arg_enabled_needs_a_value() -> None:
    assert bool_arg_enabled(["x.model.use_dora=true"], "model.use_dora")
    assert not bool_arg_enabled(["model.use_dora"], "model.use_dora")
    assert not bool_arg_enabled(["model.use_dora=yes"], "model.use_dora")


async def test_a_false_quantize_base_is_not_qlora_at_v2_3() -> None:
    # two GPUs, llama3.2-1b: QLoRA's size rule would refuse it; with quantize_base=False v2.3.0
    # picks the LoRA recipe and admits it
    resources = {"requests": {"example.com/gpu": "2"}}
    args = [LORA, "model.quantize_base=False"]
    assert (
        await validate(V2_3, "torchtune-llama3.2-1b", numNodes=1, args=args, resourcesPerNode=resources) == []
    )
    v2_1 = {"numNodes": 1, "numProcPerNode": "auto", "args": args, "resourcesPerNode": resources}
    assert await validate(V2_1, "torchtune-llama3.2-1b", **v2_1) == [
        'spec.trainer.numProcPerNode: Invalid value: "auto": must be auto or 1 for llama3_2/1B model when using QLoRA',
        'spec.trainer.resourcesPerNode: Invalid value: {"requests":{"example.com/gpu":"2"}}: must have gpu '
        "resource with value 1 for llama3_2/1B model when using QLoRA",
    ]


def test_the_rewritten_command_follows_the_levels_qlora_reading() -> None:
    # one process per node: the single-device recipes; QLoRA only when quantize_base is true
    args = [LORA, "model.quantize_base=False"]
    assert command(V2_3, "torchtune-llama3.2-1b", numNodes=1, numProcPerNode=1, args=args) == [
        "tune",
        "run",
        "lora_finetune_single_device",
        "--config",
        "llama3_2/1B_lora_single_device",
    ]
    assert command(V2_1, "torchtune-llama3.2-1b", numNodes=1, numProcPerNode=1, args=args) == [
        "tune",
        "run",
        "lora_finetune_single_device",
        "--config",
        "llama3_2/1B_qlora_single_device",
    ]
