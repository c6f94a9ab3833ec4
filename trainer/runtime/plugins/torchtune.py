"""The torchtune command rewrite and its validation (docs/behaviour/trainer.md §2.8, torchtune parts).

Why separate from ``torch.py``: the rewrite is a pure function of the TrainJob, the runtime's
trainer command and the resolved process count, with its own rules (recipe and config by
node count, LoRA/QLoRA/DoRA flags, model derived from the runtime name).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trainer.api import trainer_constants as tc
from trainer.runtime.info import Info

__all__ = [
    "RUNTIME_OVERRIDE_KEYS",
    "SUPPORTED_MODELS",
    "TORCHTUNE_COMMAND",
    "Recipe",
    "is_torchtune",
    "model_from_runtime_name",
    "recipe_and_config",
    "rewritten_command",
    "runtime_overrides",
    "uses_lora",
    "uses_qlora",
]

TORCHTUNE_COMMAND = ("tune", "run")
SUPPORTED_MODELS = ("llama3_2/1B", "llama3_2/3B", "llama3_3/70B", "qwen2_5/1.5B")
RUNTIME_OVERRIDE_KEYS = (
    "output_dir",
    "tokenizer.path",
    "checkpointer.checkpoint_dir",
    "tokenizer.merges_file",
)
MASTER_PORT = 29500


def is_torchtune(command: list[str] | None) -> bool:
    """The TrainJob asks for the torchtune launcher: command is exactly ``["tune", "run"]``."""
    return command is not None and tuple(command) == TORCHTUNE_COMMAND


def model_from_runtime_name(runtime_name: str) -> str:
    """``torchtune-llama3.2-1b`` -> ``llama3_2/1B``; anything not in three parts -> ``""``."""
    parts = runtime_name.split("-")
    if len(parts) != 3:
        return ""
    return f"{parts[1].replace('.', '_')}/{parts[2].upper()}"


def uses_qlora(args: list[str] | None) -> bool:
    """QLoRA (v2.1.0): some arg mentions ``model.quantize_base`` and no arg before it mentions
    ``model.use_dora``, whatever their values (level v2.3 reads the values:
    ``RuntimeLevel.torchtune``)."""
    quantize = False
    for arg in args or ():
        if "model.use_dora" in arg:
            return False
        if "model.quantize_base" in arg:
            quantize = True
    return quantize


def uses_lora(args: list[str] | None) -> bool:
    return any("model.lora_attn_modules" in arg for arg in args or ())


@dataclass(frozen=True)
class Recipe:
    recipe: str
    config: str


QLoRA = Callable[[list[str] | None], bool]


def recipe_and_config(
    model: str,
    num_nodes: int,
    nproc: int | str,
    gpus: int,
    args: list[str] | None,
    qlora_rule: QLoRA = uses_qlora,
) -> Recipe:
    """Pick the torchtune recipe and config suffix from node count, processes and LoRA flags
    (``qlora_rule``: whether the args ask for QLoRA, the level's reading)."""
    qlora, lora = qlora_rule(args), uses_lora(args)
    if num_nodes == 1 and (nproc == 1 or gpus == 1):
        if qlora:
            return Recipe("lora_finetune_single_device", f"{model}_qlora_single_device")
        if lora:
            return Recipe("lora_finetune_single_device", f"{model}_lora_single_device")
        return Recipe("full_finetune_single_device", f"{model}_full_single_device")
    if num_nodes == 1 and qlora:
        return Recipe("lora_finetune_distributed", f"{model}_qlora")
    if num_nodes == 1 and lora:
        return Recipe("lora_finetune_distributed", f"{model}_lora")
    if num_nodes > 1:
        return Recipe("full_finetune_distributed", f"{model}_full_multinode")
    return Recipe("full_finetune_distributed", f"{model}_full")


def runtime_overrides(info: Info) -> list[str]:
    """The runtime trainer command entries that name output/tokenizer/checkpoint paths, in order."""
    spec = info.template_spec.obj_apply or {}
    kept: list[str] = []
    for rjob in spec.get("replicatedJobs") or ():
        job_template = rjob.get("template") or {}
        labels = (job_template.get("metadata") or {}).get("labels") or {}
        if labels.get(tc.LabelTrainJobAncestor) != tc.AncestorTrainer:
            continue
        pod = ((job_template.get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in pod.get("containers") or ():
            if container.get("name") != tc.Node:
                continue
            for entry in container.get("command") or ():
                if isinstance(entry, str) and entry.split("=", 1)[0] in RUNTIME_OVERRIDE_KEYS:
                    kept.append(entry)
    return kept


def rewritten_command(
    trainjob_name: str,
    runtime_name: str,
    num_nodes: int,
    nproc: int | str,
    gpus: int,
    args: list[str] | None,
    info: Info,
    qlora_rule: QLoRA = uses_qlora,
) -> list[str]:
    """The full ``tune run`` command for a TrainJob on a torchtune runtime."""
    model = model_from_runtime_name(runtime_name)
    choice = recipe_and_config(model, num_nodes, nproc, gpus, args, qlora_rule)
    command = list(TORCHTUNE_COMMAND)
    distributed = (
        num_nodes > 1 or (isinstance(nproc, int) and nproc > 1) or (isinstance(nproc, str) and gpus > 1)
    )
    if distributed:
        command.append(f"--rdzv_endpoint={trainjob_name}-{tc.Node}-0-0.{trainjob_name}:{MASTER_PORT}")
    command += [choice.recipe, "--config", choice.config]
    command += runtime_overrides(info)
    return command
