"""The plugin registry: the one place that lists every plugin, in the order they run.

Upstream keeps plugins in a Go map, so their order inside an extension point changes per
process start. We fix it to the order upstream's ``NewRegistry`` lists them: CoScheduling,
Volcano, MPI, PlainML, Torch, JobSet. That order decides the order objects are returned (and
applied: PodGroups before the MPI Secret/ConfigMap before the JobSet whose pods need them) and
the order of aggregated validation errors.
"""

from __future__ import annotations

from collections.abc import Callable

from trainer import features
from trainer.runtime.plugins import external
from trainer.runtime.plugins.base import Plugin, PluginContext
from trainer.runtime.plugins.coscheduling import CoScheduling
from trainer.runtime.plugins.jobset import JobSet
from trainer.runtime.plugins.mpi import MPI
from trainer.runtime.plugins.plainml import PlainML
from trainer.runtime.plugins.torch import Torch
from trainer.runtime.plugins.trainjobstatus import TrainJobStatus
from trainer.runtime.plugins.volcano import Volcano

__all__ = ["BUILTIN", "PluginFactory", "Registry", "new_registry"]

PluginFactory = Callable[[PluginContext], Plugin]
Registry = dict[str, PluginFactory]


def new_registry() -> Registry:
    """Every plugin by its registry name; dict order is run order.

    With the TrainJobStatus gate on, its plugin runs before JobSet, so the ConfigMap its pods
    mount is applied before the JobSet.
    """
    registry: Registry = {
        CoScheduling.name: CoScheduling,
        Volcano.name: Volcano,
        MPI.name: MPI,
        PlainML.name: lambda _context: PlainML(),
        Torch.name: Torch,
    }
    if features.enabled(features.TrainJobStatus):
        registry[TrainJobStatus.name] = TrainJobStatus
    # third-party plugins the Configuration enables (runtimePlugins), in its order (external.py)
    for name, factory in external.enabled_factories():
        registry[name] = factory
    registry[JobSet.name] = JobSet
    return registry


#: Built-in plugin names (a runtimePlugins entry may not reuse one).
BUILTIN = ("CoScheduling", "Volcano", "MPI", "PlainML", "Torch", "TrainJobStatus", "JobSet")
