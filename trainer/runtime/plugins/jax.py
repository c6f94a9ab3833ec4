"""JAX plugin (docs/behaviour/trainer.md §12, level v2.3 only): ``jax.distributed`` environment
and port of the trainer node.

Why: ``jax.distributed.initialize()`` reads the process count, this process's index and the
coordinator's ``host:port`` from ``JAX_*`` variables; one JAX process runs per node, and the
coordinator is process 0, the first pod of the ``node`` job behind the JobSet's headless
service. Like upstream v2.3.0 the plugin does not copy the TrainJob's ``spec.trainer.env``
onto the container (PlainML, which would, skips JAX runtimes at v2.3: the level's
``plainml_skips``), so the JobSet builder's copy puts it after the ``JAX_*`` variables; it
validates nothing.
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

__all__ = ["JAX", "has_jax_policy"]

JAX_NUM_PROCESSES = "JAX_NUM_PROCESSES"
JAX_PROCESS_ID = "JAX_PROCESS_ID"
JAX_COORDINATOR_ADDRESS = "JAX_COORDINATOR_ADDRESS"
CONTAINER_TRAINER_PORT = 29500
"""v2.3.0's ``constants.ContainerTrainerPort``: the coordinator listens here."""
PROCESS_ID_FIELD_PATH = f"metadata.annotations['{jc.JobCompletionIndexAnnotation}']"


def has_jax_policy(info: Info | None) -> bool:
    """Whether the runtime's ML policy is ``jax``."""
    return has_level_ml_policy(info, "jax")


class JAX:
    name = "JAX"

    def __init__(self, context: PluginContext | None = None) -> None:
        del context  # nothing of the cluster or the level is needed

    def enforce_ml_policy(self, info: Info | None, trainjob: TrainJob | None) -> None:
        """Node count, ``JAX_*`` env and the coordinator port on the trainer node."""
        if info is None or trainjob is None or trainjob.spec is None or not has_jax_policy(info):
            return
        trainer = trainjob.spec.trainer
        pod_set = info.find_pod_set_by_ancestor(tc.AncestorTrainer)
        # Upstream only overwrites a count the runtime has.
        if (
            pod_set is not None
            and pod_set.count is not None
            and trainer is not None
            and trainer.num_nodes is not None
        ):
            pod_set.count = trainer.num_nodes
        if trainer is None:
            return
        container = info.find_container_by_pod_set_ancestor_container_name(tc.AncestorTrainer, tc.Node)
        if container is None:
            return
        num_processes = pod_set.count_or_one() if pod_set is not None else 1
        tj_name = name_of(trainjob)
        upsert_env_vars(
            container.env,
            [
                {"name": JAX_NUM_PROCESSES, "value": str(num_processes)},
                {"name": JAX_PROCESS_ID, "valueFrom": {"fieldRef": {"fieldPath": PROCESS_ID_FIELD_PATH}}},
                {
                    "name": JAX_COORDINATOR_ADDRESS,
                    "value": f"{tj_name}-{tc.Node}-0-0.{tj_name}:{CONTAINER_TRAINER_PORT}",
                },
            ],
        )
        upsert_ports(container.ports, [{"containerPort": CONTAINER_TRAINER_PORT}])

    async def validate(
        self, info: Info | None, old: TrainJob | None, new: TrainJob
    ) -> tuple[list[str], list[FieldError]]:
        """Nothing to check (upstream's ``Validate`` returns no errors)."""
        return [], []
