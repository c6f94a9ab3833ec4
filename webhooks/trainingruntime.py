"""TrainingRuntime and ClusterTrainingRuntime validating webhooks (docs/behaviour/trainer.md §5.4).

Why: a replicated job marked with an ancestor label (``trainer``, ``model-initializer``,
``dataset-initializer``) is where the TrainJob's trainer or initializer settings land, so it must
run exactly one Job replica and contain the container those settings target. TrainingRuntime
updates are not validated (upstream); ClusterTrainingRuntime updates are. A deprecated
ClusterTrainingRuntime (label ``trainer.kubeflow.org/support: deprecated``) is admitted with a
warning on create.
"""

from __future__ import annotations

from typing import Any

from manager.webhook import deny_with_warnings, validate_path
from trainer.api import trainer_constants as tc
from trainer.runtime.errors import FieldError, aggregate

Json = dict[str, Any]

__all__ = [
    "CLUSTER_TRAINING_RUNTIME_PATH",
    "TRAINING_RUNTIME_PATH",
    "ClusterTrainingRuntimeValidator",
    "TrainingRuntimeValidator",
    "deprecation_warnings",
    "validate_replicated_jobs",
]

TRAINING_RUNTIME_PATH = validate_path(tc.GROUP, tc.VERSION, tc.TrainingRuntimeKind)
CLUSTER_TRAINING_RUNTIME_PATH = validate_path(tc.GROUP, tc.VERSION, tc.ClusterTrainingRuntimeKind)

# The container a replicated job with this ancestor label must have.
REQUIRED_CONTAINER = {
    tc.AncestorTrainer: tc.Node,
    tc.ModelInitializer: tc.ModelInitializer,
    tc.DatasetInitializer: tc.DatasetInitializer,
}

CTR_DEPRECATION_WARNING = (
    'ClusterTrainingRuntime "{name}" is deprecated and will be removed in a future release of Kubeflow '
    "Trainer. See runtime deprecation policy: " + tc.RuntimeDeprecationPolicyURL
)


def _dig(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def validate_replicated_jobs(runtime: Json) -> list[FieldError]:
    """``validateReplicatedJobs``: one replica and the required container per ancestor-labelled job."""
    errors: list[FieldError] = []
    rjobs = _dig(runtime, "spec", "template", "spec", "replicatedJobs") or []
    for i, rjob in enumerate(rjobs):
        labels = _dig(rjob, "template", "metadata", "labels") or {}
        ancestor = labels.get(tc.LabelTrainJobAncestor)
        required = REQUIRED_CONTAINER.get(ancestor) if isinstance(ancestor, str) else None
        if required is None:
            continue
        path = f"spec.template.spec.replicatedJobs[{i}]"
        replicas = rjob.get("replicas", 1)
        if replicas != 1:
            errors.append(FieldError.invalid(f"{path}.replicas", replicas, "always must be 1"))
        containers = _dig(rjob, "template", "spec", "template", "spec", "containers") or []
        if not any(isinstance(c, dict) and c.get("name") == required for c in containers):
            errors.append(
                FieldError.invalid(
                    f"{path}.template.spec.template.spec.containers",
                    containers,
                    f"must contain the required container for the ancestor: {ancestor}",
                )
            )
    return errors


def deprecation_warnings(runtime: Json) -> list[str]:
    meta = runtime.get("metadata") or {}
    if (meta.get("labels") or {}).get(tc.LabelSupport) == tc.SupportDeprecated:
        return [CTR_DEPRECATION_WARNING.format(name=meta.get("name") or "")]
    return []


def _check(errors: list[FieldError], warnings: list[str]) -> list[str]:
    if errors:
        raise deny_with_warnings(ValueError(aggregate(errors)), warnings)
    return warnings


class TrainingRuntimeValidator:
    """Create is validated; update and delete are always allowed (upstream)."""

    async def validate_create(self, obj: Json) -> list[str] | None:
        return _check(validate_replicated_jobs(obj), [])

    async def validate_update(self, old: Json, new: Json) -> list[str] | None:
        return None

    async def validate_delete(self, obj: Json) -> list[str] | None:
        return None


class ClusterTrainingRuntimeValidator:
    """Create (with the deprecation warning) and update are validated; delete is allowed."""

    async def validate_create(self, obj: Json) -> list[str] | None:
        return _check(validate_replicated_jobs(obj), deprecation_warnings(obj))

    async def validate_update(self, old: Json, new: Json) -> list[str] | None:
        return _check(validate_replicated_jobs(new), [])

    async def validate_delete(self, obj: Json) -> list[str] | None:
        return None
