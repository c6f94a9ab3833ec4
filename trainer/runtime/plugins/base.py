"""The extension points of the runtime framework, as Protocols (docs/behaviour/trainer.md §2.5).

Why Protocols: a plugin is a small class that implements whichever capabilities it needs; the
framework sorts registered plugins into extension points by the methods they have, the way
upstream type-asserts Go interfaces. Phases run in a fixed order (ML policy, pod-group policy,
pod network; then builders), and within a phase in registry order (``plugins/__init__.py``).

Error contract: ``enforce_*``/``identify_pod_network`` raise ``RuntimeFailure`` for a runtime
that cannot be honoured; ``build`` raises ``RuntimeFailure`` or the reader's ``ApiError``;
``validate`` never raises, it returns field errors.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from manager.client.interfaces import Reader
from manager.meta.field import FieldError
from manager.meta.object import Json
from manager.scheme import GroupVersionKind, ObjectKey
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.runtime.info import Info
from trainer.runtime.levels import RuntimeLevel
from trainer.runtime.levels.v2_1 import V2_1

__all__ = [
    "ComponentBuilderPlugin",
    "CustomValidationPlugin",
    "EnforceMLPolicyPlugin",
    "EnforcePodGroupPolicyPlugin",
    "Mapper",
    "Plugin",
    "PluginContext",
    "PodNetworkPlugin",
    "TrainJobStatusPlugin",
    "Watch",
    "WatchExtensionPlugin",
]


@dataclass(frozen=True)
class PluginContext:
    """What a plugin is built with: the cache reader, its only way to see the cluster, and the
    API level's rules where the built-in plugins' validation differs (trainer/runtime/levels).

    ``confirmed_reader`` reads the same cache but confirms a miss with one live GET (None: the
    ``reader``): for an object a plugin builds only when it is absent and must not build twice
    (MPI's immutable SSH Secret, docs/divergences.md T-20), where a cache that has not seen the
    plugin's own create yet would otherwise make it build a different one.
    """

    reader: Reader
    level: RuntimeLevel = V2_1
    confirmed_reader: Reader | None = None


class Plugin(Protocol):
    """Every plugin has a registry name (``CoScheduling``, ``Volcano``, ``MPI``, ...)."""

    name: str


@runtime_checkable
class EnforceMLPolicyPlugin(Protocol):
    name: str

    def enforce_ml_policy(self, info: Info | None, trainjob: TrainJob | None) -> None: ...


@runtime_checkable
class EnforcePodGroupPolicyPlugin(Protocol):
    name: str

    def enforce_pod_group_policy(self, info: Info | None, trainjob: TrainJob | None) -> None: ...


@runtime_checkable
class PodNetworkPlugin(Protocol):
    name: str

    def identify_pod_network(self, info: Info | None, trainjob: TrainJob | None) -> None: ...


@runtime_checkable
class ComponentBuilderPlugin(Protocol):
    name: str

    async def build(self, info: Info | None, trainjob: TrainJob | None) -> list[Json]: ...


@runtime_checkable
class CustomValidationPlugin(Protocol):
    name: str

    async def validate(
        self, info: Info | None, old: TrainJob | None, new: TrainJob
    ) -> tuple[list[str], list[FieldError]]: ...


# A watch maps an event's object to the TrainJobs to reconcile, reading through the cache.
Mapper = Callable[[Reader, Json], Awaitable[list[ObjectKey]]]


@dataclass(frozen=True)
class Watch:
    """One extra watch of the TrainJob controller, as data for the controller builder.

    ``requires_crd``: register only when this kind is served (log ``missing_crd_message``
    otherwise); ``register_anyway``: upstream registers the JobSet watch even when its CRD is
    missing, only logging. ``events`` lists the event types that enqueue. ``map_old_on_update``:
    on an update, map the old object too (controller-runtime's owner handler enqueues the owners
    of both versions); the LimitRange and RuntimeClass handlers look at the new object only.
    """

    kind: GroupVersionKind
    map_to_trainjobs: Mapper
    events: frozenset[str] = field(
        default_factory=lambda: frozenset({"create", "update", "delete", "generic"})
    )
    requires_crd: GroupVersionKind | None = None
    missing_crd_message: str = ""
    register_anyway: bool = False
    map_old_on_update: bool = True


@runtime_checkable
class WatchExtensionPlugin(Protocol):
    name: str

    def watches(self) -> list[Watch]: ...


@runtime_checkable
class TrainJobStatusPlugin(Protocol):
    name: str

    async def status(self, trainjob: TrainJob) -> Json | None:
        """The TrainJob's new status, or ``None`` to keep the one it has."""
        ...


def has_level_ml_policy(info: Info | None, key: str) -> bool:
    """Whether the runtime's ``mlPolicy`` has the policy ``key`` of a later level (``jax``,
    ``xgboost``: v2.3 fields, which ride in the v2.1 model's extras)."""
    policy = info.runtime_policy.ml_policy if info is not None else None
    return policy is not None and (policy.model_extra or {}).get(key) is not None
