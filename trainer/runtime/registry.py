"""The runtime registry (docs/behaviour/trainer.md §2.1): TrainingRuntime and ClusterTrainingRuntime, by
GroupKind.

Why two runtimes over one framework: a TrainJob names its runtime by kind; both kinds share
the same plugins (and so the same watches), differing only in how the runtime object is read
and how a missing one is reported. The reconciler and the webhook look a runtime up with
``runtime_key(apiGroup, kind)``.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import ValidationError

from manager.client.errors import RequestError
from manager.client.interfaces import FieldIndexer, Reader
from manager.meta.field import FieldError
from manager.meta.object import Json
from manager.scheme import GroupVersionKind, ObjectKey
from trainer.api import trainer_constants as tc
from trainer.api.trainer_v1alpha1 import (
    ClusterTrainingRuntime,
    JobSetTemplateSpec,
    MLPolicy,
    PodGroupPolicy,
    TrainingRuntime,
    TrainJob,
)
from trainer.runtime import indexes
from trainer.runtime.errors import RuntimeFailure
from trainer.runtime.framework import Framework, IndexNames
from trainer.runtime.info import Info
from trainer.runtime.levels import RuntimeLevel
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.objects import CLUSTER_TRAINING_RUNTIME_GVK, TRAINING_RUNTIME_GVK, TRAINJOB_GVK
from trainer.runtime.plugins import Registry, new_registry
from trainer.runtime.plugins.base import Watch
from trainer.runtime.runtime_info import new_runtime_info

__all__ = [
    "CLUSTER_TRAINING_RUNTIME_KEY",
    "TRAINING_RUNTIME_KEY",
    "ClusterTrainingRuntimeRuntime",
    "Runtime",
    "TrainingRuntimeRuntime",
    "load_trainjob",
    "new_runtimes",
    "runtime_key",
]

TRAINING_RUNTIME_KEY = f"{tc.TrainingRuntimeKind}.{tc.GROUP}"
CLUSTER_TRAINING_RUNTIME_KEY = f"{tc.ClusterTrainingRuntimeKind}.{tc.GROUP}"
DEPRECATION_WARNING = (
    'Referenced ClusterTrainingRuntime "{name}" is deprecated and will be removed in a future release of '
    "Kubeflow Trainer. See runtime deprecation policy: {url}"
)
"""The TrainJob webhook's warning for a deprecated ClusterTrainingRuntime; ``url`` is the level's
``runtime_deprecation_policy_url``."""


def runtime_key(api_group: str | None, kind: str | None) -> str:
    """GroupKind string: ``Kind.group``, or just ``Kind`` when the group is empty."""
    group, kind = api_group or "", kind or ""
    return f"{kind}.{group}" if group else kind


def _field_errors(err: ValidationError, prefix: str = "") -> list[FieldError]:
    out = []
    for item in err.errors():
        path = ".".join(str(p) for p in item["loc"])
        out.append(FieldError.invalid(f"{prefix}{path}", item.get("input"), item["msg"]))
    return out


def load_trainjob(trainjob: Mapping[str, Any]) -> TrainJob:
    """The typed view the plugins work on, a private copy (they rewrite it in memory).

    The object model (``manager.meta``): a TrainJob crosses the controller and webhook seam as
    the dict the API server sent; only here, inside the runtime, does it become a model.
    Bad input -> RuntimeFailure with field errors.
    """
    try:
        return TrainJob.from_dict(dict(trainjob))
    except (ValidationError, ValueError) as err:
        errors = _field_errors(err) if isinstance(err, ValidationError) else []
        raise RuntimeFailure(f"invalid TrainJob: {err}", errors) from err


class Runtime(Protocol):
    """What the reconciler and the webhook use (upstream ``runtime.Runtime``)."""

    async def new_objects(self, trainjob: Mapping[str, Any]) -> list[Json]: ...

    def runtime_info(
        self,
        trainjob: TrainJob,
        template: Any,
        ml_policy: MLPolicy | None,
        pod_group_policy: PodGroupPolicy | None,
    ) -> Info: ...

    async def trainjob_status(self, trainjob: Mapping[str, Any]) -> Json | None: ...

    def event_handler_registrars(self) -> list[Watch]: ...

    async def validate_objects(
        self, old: Mapping[str, Any] | None, new: Mapping[str, Any]
    ) -> tuple[list[str], list[FieldError]]: ...


class _BaseRuntime(abc.ABC):
    """Shared behaviour; subclasses say how the runtime object is fetched and named."""

    kind_model: type[TrainingRuntime] | type[ClusterTrainingRuntime]
    gvk: GroupVersionKind
    # Upstream's wording for a runtime of this kind that cannot be read, per kind (the two
    # kinds word them differently, and name the field differently: copied as a contract).
    not_found_message: str
    """Why the TrainJob cannot be built, ``{err}`` the read error."""
    lookup_error_path: str
    """The field a failed lookup is reported on at admission."""
    lookup_error_detail: str
    """The admission error's detail, ``{err}`` the read error."""
    snapshot_error: str
    """The reconcile error's prefix for a runtime snapshot that cannot be read or is invalid."""

    def __init__(
        self, framework: Framework, reader: Reader, level: RuntimeLevel = V2_1, writer: Any = None
    ) -> None:
        self.framework = framework
        self._reader = reader
        self.level = level
        self._writer = writer
        """What the level's runtime source writes through (the v2.3 snapshot); None: nothing."""

    @abc.abstractmethod
    def _key(self, trainjob: TrainJob) -> ObjectKey:
        """Where this kind of runtime lives for ``trainjob``."""

    async def _read(self, trainjob: TrainJob) -> Json:
        key = self._key(trainjob)
        return await self._reader.get(self.gvk, key.name, key.namespace)

    async def _fetch(self, trainjob: TrainJob) -> TrainingRuntime | ClusterTrainingRuntime:
        return self._model(trainjob, await self._read(trainjob))

    def _model(self, trainjob: TrainJob, obj: Json) -> TrainingRuntime | ClusterTrainingRuntime:
        try:
            return self.kind_model.from_dict(obj)
        except (ValidationError, ValueError) as err:
            errors = _field_errors(err) if isinstance(err, ValidationError) else []
            raise RuntimeFailure(f"invalid {self.gvk.kind} {self._key(trainjob)}: {err}", errors) from err

    def runtime_info(
        self,
        trainjob: TrainJob,
        template: Any,
        ml_policy: MLPolicy | None,
        pod_group_policy: PodGroupPolicy | None,
    ) -> Info:
        """newRuntimeInfo, then the ML-policy, pod-group-policy and pod-network phases."""
        if not isinstance(template, JobSetTemplateSpec):
            raise RuntimeFailure("unsupported runtimeTemplateSpec")
        try:
            info = new_runtime_info(trainjob, template, ml_policy, pod_group_policy, self.level)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
            raise RuntimeFailure(f"malformed runtime template: {err!r}") from err
        self.framework.run_enforce_ml_policy_plugins(info, trainjob)
        self.framework.run_enforce_pod_group_policy_plugins(info, trainjob)
        self.framework.run_pod_network_plugins(info, trainjob)
        return info

    async def new_objects(self, trainjob: Mapping[str, Any]) -> list[Json]:
        """Every object to apply for the TrainJob, in builder order."""
        tj = load_trainjob(trainjob)
        if tj.spec is None:
            raise RuntimeFailure(
                "invalid TrainJob: spec is required", [FieldError.invalid("spec", None, "Required")]
            )
        runtime = self._model(
            tj,
            await self.level.runtime_source.obtain(
                self._writer, self._reader, tj, lambda: self._read_or_fail(tj), self.snapshot_error
            ),
        )
        spec = runtime.spec
        template = spec.template if spec is not None and spec.template is not None else JobSetTemplateSpec()
        info = self.runtime_info(
            tj, template, spec.ml_policy if spec else None, spec.pod_group_policy if spec else None
        )
        return await self.framework.run_component_builder_plugins(info, tj)

    async def _read_or_fail(self, trainjob: TrainJob) -> Json:
        """The runtime as it is now; a failed read is the kind's "not found" failure."""
        try:
            return await self._read(trainjob)
        except RequestError as err:
            raise RuntimeFailure(self._not_found(err)) from err

    async def trainjob_status(self, trainjob: Mapping[str, Any]) -> Json | None:
        return await self.framework.run_trainjob_status_plugin(load_trainjob(trainjob))

    def event_handler_registrars(self) -> list[Watch]:
        return self.framework.watches()

    def _not_found(self, err: Exception) -> str:
        return self.not_found_message.format(err=err)

    def _lookup_error(self, trainjob: TrainJob, err: Exception) -> FieldError:
        """The validation error for a runtime lookup that failed."""
        ref = trainjob.spec.runtime_ref if trainjob.spec else None
        return FieldError.invalid(self.lookup_error_path, ref, self.lookup_error_detail.format(err=err))

    def _warnings(self, runtime: TrainingRuntime | ClusterTrainingRuntime) -> list[str]:
        return []

    async def validate_objects(
        self, old: Mapping[str, Any] | None, new: Mapping[str, Any]
    ) -> tuple[list[str], list[FieldError]]:
        """Plugin validation of a TrainJob create (``old`` None) or update. Both objects passed
        only the Go decode (the API server checks the CRD's schema after the mutating webhooks,
        but nothing stops a review sent straight here): they are judged as the Go structs hold
        them (``Model.from_go``), not refused for a constraint only the schema has."""
        new_tj = TrainJob.from_go(new)
        old_tj = TrainJob.from_go(old) if old is not None else None
        if new_tj.spec is None:
            return [], [FieldError.invalid("spec", None, "Required")]
        try:
            runtime = await self._fetch(new_tj)
        except (RequestError, RuntimeFailure) as err:
            return [], [self._lookup_error(new_tj, err)]
        warnings = self._warnings(runtime)
        spec = runtime.spec
        info: Info | None
        try:
            info = new_runtime_info(
                new_tj,
                spec.template if spec and spec.template else JobSetTemplateSpec(),
                spec.ml_policy if spec else None,
                spec.pod_group_policy if spec else None,
                self.level,
            )
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            info = None  # upstream ignores this error: the runtime was validated on admission
        plugin_warnings, errors = await self.framework.run_custom_validation_plugins(info, old_tj, new_tj)
        return warnings + plugin_warnings, errors


class TrainingRuntimeRuntime(_BaseRuntime):
    """TrainJobs referencing a namespaced TrainingRuntime (same namespace as the TrainJob)."""

    kind_model = TrainingRuntime
    gvk = TRAINING_RUNTIME_GVK
    not_found_message = "TrainingRuntime specified in TrainJob is not found: {err}"
    lookup_error_path = "spec.runtimeRef"
    lookup_error_detail = "{err}: specified trainingRuntime must be created before the TrainJob is created"
    snapshot_error = "unable to get runtime snapshot"

    def _key(self, trainjob: TrainJob) -> ObjectKey:
        namespace = (trainjob.metadata.namespace if trainjob.metadata else None) or ""
        return ObjectKey(namespace, trainjob.spec.runtime_ref.name if trainjob.spec else "")


class ClusterTrainingRuntimeRuntime(_BaseRuntime):
    """TrainJobs referencing a cluster-scoped ClusterTrainingRuntime; watches are the TR runtime's."""

    kind_model = ClusterTrainingRuntime
    gvk = CLUSTER_TRAINING_RUNTIME_GVK
    not_found_message = "not found ClusterTrainingRuntime specified in TrainJob: {err}"
    # Capital R: upstream's path for this error (docs/behaviour/trainer.md §9 quirk 14).
    lookup_error_path = "spec.RuntimeRef"
    lookup_error_detail = (
        "{err}: specified clusterTrainingRuntime must be created before the TrainJob is created"
    )
    snapshot_error = "getting runtime snapshot"

    def _key(self, trainjob: TrainJob) -> ObjectKey:
        return ObjectKey("", trainjob.spec.runtime_ref.name if trainjob.spec else "")

    def _warnings(self, runtime: TrainingRuntime | ClusterTrainingRuntime) -> list[str]:
        labels = (runtime.metadata.labels if runtime.metadata else None) or {}
        if labels.get(tc.LabelSupport) == tc.SupportDeprecated:
            name = (runtime.metadata.name if runtime.metadata else None) or ""
            return [DEPRECATION_WARNING.format(name=name, url=self.level.runtime_deprecation_policy_url)]
        return []

    def event_handler_registrars(self) -> list[Watch]:
        """None: the TrainingRuntime runtime registers the shared watches once."""
        return []


async def new_runtimes(
    reader: Reader,
    indexer: FieldIndexer | None,
    registry: Registry | None = None,
    index_names: IndexNames | None = None,
    level: RuntimeLevel = V2_1,
    writer: Any = None,
    confirmed_reader: Reader | None = None,
) -> dict[str, Runtime]:
    """Both runtimes by GroupKind key; registers the TrainJob indexes, then the framework's, on
    ``indexer`` (None: none, the cache already has them; see ``Framework.new``). ``level``: how
    a TrainJob customises its runtime (trainer/runtime/levels); ``writer``: the client the
    level's runtime source writes through (v2.3's snapshot ConfigMap); ``confirmed_reader``: the
    plugins' reads whose cache miss is confirmed live (``PluginContext.confirmed_reader``)."""
    if indexer is not None:
        await _register_trainjob_indexes(indexer)
    try:
        framework = await Framework.new(
            reader,
            new_registry(level) if registry is None else registry,
            indexer,
            index_names,
            level,
            confirmed_reader=confirmed_reader,
        )
    except RuntimeFailure as failure:
        raise RuntimeFailure(f'initializing runtime "{TRAINING_RUNTIME_KEY}": {failure.message}') from failure
    return {
        TRAINING_RUNTIME_KEY: TrainingRuntimeRuntime(framework, reader, level, writer),
        CLUSTER_TRAINING_RUNTIME_KEY: ClusterTrainingRuntimeRuntime(framework, reader, level, writer),
    }


async def _register_trainjob_indexes(indexer: FieldIndexer) -> None:
    try:
        await indexer.index_field(
            TRAINJOB_GVK, indexes.TRAINJOB_RUNTIME_REF_KEY, indexes.index_trainjob_training_runtime
        )
    except Exception as err:
        raise RuntimeFailure(
            f'initializing runtime "{TRAINING_RUNTIME_KEY}": setting index on TrainingRuntime for TrainJob: {err}'
        ) from err
    try:
        await indexer.index_field(
            TRAINJOB_GVK,
            indexes.TRAINJOB_CLUSTER_RUNTIME_REF_KEY,
            indexes.index_trainjob_cluster_training_runtime,
        )
    except Exception as err:
        raise RuntimeFailure(
            f'initializing runtime "{TRAINING_RUNTIME_KEY}": setting index on ClusterTrainingRuntime for TrainJob: {err}'
        ) from err
