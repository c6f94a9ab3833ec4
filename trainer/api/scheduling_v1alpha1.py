"""``scheduling.x-k8s.io/v1alpha1``: PodGroup and ElasticQuota (scheduler-plugins v0.34.1-devel).

Resource amounts are kept as written (``ResourceList``); ``*_quantities()`` accessors parse them
for the exact arithmetic and comparison the controllers need.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from manager.meta.quantity import Quantity
from trainer.api import scheduling_constants as c
from trainer.api.base import Int32, KindModel, Model, ResourceList, Str, Time
from trainer.api.core import ObjectMeta, resource_list


class PodGroupSpec(Model):
    """Desired state of a PodGroup."""

    min_member: Annotated[Int32, Field(ge=1)] | None = None
    """Minimum number of pods that must be schedulable together."""
    min_resources: ResourceList | None = None
    """Minimum total resources the group needs."""
    schedule_timeout_seconds: Int32 | None = None
    """Seconds the scheduler waits for the whole group."""

    def min_resources_quantities(self) -> dict[str, Quantity]:
        return resource_list(self.min_resources)


class PodGroupStatus(Model):
    """Observed state of a PodGroup."""

    phase: Str | None = None
    """Pending, Scheduling, Running, Finished or Failed."""
    occupied_by: Str | None = None
    """Workloads (namespace/owner name, comma separated) whose pods form the group."""
    running: Int32 | None = None
    """Pods of the group that are running."""
    succeeded: Int32 | None = None
    """Pods of the group that succeeded."""
    failed: Int32 | None = None
    """Pods of the group that failed."""
    schedule_start_time: Time | None = None
    """When scheduling of the group started."""


class PodGroup(KindModel):
    """A group of pods scheduled all together or not at all."""

    api_version: ClassVar[str] = c.API_VERSION
    kind: ClassVar[str] = c.PodGroupKind
    plural: ClassVar[str] = "podgroups"
    singular: ClassVar[str] = "podgroup"
    short_names: ClassVar[tuple[str, ...]] = ("pg", "pgs")
    status_subresource: ClassVar[bool] = True
    crd_annotations: ClassVar[dict[str, str]] = {"api-approved.kubernetes.io": c.PodGroupApprovedAnnotation}
    printer_columns: ClassVar[tuple[dict[str, str], ...]] = (
        {
            "name": "Phase",
            "type": "string",
            "jsonPath": ".status.phase",
            "description": "Current phase of PodGroup.",
        },
        {
            "name": "MinMember",
            "type": "integer",
            "jsonPath": ".spec.minMember",
            "description": "MinMember defines the minimal number of members/tasks to run the pod group.",
        },
        {
            "name": "Running",
            "type": "integer",
            "jsonPath": ".status.running",
            "description": "The number of actively running pods.",
        },
        {
            "name": "Succeeded",
            "type": "integer",
            "jsonPath": ".status.succeeded",
            "description": "The number of pods which reached phase Succeeded.",
        },
        {
            "name": "Failed",
            "type": "integer",
            "jsonPath": ".status.failed",
            "description": "The number of pods which reached phase Failed.",
        },
        {
            "name": "Age",
            "type": "date",
            "jsonPath": ".metadata.creationTimestamp",
            "description": "Age is the time PodGroup was created.",
        },
    )

    metadata: ObjectMeta | None = None
    spec: PodGroupSpec | None = None
    """Desired state of the PodGroup."""
    status: PodGroupStatus | None = None
    """Observed state of the PodGroup."""


class ElasticQuotaSpec(Model):
    """Guaranteed and maximum resources of a namespace."""

    min: ResourceList | None = None
    """Resources guaranteed to the namespace."""
    max: ResourceList | None = None
    """Upper limit of the namespace's resources."""

    def min_quantities(self) -> dict[str, Quantity]:
        return resource_list(self.min)

    def max_quantities(self) -> dict[str, Quantity]:
        return resource_list(self.max)


class ElasticQuotaStatus(Model):
    """Observed usage of an ElasticQuota."""

    used: ResourceList | None = None
    """Resources requested by the running pods of the namespace."""

    def used_quantities(self) -> dict[str, Quantity]:
        return resource_list(self.used)


class ElasticQuota(KindModel):
    """Elastic resource quota of a namespace for the CapacityScheduling plugin."""

    api_version: ClassVar[str] = c.API_VERSION
    kind: ClassVar[str] = c.ElasticQuotaKind
    plural: ClassVar[str] = "elasticquotas"
    singular: ClassVar[str] = "elasticquota"
    short_names: ClassVar[tuple[str, ...]] = ("eq", "eqs")
    status_subresource: ClassVar[bool] = True
    crd_annotations: ClassVar[dict[str, str]] = {
        "api-approved.kubernetes.io": c.ElasticQuotaApprovedAnnotation
    }
    printer_columns: ClassVar[tuple[dict[str, str], ...]] = (
        {
            "name": "Used",
            "type": "string",
            "jsonPath": ".status.used",
            "description": "Used is the current observed total usage of the resource in the namespace.",
        },
        {
            "name": "Max",
            "type": "string",
            "jsonPath": ".spec.max",
            "description": "Max is the set of desired max limits for each named resource.",
        },
        {
            "name": "Age",
            "type": "date",
            "jsonPath": ".metadata.creationTimestamp",
            "description": "Age is the time ElasticQuota was created.",
        },
    )

    metadata: ObjectMeta | None = None
    spec: ElasticQuotaSpec | None = None
    """Desired state of the ElasticQuota."""
    status: ElasticQuotaStatus | None = None
    """Observed state of the ElasticQuota."""
