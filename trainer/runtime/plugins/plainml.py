"""PlainML plugin (docs/behaviour/trainer.md §2.7): runtimes with neither ``torch`` nor ``mpi`` policy
(nor, at v2.3, ``jax``: the level's ``plainml_skips``).

Why it exists: a plain runtime still honours the TrainJob's ``numNodes`` and ``env`` on the
trainer node, without any framework-specific environment.
"""

from __future__ import annotations

from trainer.api import trainer_constants as tc
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.runtime.apply import env_vars, upsert_env_vars
from trainer.runtime.info import Info
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.plugins.base import PluginContext, has_level_ml_policy

__all__ = ["PlainML"]


class PlainML:
    name = "PlainML"

    def __init__(self, context: PluginContext | None = None) -> None:
        # the policies besides torch and mpi it leaves alone (v2.3: jax)
        self._skips = (context.level if context is not None else V2_1).plainml_skips

    def enforce_ml_policy(self, info: Info | None, trainjob: TrainJob | None) -> None:
        """Set the trainer PodSet's count and env from the TrainJob."""
        if info is None or trainjob is None or trainjob.spec is None:
            return
        policy = info.runtime_policy.ml_policy
        if policy is not None and (
            policy.torch is not None
            or policy.mpi is not None
            or any(has_level_ml_policy(info, skip) for skip in self._skips)
        ):
            return
        trainer = trainjob.spec.trainer
        info.count_trainer_nodes(trainer.num_nodes if trainer is not None else None)
        if trainer is None:
            return
        container = info.find_container_by_pod_set_ancestor_container_name(tc.AncestorTrainer, tc.Node)
        if container is not None:
            upsert_env_vars(container.env, env_vars(trainer.env) or [])
