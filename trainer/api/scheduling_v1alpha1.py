"""``scheduling.x-k8s.io/v1alpha1``: PodGroup and ElasticQuota (scheduler-plugins v0.34.1-devel).

Resource amounts are kept as written (``ResourceList``); ``*_quantities()`` accessors parse them
for the exact arithmetic and comparison the controllers need.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from trainer.api import scheduling_constants as c
from trainer.api.base import Int32, KindModel, Model, ResourceList, Str, Time
from trainer.api.core import ObjectMeta, resource_list
from trainer.api.quantity import Quantity


class PodGroupSpec(Model):
    min_member: Annotated[Int32, Field(ge=1)] | None = None
    min_resources: ResourceList | None = None
    schedule_timeout_seconds: Int32 | None = None

    def min_resources_quantities(self) -> dict[str, Quantity]:
        return resource_list(self.min_resources)


class PodGroupStatus(Model):
    phase: Str | None = None
    occupied_by: Str | None = None
    running: Int32 | None = None
    succeeded: Int32 | None = None
    failed: Int32 | None = None
    schedule_start_time: Time | None = None


class PodGroup(KindModel):
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
    status: PodGroupStatus | None = None


class ElasticQuotaSpec(Model):
    min: ResourceList | None = None
    max: ResourceList | None = None

    def min_quantities(self) -> dict[str, Quantity]:
        return resource_list(self.min)

    def max_quantities(self) -> dict[str, Quantity]:
        return resource_list(self.max)


class ElasticQuotaStatus(Model):
    used: ResourceList | None = None

    def used_quantities(self) -> dict[str, Quantity]:
        return resource_list(self.used)


class ElasticQuota(KindModel):
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
    status: ElasticQuotaStatus | None = None
