"""PlainML plugin (docs/behaviour/trainer.md §2.7): runtimes with neither ``torch`` nor ``mpi`` policy.

Why it exists: a plain runtime still honours the TrainJob's ``numNodes`` and ``env`` on the
trainer node, without any framework-specific environment.
"""

from __future__ import annotations

from trainer.api import trainer_constants as tc
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.runtime.apply import env_vars, upsert_env_vars
from trainer.runtime.info import Info

__all__ = ["PlainML"]


class PlainML:
    name = "PlainML"

    def enforce_ml_policy(self, info: Info | None, trainjob: TrainJob | None) -> None:
        """Set the trainer PodSet's count and env from the TrainJob."""
        if info is None or trainjob is None or trainjob.spec is None:
            return
        policy = info.runtime_policy.ml_policy
        if policy is not None and (policy.torch is not None or policy.mpi is not None):
            return
        trainer = trainjob.spec.trainer
        info.count_trainer_nodes(trainer.num_nodes if trainer is not None else None)
        if trainer is None:
            return
        container = info.find_container_by_pod_set_ancestor_container_name(tc.AncestorTrainer, tc.Node)
        if container is not None:
            upsert_env_vars(container.env, env_vars(trainer.env) or [])
