"""The plugin framework (docs/behaviour/trainer.md §2.5): extension points and the phases that run them.

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
from typing import Any

import structlog

from manager.client.errors import RequestError
from manager.client.interfaces import FieldIndexer, Reader
from manager.meta.field import FieldError
from manager.meta.object import Json
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.runtime import indexes
from trainer.runtime.errors import PluginFailure, RuntimeFailure
from trainer.runtime.info import Info
from trainer.runtime.levels import RuntimeLevel
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.objects import CLUSTER_TRAINING_RUNTIME_GVK, TRAINING_RUNTIME_GVK
from trainer.runtime.plugins import Registry, external
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

__all__ = ["Framework", "IndexNames"]
log = structlog.get_logger("trainer.runtime.framework")

PhaseStep = Callable[[Info | None, TrainJob | None], None]
"""One plugin's step of a synchronous phase (EnforceMLPolicy, EnforcePodGroupPolicy, PodNetwork)."""


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
    external: set[str] = field(default_factory=set)
    """Names of third-party plugins: anything they raise fails only the TrainJob at hand."""
    level: RuntimeLevel = V2_1
    """The API level the plugins run at (its ``build.sync_parallel_count`` runs before the
    builders)."""

    @classmethod
    async def new(
        cls,
        reader: Reader,
        registry: Registry,
        indexer: FieldIndexer | None,
        index_names: IndexNames | None = None,
        level: RuntimeLevel = V2_1,
        confirmed_reader: Reader | None = None,
    ) -> Framework:
        """Register the runtimeClass indexes on ``indexer`` (awaited: the cache may create the
        informer), build every plugin and sort it into extension points.

        ``indexer`` None registers no index: for a second framework over the same cache (the
        webhooks' runtimes), whose indexes the first one registered. ``level``: the API level
        the plugins validate at (``PluginContext.level``); ``confirmed_reader``: reads whose cache
        miss is confirmed live (``PluginContext.confirmed_reader``).
        """
        if indexer is not None:
            await cls._register_indexes(indexer, index_names or IndexNames())
        framework = cls(level=level)
        context = PluginContext(reader=reader, level=level, confirmed_reader=confirmed_reader)
        third_party = {name for name, _ in external.enabled_factories()}
        for key, factory in registry.items():
            if key not in third_party:
                framework._add(factory(context))
                continue
            try:  # third-party code: a plugin that cannot be built is left out, the manager runs
                plugin = factory(context)
                if not isinstance(getattr(plugin, "name", None), str):
                    raise TypeError("the plugin has no name")
            except Exception as err:
                log.error("runtime plugin not built, left out", plugin=key, error=repr(err))
                continue
            framework.external.add(plugin.name)
            framework._add(plugin)
        return framework

    @staticmethod
    async def _register_indexes(indexer: FieldIndexer, names: IndexNames) -> None:
        try:
            await indexer.index_field(
                TRAINING_RUNTIME_GVK, names.training_runtime, indexes.index_training_runtime_runtime_class
            )
        except Exception as err:
            raise RuntimeFailure(f"setting index on runtimeClass for TrainingRuntime: {err}") from err
        try:
            await indexer.index_field(
                CLUSTER_TRAINING_RUNTIME_GVK,
                names.cluster_training_runtime,
                indexes.index_cluster_training_runtime_runtime_class,
            )
        except Exception as err:
            raise RuntimeFailure(f"setting index on runtimeClass for ClusterTrainingRuntime: {err}") from err

    def _failure(self, name: str, err: Exception) -> RuntimeFailure | None:
        """A third-party plugin's exception as a PluginFailure (None for built-in plugins)."""
        if name not in self.external or isinstance(err, PluginFailure):
            return None
        detail = err.message if isinstance(err, RuntimeFailure) else f"{type(err).__name__}: {err}"
        return PluginFailure(f"runtime plugin {name} failed: {detail}", plugin=name)

    def _add(self, plugin: Any) -> None:
        """Append ``plugin`` to the list of every extension point it implements."""
        extension_points: tuple[tuple[type, list[Any]], ...] = (
            (EnforceMLPolicyPlugin, self.enforce_ml_policy_plugins),
            (EnforcePodGroupPolicyPlugin, self.enforce_pod_group_policy_plugins),
            (PodNetworkPlugin, self.pod_network_plugins),
            (ComponentBuilderPlugin, self.component_builder_plugins),
            (CustomValidationPlugin, self.custom_validation_plugins),
            (WatchExtensionPlugin, self.watch_extension_plugins),
        )
        for protocol, plugins in extension_points:
            if isinstance(plugin, protocol):
                plugins.append(plugin)
        # At most one: the TrainJob's status comes from a single plugin.
        if isinstance(plugin, TrainJobStatusPlugin):
            if self.trainjob_status_plugin is not None:
                raise RuntimeFailure("too many TrainJobStatus plugins are registered")
            self.trainjob_status_plugin = plugin

    # -- phases -------------------------------------------------------------------------------

    def _run(self, name: str, step: PhaseStep, info: Info | None, trainjob: TrainJob | None) -> None:
        try:
            _guard(name, step, info, trainjob)
        except Exception as err:
            if (failure := self._failure(name, err)) is not None:
                raise failure from err
            raise

    def run_enforce_ml_policy_plugins(self, info: Info | None, trainjob: TrainJob | None) -> None:
        for plugin in self.enforce_ml_policy_plugins:
            self._run(plugin.name, plugin.enforce_ml_policy, info, trainjob)

    def run_enforce_pod_group_policy_plugins(self, info: Info | None, trainjob: TrainJob | None) -> None:
        for plugin in self.enforce_pod_group_policy_plugins:
            self._run(plugin.name, plugin.enforce_pod_group_policy, info, trainjob)

    def run_pod_network_plugins(self, info: Info | None, trainjob: TrainJob | None) -> None:
        for plugin in self.pod_network_plugins:
            self._run(plugin.name, plugin.identify_pod_network, info, trainjob)

    async def run_component_builder_plugins(self, info: Info | None, trainjob: TrainJob | None) -> list[Json]:
        """Objects of every builder, concatenated in registry order; the first error aborts.
        First the level's ``sync_parallel_count`` (v2.3: every builder's, before any builds)."""
        try:
            self.level.build.sync_parallel_count(self.component_builder_plugins, info)
        except RuntimeFailure:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
            raise RuntimeFailure(f"syncing the parallel count: malformed input: {err!r}") from err
        objects: list[Json] = []
        for plugin in self.component_builder_plugins:
            try:
                objects += await plugin.build(info, trainjob)
            except Exception as err:
                if (failure := self._failure(plugin.name, err)) is not None:
                    raise failure from err
                if isinstance(err, RuntimeFailure):
                    raise
                if isinstance(err, RequestError):
                    raise RuntimeFailure(str(err)) from err
                if isinstance(err, (KeyError, TypeError, ValueError, AttributeError, IndexError)):
                    raise RuntimeFailure(f"plugin {plugin.name}: malformed input: {err!r}") from err
                raise
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
            except Exception as err:
                if plugin.name not in self.external and not isinstance(
                    err, (RequestError, KeyError, TypeError, ValueError, AttributeError, IndexError)
                ):
                    raise
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
        except RequestError as err:
            raise RuntimeFailure(str(err)) from err

    def watches(self) -> list[Watch]:
        """Every plugin's watches, in registry order (a third-party plugin that raises adds none)."""
        out: list[Watch] = []
        for plugin in self.watch_extension_plugins:
            try:
                out += plugin.watches()
            except Exception as err:
                if plugin.name not in self.external:
                    raise
                log.error("runtime plugin watches left out", plugin=plugin.name, error=repr(err))
        return out


def _guard(name: str, step: PhaseStep, info: Info | None, trainjob: TrainJob | None) -> None:
    try:
        step(info, trainjob)
    except RuntimeFailure:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
        raise RuntimeFailure(f"plugin {name}: malformed input: {err!r}") from err
