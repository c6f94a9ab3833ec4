"""The plugin framework (spec §2.5): extension points and the phases that run them.

Why a framework object: the TrainingRuntime and ClusterTrainingRuntime runtimes share one set
of plugin instances (one reader, one set of watches); the framework sorts plugins into
extension points once and runs each phase over them in registry order.

Error contract: the ``run_*`` phases raise ``RuntimeFailure`` only; anything a plugin raises
(an API error from the reader, a malformed document) is turned into one, so bad input never
escapes as an arbitrary exception. Validation never raises: a crash becomes an Internal field
error on ``spec``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from manager.cache.interfaces import Reader
from manager.client.errors import ApiError
from manager.scheme import GroupVersionKind
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.runtime import indexes
from trainer.runtime.errors import FieldError, RuntimeFailure
from trainer.runtime.info import Info
from trainer.runtime.objects import CLUSTER_TRAINING_RUNTIME_GVK, TRAINING_RUNTIME_GVK
from trainer.runtime.plugins import Registry
from trainer.runtime.plugins.base import (
    ComponentBuilderPlugin,
    CustomValidationPlugin,
    EnforceMLPolicyPlugin,
    EnforcePodGroupPolicyPlugin,
    PluginContext,
    PodNetworkPlugin,
    TrainJobStatusPlugin,
    Watch,
    WatchExtensionPlugin,
)

Json = dict[str, Any]
IndexFunc = Callable[[Any], list[str] | None]

__all__ = ["FieldIndexer", "Framework", "IndexNames"]


class FieldIndexer(Protocol):
    """The cache's index registration (``index_field(gvk, name, fn)``); raises on a bad index."""

    def index_field(self, gvk: GroupVersionKind, name: str, fn: IndexFunc) -> None: ...


@dataclass(frozen=True)
class IndexNames:
    """The runtimeClass index names (overridable only so tests can make registration fail)."""

    training_runtime: str = indexes.TRAINING_RUNTIME_RUNTIME_CLASS_KEY
    cluster_training_runtime: str = indexes.CLUSTER_TRAINING_RUNTIME_RUNTIME_CLASS_KEY


@dataclass
class Framework:
    """Plugins sorted into extension points, in registry order."""

    enforce_ml_policy_plugins: list[EnforceMLPolicyPlugin] = field(default_factory=list)
    enforce_pod_group_policy_plugins: list[EnforcePodGroupPolicyPlugin] = field(default_factory=list)
    pod_network_plugins: list[PodNetworkPlugin] = field(default_factory=list)
    component_builder_plugins: list[ComponentBuilderPlugin] = field(default_factory=list)
    custom_validation_plugins: list[CustomValidationPlugin] = field(default_factory=list)
    watch_extension_plugins: list[WatchExtensionPlugin] = field(default_factory=list)
    trainjob_status_plugin: TrainJobStatusPlugin | None = None

    @classmethod
    def new(
        cls, reader: Reader, registry: Registry, indexer: FieldIndexer, index_names: IndexNames | None = None
    ) -> Framework:
        """Register the runtimeClass indexes, build every plugin and sort it into extension points."""
        names = index_names or IndexNames()
        try:
            indexer.index_field(
                TRAINING_RUNTIME_GVK, names.training_runtime, indexes.index_training_runtime_runtime_class
            )
        except Exception as err:
            raise RuntimeFailure(f"setting index on runtimeClass for TrainingRuntime: {err}") from err
        try:
            indexer.index_field(
                CLUSTER_TRAINING_RUNTIME_GVK,
                names.cluster_training_runtime,
                indexes.index_cluster_training_runtime_runtime_class,
            )
        except Exception as err:
            raise RuntimeFailure(f"setting index on runtimeClass for ClusterTrainingRuntime: {err}") from err
        framework = cls()
        context = PluginContext(reader=reader)
        for factory in registry.values():
            framework._add(factory(context))
        return framework

    def _add(self, plugin: Any) -> None:
        if isinstance(plugin, EnforceMLPolicyPlugin):
            self.enforce_ml_policy_plugins.append(plugin)
        if isinstance(plugin, EnforcePodGroupPolicyPlugin):
            self.enforce_pod_group_policy_plugins.append(plugin)
        if isinstance(plugin, PodNetworkPlugin):
            self.pod_network_plugins.append(plugin)
        if isinstance(plugin, ComponentBuilderPlugin):
            self.component_builder_plugins.append(plugin)
        if isinstance(plugin, CustomValidationPlugin):
            self.custom_validation_plugins.append(plugin)
        if isinstance(plugin, WatchExtensionPlugin):
            self.watch_extension_plugins.append(plugin)
        if isinstance(plugin, TrainJobStatusPlugin):
            if self.trainjob_status_plugin is not None:
                raise RuntimeFailure("too many TrainJobStatus plugins are registered")
            self.trainjob_status_plugin = plugin

    # -- phases -------------------------------------------------------------------------------

    def run_enforce_ml_policy_plugins(self, info: Info | None, trainjob: TrainJob | None) -> None:
        for plugin in self.enforce_ml_policy_plugins:
            _guard(plugin.name, plugin.enforce_ml_policy, info, trainjob)

    def run_enforce_pod_group_policy_plugins(self, info: Info | None, trainjob: TrainJob | None) -> None:
        for plugin in self.enforce_pod_group_policy_plugins:
            _guard(plugin.name, plugin.enforce_pod_group_policy, info, trainjob)

    def run_pod_network_plugins(self, info: Info | None, trainjob: TrainJob | None) -> None:
        for plugin in self.pod_network_plugins:
            _guard(plugin.name, plugin.identify_pod_network, info, trainjob)

    async def run_component_builder_plugins(self, info: Info | None, trainjob: TrainJob | None) -> list[Json]:
        """Objects of every builder, concatenated in registry order; the first error aborts."""
        objects: list[Json] = []
        for plugin in self.component_builder_plugins:
            try:
                objects += await plugin.build(info, trainjob)
            except RuntimeFailure:
                raise
            except ApiError as err:
                raise RuntimeFailure(str(err)) from err
            except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
                raise RuntimeFailure(f"plugin {plugin.name}: malformed input: {err!r}") from err
        return objects

    async def run_custom_validation_plugins(
        self, info: Info | None, old: TrainJob | None, new: TrainJob
    ) -> tuple[list[str], list[FieldError]]:
        """Warnings and errors of every validator, concatenated in registry order."""
        warnings: list[str] = []
        errors: list[FieldError] = []
        for plugin in self.custom_validation_plugins:
            try:
                plugin_warnings, plugin_errors = await plugin.validate(info, old, new)
            except (ApiError, KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
                plugin_warnings, plugin_errors = (
                    [],
                    [FieldError.internal("spec", f"plugin {plugin.name}: {err}")],
                )
            warnings += plugin_warnings
            errors += plugin_errors
        return warnings, errors

    async def run_trainjob_status_plugin(self, trainjob: TrainJob) -> Json | None:
        """The status computed by the single status plugin; ``None`` when there is none."""
        if self.trainjob_status_plugin is None:
            return None
        try:
            return await self.trainjob_status_plugin.status(trainjob)
        except ApiError as err:
            raise RuntimeFailure(str(err)) from err

    def watches(self) -> list[Watch]:
        """Every plugin's watches, in registry order."""
        return [watch for plugin in self.watch_extension_plugins for watch in plugin.watches()]


def _guard(
    name: str,
    step: Callable[[Info | None, TrainJob | None], None],
    info: Info | None,
    trainjob: TrainJob | None,
) -> None:
    try:
        step(info, trainjob)
    except RuntimeFailure:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
        raise RuntimeFailure(f"plugin {name}: malformed input: {err!r}") from err
