"""Level v2.3's torchtune rules (Trainer v2.3.0 ``pkg/runtime/framework/plugins/torch/torchtune.go``;
docs/behaviour/trainer.md §12.5).

What changed from v2.1.0:

* QLoRA is chosen by the *value* of the args: some ``<name>=<value>`` arg whose name contains
  ``model.quantize_base`` and whose value is ``true`` in any case (spaces around it ignored),
  unless such an arg of ``model.use_dora`` is true as well. ``model.quantize_base=False`` is
  no longer QLoRA; v2.1.0 only looked for the words. This picks the recipe and config of the
  rewritten command too, not only the validation.
* A TrainJob without ``numNodes`` counts as one node (v2.1.0 dereferenced it and panicked).
* A TrainJob of more than one node may not ask for LoRA or QLoRA:
  ``spec.trainer.numNodes: Invalid value: 2: LoRA fine-tuning is not supported for multi-node
  training in TorchTune``.
* No arg may set a config the runtime manages (``output_dir``, ``tokenizer.path``,
  ``checkpointer.checkpoint_dir``, ``tokenizer.merges_file``, the part before the first ``=``):
  ``spec.trainer.args[i]: Invalid value: "output_dir=/x": must not set immutable config
  "output_dir" in trainer args; it is managed by the runtime``, one error per such arg.
"""

from __future__ import annotations

from manager.meta.field import FieldError
from manager.meta.gotext import go_quote
from trainer.api.trainer_v1alpha1 import Trainer
from trainer.runtime.levels import TorchTuneRules

__all__ = ["BOOL_ARGS", "IMMUTABLE_CONFIGS", "LORA_MULTI_NODE", "bool_arg_enabled", "uses_qlora"]

QUANTIZE_BASE = "model.quantize_base"
USE_DORA = "model.use_dora"
LORA_ATTN_MODULES = "model.lora_attn_modules"
IMMUTABLE_CONFIGS = frozenset(
    {"output_dir", "tokenizer.path", "checkpointer.checkpoint_dir", "tokenizer.merges_file"}
)
"""``constants.TorchTuneImmutableConfigs``: what the runtime's node command sets."""

LORA_MULTI_NODE = "LoRA fine-tuning is not supported for multi-node training in TorchTune"


def bool_arg_enabled(args: list[str] | None, item: str) -> bool:
    """``isBoolArgEnabled``: an arg ``name=value`` whose name contains ``item`` and whose value,
    trimmed, is ``true`` in any case (an arg without ``=`` does not count)."""
    for arg in args or ():
        name, found, value = arg.partition("=")
        if found and item in name and value.strip().lower() == "true":
            return True
    return False


def uses_lora(args: list[str] | None) -> bool:
    """``isLoraConfigEnabled`` (unchanged): some arg mentions ``model.lora_attn_modules``."""
    return any(LORA_ATTN_MODULES in arg for arg in args or ())


def uses_qlora(args: list[str] | None) -> bool:
    """``isUseQLoraFinetune`` at v2.3.0: quantize_base true, and use_dora not true."""
    if bool_arg_enabled(args, USE_DORA):
        return False
    return bool_arg_enabled(args, QUANTIZE_BASE)


class _BoolArgs:
    """``TorchTuneRules`` of v2.3."""

    default_num_nodes: int | None = 1
    """``ptr.Deref(numNodes, 1)``."""

    def uses_qlora(self, args: list[str] | None) -> bool:
        return uses_qlora(args)

    def extra_errors(self, trainer: Trainer, num_nodes: int) -> list[FieldError]:
        """After the shared rules: LoRA on several nodes, then each arg setting a managed config."""
        errors: list[FieldError] = []
        if num_nodes > 1 and (uses_lora(trainer.args) or uses_qlora(trainer.args)):
            errors.append(FieldError.invalid("spec.trainer.numNodes", num_nodes, LORA_MULTI_NODE))
        for i, arg in enumerate(trainer.args or ()):
            key = arg.split("=", 1)[0]
            if key in IMMUTABLE_CONFIGS:
                errors.append(
                    FieldError.invalid(
                        f"spec.trainer.args[{i}]",
                        arg,
                        f"must not set immutable config {go_quote(key)} in trainer args; it is managed by the runtime",
                    )
                )
        return errors


BOOL_ARGS: TorchTuneRules = _BoolArgs()
