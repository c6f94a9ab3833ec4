"""XGBoost plugin (docs/behaviour/trainer.md §12, level v2.3 only): the collective (Rabit)
tracker environment and port of the trainer node.

Why: XGBoost's collective communicator finds its tracker and its own rank through ``DMLC_*``
variables. The tracker runs on rank 0, the first pod of the ``node`` job; a node runs one
worker per GPU (one worker without GPUs), so the worker count is nodes times GPUs per node.
The TrainJob may not set those variables itself. Unlike JAX, an XGBoost runtime is also
PlainML's at v2.3.0, which copies the TrainJob's count and ``spec.trainer.env`` first.
"""

from __future__ import annotations

from manager.meta.field import FieldError
from trainer.api import jobset_constants as jc
from trainer.api import trainer_constants as tc
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.runtime.apply import upsert_env_vars, upsert_ports
from trainer.runtime.info import Info
from trainer.runtime.objects import name_of
from trainer.runtime.plugins.base import PluginContext, has_level_ml_policy
from trainer.runtime.resources import gpu_count, trainer_resources_from_runtime

__all__ = ["RESERVED_ENVS", "XGBoost", "has_xgboost_policy"]

DMLC_TRACKER_URI = "DMLC_TRACKER_URI"
DMLC_TRACKER_PORT = "DMLC_TRACKER_PORT"
DMLC_TASK_ID = "DMLC_TASK_ID"
DMLC_NUM_WORKER = "DMLC_NUM_WORKER"
RESERVED_ENVS = frozenset((DMLC_TRACKER_URI, DMLC_TRACKER_PORT, DMLC_TASK_ID, DMLC_NUM_WORKER))
"""v2.3.0's ``constants.XGBoostReservedEnvNames``."""
CONTAINER_TRAINER_PORT = 29500
"""v2.3.0's ``constants.ContainerTrainerPort``: the tracker listens here."""
TASK_ID_FIELD_PATH = f"metadata.annotations['{jc.JobCompletionIndexAnnotation}']"


def has_xgboost_policy(info: Info | None) -> bool:
    """Whether the runtime's ML policy is ``xgboost``."""
    return has_level_ml_policy(info, "xgboost")


class XGBoost:
    name = "XGBoost"

    def __init__(self, context: PluginContext | None = None) -> None:
        del context  # nothing of the cluster or the level is needed

    async def validate(
        self, info: Info | None, old: TrainJob | None, new: TrainJob
    ) -> tuple[list[str], list[FieldError]]:
        """Each ``spec.trainer.env`` entry with a reserved ``DMLC_*`` name is forbidden."""
        if not has_xgboost_policy(info):
            return [], []
        trainer = new.spec.trainer if new.spec is not None else None
        errors = [
            FieldError.forbidden(
                f"spec.trainer.env[{i}]", f"{env.get('name')} is reserved for the XGBoost runtime"
            )
            for i, env in enumerate((trainer.env or ()) if trainer is not None else ())
            if env.get("name") in RESERVED_ENVS
        ]
        return [], errors

    def enforce_ml_policy(self, info: Info | None, trainjob: TrainJob | None) -> None:
        """Node count, ``DMLC_*`` env and the tracker port on the trainer node."""
        if info is None or trainjob is None or trainjob.spec is None or not has_xgboost_policy(info):
            return
        pod_set = info.find_pod_set_by_ancestor(tc.AncestorTrainer)
        if pod_set is None:
            return
        trainer = trainjob.spec.trainer
        # Upstream only overwrites a count the runtime has.
        if pod_set.count is not None and trainer is not None and trainer.num_nodes is not None:
            pod_set.count = trainer.num_nodes
        if trainer is None:
            return
        container = info.find_container_by_pod_set_ancestor_container_name(tc.AncestorTrainer, tc.Node)
        if container is None:
            return
        resources = (
            trainer.resources_per_node
            if trainer.resources_per_node is not None
            else trainer_resources_from_runtime(info.template_spec.obj_apply)
        )
        workers_per_node = max(gpu_count(resources), 1)
        tj_name = name_of(trainjob)
        upsert_env_vars(
            container.env,
            [
                {"name": DMLC_TRACKER_URI, "value": f"{tj_name}-{tc.Node}-0-0.{tj_name}"},
                {"name": DMLC_TRACKER_PORT, "value": str(CONTAINER_TRAINER_PORT)},
                {"name": DMLC_TASK_ID, "valueFrom": {"fieldRef": {"fieldPath": TASK_ID_FIELD_PATH}}},
                {"name": DMLC_NUM_WORKER, "value": str(pod_set.count_or_one() * workers_per_node)},
            ],
        )
        upsert_ports(container.ports, [{"containerPort": CONTAINER_TRAINER_PORT}])
