"""TrainingRuntime and ClusterTrainingRuntime validating webhooks (docs/behaviour/trainer.md §5.4,
§12.5 for level v2.3).

Why: a replicated job marked with an ancestor label (``trainer``, ``model-initializer``,
``dataset-initializer``) is where the TrainJob's trainer or initializer settings land, so it must
run exactly one Job replica and contain the container those settings target. TrainingRuntime
updates are not validated (upstream); ClusterTrainingRuntime updates are. A deprecated
ClusterTrainingRuntime (label ``trainer.kubeflow.org/support: deprecated``) is admitted with a
warning on create.

Level v2.3 (Trainer v2.3.0's ``trainingruntime_webhook.go`` and
``clustertrainingruntime_webhook.go``) has the same rules; what differs is what the level
decides: the objects are decoded with the trainer v2.3.0 binary's Go types (the new
``mlPolicy.jax``, ``xgboost``, ``flux`` and ``torch.envInjection`` typed, the removed
``torch.numProcPerNode`` and ``elasticPolicy`` ignored as Go's decoder ignores unknown fields),
bad container lists printed as those types marshal them, and the deprecation warning links to the
v2.3 policy page. What the v2.3 CRDs refuse (at most one ``mlPolicy`` source, the
``numNodes``/policy CEL rules, pruned fields) the API server answers before the webhook is called.
"""

from __future__ import annotations

from typing import Any

from manager.meta.field import FieldError
from manager.meta.object import Json
from manager.webhook import Denied, validate_path
from trainer.api import gocodec
from trainer.api import trainer_constants as tc

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
    "Trainer. See runtime deprecation policy: {url}"
)


def _dig(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


_CONTAINERS = "spec.template.spec.replicatedJobs.template.spec.template.spec.containers"


def validate_replicated_jobs(runtime: Json, types_file: str = gocodec.TYPES_FILE) -> list[FieldError]:
    """``validateReplicatedJobs``: one replica and the required container per ancestor-labelled job.
    A bad container list is printed as ``json.Marshal`` of the level's ``[]corev1.Container``
    writes it (``types_file``: fields in declaration order, ``resources: {}``)."""
    containers_type = gocodec.field_type(
        f"{tc.GROUP}/{tc.VERSION}", tc.TrainingRuntimeKind, _CONTAINERS, types_file
    )
    errors: list[FieldError] = []
    rjobs = _dig(runtime, "spec", "template", "spec", "replicatedJobs") or []
    for i, rjob in enumerate(rjobs):
        labels = _dig(rjob, "template", "metadata", "labels") or {}
        ancestor = labels.get(tc.LabelTrainJobAncestor)
        required = REQUIRED_CONTAINER.get(ancestor) if isinstance(ancestor, str) else None
        if required is None:
            continue
        path = f"spec.template.spec.replicatedJobs[{i}]"
        replicas = rjob.get("replicas") or 0  # Go's int32: absent is 0 (the CRD defaults it to 1)
        if replicas != 1:
            errors.append(FieldError.invalid(f"{path}.replicas", replicas, "always must be 1"))
        containers = _dig(
            rjob, "template", "spec", "template", "spec", "containers"
        )  # absent: Go's nil, null
        if not any(isinstance(c, dict) and c.get("name") == required for c in containers or ()):
            errors.append(
                FieldError.invalid(
                    f"{path}.template.spec.template.spec.containers",
                    containers,
                    f"must contain the required container for the ancestor: {ancestor}",
                    value_text=gocodec.marshal(containers, containers_type),
                )
            )
    return errors


def deprecation_warnings(runtime: Json, url: str = tc.RuntimeDeprecationPolicyURL) -> list[str]:
    """The create warning of a deprecated ClusterTrainingRuntime, linking to ``url`` (the level's
    ``runtime_deprecation_policy_url``: it moved to the Trainer docs site in v2.2)."""
    meta = runtime.get("metadata") or {}
    if (meta.get("labels") or {}).get(tc.LabelSupport) == tc.SupportDeprecated:
        return [CTR_DEPRECATION_WARNING.format(name=meta.get("name") or "", url=url)]
    return []


def _check(errors: list[FieldError], warnings: list[str]) -> list[str]:
    if errors:
        raise Denied.from_field_errors(errors, warnings=warnings)
    return warnings


class TrainingRuntimeValidator:
    """Create is validated; update and delete are always allowed (upstream). ``types_file``: the
    Go types of the level's trainer binary (``RuntimeLevel.trainer_go_types``)."""

    def __init__(self, types_file: str = gocodec.TYPES_FILE) -> None:
        self.types_file = types_file

    async def validate_create(self, obj: Json) -> list[str] | None:
        return _check(validate_replicated_jobs(obj, self.types_file), [])

    async def validate_update(self, old: Json, new: Json) -> list[str] | None:
        return None

    async def validate_delete(self, obj: Json) -> list[str] | None:
        return None


class ClusterTrainingRuntimeValidator:
    """Create (with the deprecation warning linking to ``deprecation_url``) and update are
    validated; delete is allowed."""

    def __init__(
        self, deprecation_url: str = tc.RuntimeDeprecationPolicyURL, types_file: str = gocodec.TYPES_FILE
    ) -> None:
        self.deprecation_url = deprecation_url
        self.types_file = types_file

    async def validate_create(self, obj: Json) -> list[str] | None:
        return _check(
            validate_replicated_jobs(obj, self.types_file), deprecation_warnings(obj, self.deprecation_url)
        )

    async def validate_update(self, old: Json, new: Json) -> list[str] | None:
        return _check(validate_replicated_jobs(new, self.types_file), [])

    async def validate_delete(self, obj: Json) -> list[str] | None:
        return None
