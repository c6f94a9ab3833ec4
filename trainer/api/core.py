"""Kubernetes core and meta types as our API objects embed them.

Pod templates, Job templates, volumes, affinity and the like are kept as the plain JSON
mappings the user wrote (``CoreRef`` aliases below): that is the only way to guarantee that a
field added in a newer Kubernetes survives a load/dump unchanged, and their CRD schema is not
written here but derived from the Kubernetes OpenAPI snapshot (``trainer.api.openapi``).
Small typed accessors read the parts the controllers need.

``ObjectMeta`` (top level), ``EmbeddedObjectMeta`` (templates) and ``Condition`` are typed
models because their CRD schemas come from controller-gen markers, not from the OpenAPI.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field

from manager.meta.object import Json
from manager.meta.quantity import Quantity
from trainer.api.base import Bool, CoreRef, Ext, Int64, Model, Str, StringList, StringMap, Time

PodTemplateSpec = Annotated[Json, CoreRef("io.k8s.api.core.v1.PodTemplateSpec")]
JobTemplateSpec = Annotated[Json, CoreRef("io.k8s.api.batch.v1.JobTemplateSpec")]
ResourceRequirements = Annotated[Json, CoreRef("io.k8s.api.core.v1.ResourceRequirements")]
EnvVar = Annotated[Json, CoreRef("io.k8s.api.core.v1.EnvVar")]
Volume = Annotated[Json, CoreRef("io.k8s.api.core.v1.Volume")]
VolumeMount = Annotated[Json, CoreRef("io.k8s.api.core.v1.VolumeMount")]
Affinity = Annotated[Json, CoreRef("io.k8s.api.core.v1.Affinity")]
Toleration = Annotated[Json, CoreRef("io.k8s.api.core.v1.Toleration")]
LocalObjectReference = Annotated[Json, CoreRef("io.k8s.api.core.v1.LocalObjectReference")]
PodSchedulingGate = Annotated[Json, CoreRef("io.k8s.api.core.v1.PodSchedulingGate")]
MetricSpec = Annotated[Json, CoreRef("io.k8s.api.autoscaling.v2.MetricSpec")]

# The OpenAPI name of ObjectMeta: crdgen replaces it, wherever a core type embeds it, with
# the EmbeddedObjectMeta schema (controller-gen's generateEmbeddedObjectMeta).
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


class OwnerReference(Model):
    api_version: Str
    kind: Str
    name: Str
    uid: Str
    controller: Bool | None = None
    block_owner_deletion: Bool | None = None


class ObjectMeta(Model):
    """Top-level metadata; the CRD schema is just ``type: object`` (the server owns it)."""

    name: Str | None = None
    generate_name: Str | None = None
    namespace: Str | None = None
    uid: Str | None = None
    resource_version: Str | None = None
    generation: Int64 | None = None
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None
    deletion_grace_period_seconds: Int64 | None = None
    labels: StringMap | None = None
    annotations: StringMap | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: StringList | None = None
    managed_fields: list[Json] | None = None


class EmbeddedObjectMeta(Model):
    """The part of ObjectMeta a CRD keeps inside templates; other keys are pruned by the server."""

    annotations: StringMap | None = None
    """Annotations of the object built from the template."""
    finalizers: StringList | None = None
    """Finalizers of the object built from the template."""
    labels: StringMap | None = None
    """Labels of the object built from the template."""
    name: Str | None = None
    """Name of the object built from the template."""
    namespace: Str | None = None
    """Namespace of the object built from the template."""


class Condition(Model):
    """metav1.Condition with the validation its kubebuilder markers give it."""

    type: Annotated[Str, Field(max_length=316, pattern=CONDITION_TYPE_PATTERN)]
    """Type of the condition, in CamelCase or domain/CamelCase."""
    status: Literal["True", "False", "Unknown"]
    """Status of the condition: True, False or Unknown."""
    observed_generation: Annotated[Int64, Field(ge=0)] | None = None
    """metadata.generation the condition was set from."""
    last_transition_time: Time
    """When the status last changed."""
    reason: Annotated[Str, Field(min_length=1, max_length=1024, pattern=CONDITION_REASON_PATTERN)]
    """Programmatic identifier of the last transition, in CamelCase."""
    message: Annotated[Str, Field(max_length=32768)]
    """Human-readable details of the last transition."""


ConditionList = Annotated[list[Condition], Ext(list_type="map", map_keys=("type",))]


# -- typed accessors on pass-through core objects ------------------------------------------------


def pod_spec(template: Mapping[str, Any] | None) -> Json:
    """``template.spec`` of a PodTemplateSpec (empty when absent)."""
    return dict((template or {}).get("spec") or {})


def containers(spec: Mapping[str, Any] | None, *, init: bool = False) -> list[Json]:
    """Containers (or init containers) of a PodSpec."""
    return list((spec or {}).get("initContainers" if init else "containers") or [])


def resource_list(values: Mapping[str, Any] | None) -> dict[str, Quantity]:
    """A ResourceList as quantities, for arithmetic and comparison."""
    return {name: Quantity(value) for name, value in (values or {}).items()}


def container_requests(container: Mapping[str, Any]) -> dict[str, Quantity]:
    """``resources.requests`` of a container as quantities."""
    return resource_list((container.get("resources") or {}).get("requests"))


def env_value(env: list[Mapping[str, Any]] | None, name: str) -> str | None:
    """The literal ``value`` of the env var called ``name``, if set."""
    for item in env or ():
        if item.get("name") == name:
            value = item.get("value")
            return value if isinstance(value, str) else None
    return None
