"""The plugin registry: the one place that lists every plugin, in the order they run.

Upstream keeps plugins in a Go map, so their order inside an extension point changes per
process start. We fix it to the order upstream's ``NewRegistry`` lists them: CoScheduling,
Volcano, MPI, PlainML, Torch, JobSet (then, at v2.3, JAX, XGBoost and Flux). That order
decides the order objects are returned (and applied: PodGroups before the MPI and Flux
Secrets/ConfigMaps before the JobSet whose pods need them) and the order of aggregated
validation errors.
"""

from __future__ import annotations

from collections.abc import Callable

from trainer import features
from trainer.runtime.levels import RuntimeLevel
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.plugins import external
from trainer.runtime.plugins.base import Plugin, PluginContext
from trainer.runtime.plugins.coscheduling import CoScheduling
from trainer.runtime.plugins.flux import Flux
from trainer.runtime.plugins.jax import JAX
from trainer.runtime.plugins.jobset import JobSet
from trainer.runtime.plugins.mpi import MPI
from trainer.runtime.plugins.plainml import PlainML
from trainer.runtime.plugins.torch import Torch
from trainer.runtime.plugins.trainjobstatus import TrainJobStatus
from trainer.runtime.plugins.volcano import Volcano
from trainer.runtime.plugins.xgboost import XGBoost

__all__ = ["BUILTIN", "LEVEL_PLUGINS", "PluginFactory", "Registry", "builtin_names", "new_registry"]

PluginFactory = Callable[[PluginContext], Plugin]
Registry = dict[str, PluginFactory]


LEVEL_PLUGINS: dict[str, PluginFactory] = {
    JAX.name: JAX,
    XGBoost.name: XGBoost,
    Flux.name: Flux,
}
"""The built-in plugins a level registers only when it names them (``RuntimeLevel.ml_policy_plugins``)."""


def new_registry(level: RuntimeLevel = V2_1) -> Registry:
    """Every plugin by its registry name; dict order is run order.

    The ML-policy plugins ``level`` names (v2.3: JAX, XGBoost, Flux) follow Torch: after PlainML, so
    an XGBoost container gets the TrainJob's env before the ``DMLC_*`` ones; before JobSet, so
    Flux's ConfigMap and Secret are applied before the JobSet whose pods mount them.

    With the TrainJobStatus gate on, its plugin runs before JobSet, so the ConfigMap its pods
    mount is applied before the JobSet.
    """
    registry: Registry = {
        CoScheduling.name: CoScheduling,
        Volcano.name: Volcano,
        MPI.name: MPI,
        PlainML.name: PlainML,
        Torch.name: Torch,
    }
    for name in level.ml_policy_plugins:
        registry[name] = LEVEL_PLUGINS[name]
    if features.enabled(features.TrainJobStatus):
        registry[TrainJobStatus.name] = TrainJobStatus
    # third-party plugins the Configuration enables (runtimePlugins), in its order (external.py)
    for name, factory in external.enabled_factories():
        registry[name] = factory
    registry[JobSet.name] = JobSet
    return registry


#: Built-in plugin names of every level (a runtimePlugins entry may not reuse one).
BUILTIN = ("CoScheduling", "Volcano", "MPI", "PlainML", "Torch", "TrainJobStatus", "JobSet")


def builtin_names(level: RuntimeLevel) -> tuple[str, ...]:
    """Every built-in plugin name at ``level``: ``BUILTIN`` and the level's own ML-policy
    plugins (v2.3: JAX, XGBoost, Flux), which a runtimePlugins entry may not reuse either."""
    return BUILTIN + tuple(level.ml_policy_plugins)
