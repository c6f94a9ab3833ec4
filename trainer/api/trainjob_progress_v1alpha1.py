"""``status.trainerStatus`` of a TrainJob (KEP-2779, upstream v2.2), behind the TrainJobStatus gate.

Kept out of ``trainer_v1alpha1.TrainJobStatus`` on purpose: with the gate off the shipped CRD
and the API are Trainer v2.1.0's. ``crdgen --feature-gates TrainJobStatus=true`` adds this
schema (and the Progress/ETA printer columns) to the TrainJob CRD in ``config/progress/crd``.
Field names, bounds and the CEL rule are upstream v2.2's.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from trainer.api.base import Ext, Int32, Model, Rule, Str, Time

METRICS_MAX_ITEMS = 256
METRIC_FIELD_MAX_LENGTH = 64


class Metric(Model):
    """One training metric; the value is a string (upstream serialises every value so)."""

    name: Annotated[Str, Field(min_length=1, max_length=METRIC_FIELD_MAX_LENGTH)]
    """A user-defined label for the metric, e.g. ``loss``, ``eval_accuracy``."""
    value: Annotated[Str, Field(min_length=1, max_length=METRIC_FIELD_MAX_LENGTH)]
    """The value of the metric, serialised as a string."""


class TrainerStatus(Model):
    """The latest runtime status the trainer pods reported."""

    k8s_rules: ClassVar[tuple[Rule, ...]] = (
        Rule("has(self.lastUpdatedTime)", "lastUpdatedTime is required when trainerStatus is present"),
    )

    progress_percentage: Annotated[Int32, Field(ge=0, le=100)] | None = None
    """How complete the TrainJob is, 0 to 100; empty if unknown."""
    estimated_remaining_seconds: Annotated[Int32, Field(ge=0)] | None = None
    """Estimated remaining training time in seconds; empty if unknown."""
    metrics: Annotated[list[Metric], Field(max_length=METRICS_MAX_ITEMS), Ext(list_type="atomic")] | None = (
        None
    )
    """The current metrics of the model."""
    last_updated_time: Time | None = None
    """When the runtime status was observed."""


#: The printer columns the gate adds, before ``Age``.
PROGRESS_PRINTER_COLUMNS: tuple[dict[str, str], ...] = (
    {"name": "Progress", "type": "integer", "jsonPath": ".status.trainerStatus.progressPercentage"},
    {"name": "ETA", "type": "integer", "jsonPath": ".status.trainerStatus.estimatedRemainingSeconds"},
)
