"""Torch plugin (docs/behaviour/trainer.md §2.8): torchrun environment, port, process count, torchtune
rewrite.

Why: ``torchrun`` reads its rendezvous from ``PET_*`` variables, so the plugin computes the
node count and processes per node (``auto``/``cpu``/``gpu`` resolved from the node's
resources) and points every node at rank 0 of the ``node`` job.
"""

from __future__ import annotations

from manager.meta.field import ErrorType, FieldError
from manager.meta.object import Json
from trainer.api import jobset_constants as jc
from trainer.api import trainer_constants as tc
from trainer.api.trainer_v1alpha1 import Trainer, TrainJob
from trainer.runtime.apply import env_vars, typed_env_var, upsert_env_vars, upsert_ports
from trainer.runtime.info import Info
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.objects import name_of
from trainer.runtime.plugins import torchtune
from trainer.runtime.plugins.base import PluginContext
from trainer.runtime.resources import (
    cpu_count,
    gpu_count,
    trainer_resources_from_runtime,
    typed_resource_requirements,
)

__all__ = ["RESERVED_ENVS", "Torch", "resolve_num_proc_per_node"]

PET_NNODES = "PET_NNODES"
PET_NPROC_PER_NODE = "PET_NPROC_PER_NODE"
PET_NODE_RANK = "PET_NODE_RANK"
PET_MASTER_ADDR = "PET_MASTER_ADDR"
PET_MASTER_PORT = "PET_MASTER_PORT"
RESERVED_ENVS = (PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT)
CONTAINER_TRAINER_PORT = 29500
NODE_RANK_FIELD_PATH = f"metadata.annotations['{jc.JobCompletionIndexAnnotation}']"


def _resources(trainer: Trainer | None, info: Info) -> Json | None:
    """TrainJob ``resourcesPerNode`` if set, else the runtime trainer container's resources."""
    if trainer is not None and trainer.resources_per_node is not None:
        return trainer.resources_per_node
    return trainer_resources_from_runtime(info.template_spec.obj_apply)


def resolve_num_proc_per_node(nproc: int | str, resources: Json | None) -> int | str:
    """``cpu``, or ``auto`` without GPUs, becomes the node's CPU count (at least 1)."""
    if nproc == tc.NumProcPerNodeCPU or (nproc == tc.NumProcPerNodeAuto and gpu_count(resources) == 0):
        return max(1, cpu_count(resources))
    return nproc


def _pet_env(num_nodes: int, nproc: int | str) -> list[Json]:
    """``PET_NNODES``, ``PET_NPROC_PER_NODE`` and ``PET_NODE_RANK`` (the job completion index)."""
    return [
        {"name": PET_NNODES, "value": str(num_nodes)},
        {"name": PET_NPROC_PER_NODE, "value": str(nproc)},
        {"name": PET_NODE_RANK, "valueFrom": {"fieldRef": {"fieldPath": NODE_RANK_FIELD_PATH}}},
    ]


def _master_env(trainjob: str) -> list[Json]:
    """``PET_MASTER_ADDR`` (rank 0 of the ``node`` job) and ``PET_MASTER_PORT``."""
    return [
        {"name": PET_MASTER_ADDR, "value": f"{trainjob}-{tc.Node}-0-0.{trainjob}"},
        {"name": PET_MASTER_PORT, "value": str(CONTAINER_TRAINER_PORT)},
    ]


class Torch:
    name = "Torch"

    def __init__(self, context: PluginContext | None = None) -> None:
        self._level = context.level if context is not None else V2_1
        self._torchtune = self._level.torchtune
        self._qlora = self._torchtune.uses_qlora if self._torchtune is not None else torchtune.uses_qlora

    def enforce_ml_policy(self, info: Info | None, trainjob: TrainJob | None) -> None:
        """Count, env and port of the trainer node, or the torchtune command."""
        if info is None or trainjob is None or trainjob.spec is None:
            return
        policy = info.runtime_policy.ml_policy
        if policy is None or policy.torch is None:
            return
        trainer = trainjob.spec.trainer
        pod_set = info.count_trainer_nodes(trainer.num_nodes if trainer is not None else None)

        nproc: int | str = tc.NumProcPerNodeAuto
        if trainer is not None and trainer.num_proc_per_node is not None:
            nproc = trainer.num_proc_per_node
        elif policy.torch.num_proc_per_node is not None:
            nproc = policy.torch.num_proc_per_node
        resources = _resources(trainer, info)
        gpus = gpu_count(resources)
        nproc = resolve_num_proc_per_node(nproc, resources)

        container = info.find_container_by_pod_set_ancestor_container_name(tc.AncestorTrainer, tc.Node)
        num_nodes = pod_set.count_or_one() if pod_set is not None else 1
        if trainer is None or container is None or pod_set is None:
            self._inject_into_targets(info, trainjob, num_nodes, nproc)
            return
        upsert_env_vars(container.env, env_vars(trainer.env) or [])
        upsert_env_vars(container.env, _pet_env(num_nodes, nproc))
        tj_name = name_of(trainjob)
        if not torchtune.is_torchtune(trainer.command):
            upsert_env_vars(
                container.env,
                [
                    {"name": PET_MASTER_ADDR, "value": f"{tj_name}-{tc.Node}-0-0.{tj_name}"},
                    {"name": PET_MASTER_PORT, "value": str(CONTAINER_TRAINER_PORT)},
                ],
            )
        else:
            trainer.command = torchtune.rewritten_command(
                tj_name,
                trainjob.spec.runtime_ref.name,
                num_nodes,
                nproc,
                gpus,
                trainer.args,
                info,
                self._qlora,
            )
        upsert_ports(container.ports, [{"containerPort": CONTAINER_TRAINER_PORT}])
        self._inject_into_targets(info, trainjob, num_nodes, nproc)

    def _inject_into_targets(self, info: Info, trainjob: TrainJob, num_nodes: int, nproc: int | str) -> None:
        """The ``PET_*`` env, master address and port always included (torchtune or not), into
        the level's other target containers (v2.3: ``envInjection``; raises for a target the
        runtime does not have)."""
        for target in self._level.build.torch_env_targets(info):
            upsert_env_vars(target.env, _pet_env(num_nodes, nproc))
            upsert_env_vars(target.env, _master_env(name_of(trainjob)))

    async def validate(
        self, info: Info | None, old: TrainJob | None, new: TrainJob
    ) -> tuple[list[str], list[FieldError]]:
        """The level's rules (v2.1: numProcPerNode words; v2.3: the envInjection targets), then
        reserved env names and the torchtune model/node/QLoRA rules."""
        policy = info.runtime_policy.ml_policy if info is not None else None
        trainer = new.spec.trainer if new.spec is not None else None
        if info is None or policy is None or policy.torch is None:
            return [], []
        errors, go_on = self._level.validate_torch(info, trainer)
        if not go_on or trainer is None:
            return [], errors
        reserved = sorted({e.get("name", "") for e in trainer.env or () if e.get("name") in RESERVED_ENVS})
        if reserved:
            errors.append(
                FieldError.invalid(
                    "spec.trainer.env",
                    [typed_env_var(e) for e in trainer.env or ()],
                    f"must not have reserved envs, invalid envs configured: [{' '.join(reserved)}]",
                )
            )
        if torchtune.is_torchtune(trainer.command):
            errors += self._validate_torchtune(new, trainer, info)
        return [], errors

    def _validate_torchtune(self, trainjob: TrainJob, trainer: Trainer, info: Info) -> list[FieldError]:
        errors: list[FieldError] = []
        runtime_name = trainjob.spec.runtime_ref.name if trainjob.spec else ""
        model = torchtune.model_from_runtime_name(runtime_name)
        if model not in torchtune.SUPPORTED_MODELS:
            errors.append(
                FieldError.invalid(
                    "spec.runtimeRef.name",
                    runtime_name,
                    f"must have a supported pretrained model, invalid model configured: {model}",
                )
            )
        num_nodes = trainer.num_nodes
        if num_nodes is None and self._torchtune is not None:
            num_nodes = self._torchtune.default_num_nodes
        if num_nodes is None:
            # Upstream v2.1.0 dereferences numNodes here and panics (HTTP 500); we deny clearly instead.
            errors.append(
                FieldError(
                    ErrorType.REQUIRED, "spec.trainer.numNodes", detail="must be set for a torchtune TrainJob"
                )
            )
            return errors
        if num_nodes > 1 and model != "llama3_3/70B":
            errors.append(
                FieldError.invalid("spec.trainer.numNodes", num_nodes, f"must be 1 for {model} model")
            )
        gpus = gpu_count(_resources(trainer, info))
        nproc = trainer.num_proc_per_node if trainer.num_proc_per_node is not None else tc.NumProcPerNodeAuto
        config = torchtune.recipe_and_config(model, num_nodes, nproc, gpus, trainer.args, self._qlora).config
        if "_qlora" in config:
            if model == "qwen2_5/1.5B":
                errors.append(
                    FieldError.invalid(
                        "spec.runtimeRef.name", runtime_name, f"QLoRA is not supported for {model} model"
                    )
                )
            elif "_qlora_single_device" not in config and model in ("llama3_2/1B", "llama3_2/3B"):
                errors.append(
                    FieldError.invalid(
                        "spec.trainer.numProcPerNode",
                        nproc,
                        f"must be auto or 1 for {model} model when using QLoRA",
                    )
                )
                errors.append(
                    FieldError.invalid(
                        "spec.trainer.resourcesPerNode",
                        typed_resource_requirements(trainer.resources_per_node),
                        f"must have gpu resource with value 1 for {model} model when using QLoRA",
                    )
                )
        if self._torchtune is not None:
            errors += self._torchtune.extra_errors(trainer, num_nodes)
        return errors
