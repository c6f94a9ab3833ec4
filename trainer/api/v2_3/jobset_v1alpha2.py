"""``jobset.x-k8s.io/v1alpha2`` JobSet of level v2.3 (kubernetes-sigs/jobset v0.12.0).

What v0.12.0 changes from v0.10.1 (``trainer.api.jobset_v1alpha2``): ``spec.volumeClaimPolicies``
(shared PVCs), the restart strategy ``InPlaceRestart`` and the failure-policy actions
``RestartJob``/``RestartJobAndIgnoreMaxRestarts`` (feature-gated upstream, accepted by the CRD),
``status.replicatedJobsStatus[].jobRestarts``/``jobRestartsCountTowardsMax`` and the in-place
restart counters. The classes v0.12.0 leaves unchanged are v0.10.1's, imported.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from trainer.api import jobset_constants as c
from trainer.api import jobset_v1alpha2 as v0_10
from trainer.api.base import Bool, Ext, Int32, KindModel, Model, Rule, Str, StringList
from trainer.api.core import ConditionList, EmbeddedObjectMeta, ObjectMeta
from trainer.api.jobset_v1alpha2 import (
    ATOMIC,
    IMMUTABLE,
    Coordinator,
    DependsOn,
    Network,
    ReplicatedJob,
    StartupPolicy,
    SuccessPolicy,
)
from trainer.api.v2_3 import jobset_constants as c23
from trainer.api.v2_3.core import PersistentVolumeClaim

BY_NAME = Ext(list_type="map", map_keys=("name",))


class FailurePolicyRule(Model):
    """What to do when a child Job fails in a matching way."""

    name: Str
    """Name of the rule, unique within the policy."""
    action: Literal[
        "FailJobSet",
        "RestartJobSet",
        "RestartJobSetAndIgnoreMaxRestarts",
        "RestartJob",
        "RestartJobAndIgnoreMaxRestarts",
    ]
    """Action taken when the rule matches; RestartJob* recreate only the failed Job."""
    on_job_failure_reasons: StringList | None = None
    """Job failure reasons the rule matches; any reason when empty."""
    on_job_failure_message_patterns: StringList | None = None
    """Regular expressions matched against the Job failure message; any message when empty."""
    target_replicated_jobs: Annotated[StringList, ATOMIC] | None = None
    """Replicated jobs the rule applies to; all of them when empty."""


class FailurePolicy(Model):
    """How the JobSet reacts to failed child Jobs."""

    max_restarts: Int32 | None = None
    """How many times the JobSet may be restarted before it is failed (also bounds in-place restarts)."""
    restart_strategy: Literal["Recreate", "BlockingRecreate", "InPlaceRestart"] = "Recreate"
    """Recreate restarts Jobs as they are deleted; BlockingRecreate waits until all are gone;
    InPlaceRestart restarts healthy pods in place."""
    rules: list[FailurePolicyRule] | None = None
    """Rules checked in order; the first matching rule decides."""


class VolumeRetentionPolicy(Model):
    """What happens to the PVCs of a volume claim policy when the JobSet goes."""

    when_deleted: Literal["Delete", "Retain"] = "Delete"
    """Delete removes the PVCs with the JobSet; Retain keeps them."""


class VolumeClaimPolicy(Model):
    """Shared PVCs the JobSet creates (``<claim>-<jobset>``) and mounts where a container mounts the claim."""

    k8s_rules: ClassVar[tuple[Rule, ...]] = (
        Rule(
            "self.templates.all(t, !has(t.metadata.namespace) || size(t.metadata.namespace) == 0)",
            "namespace cannot be set for VolumeClaimPolicies templates",
        ),
    )

    templates: (
        Annotated[list[PersistentVolumeClaim], Field(max_length=c23.VolumeClaimPoliciesMaxItems), ATOMIC]
        | None
    ) = None
    """PVC templates, each mounted by name by at least one container; no namespace."""
    retention_policy: VolumeRetentionPolicy | None = None
    """Lifecycle of the PVCs; deleted with the JobSet by default."""


class JobSetSpec(Model):
    """Desired state of a JobSet."""

    k8s_rules: ClassVar[tuple[Rule, ...]] = v0_10.JobSetSpec.k8s_rules  # startupPolicy XOR dependsOn

    replicated_jobs: Annotated[list[ReplicatedJob], BY_NAME] | None = None
    """Groups of child Jobs, unique by name."""
    network: Annotated[Network, IMMUTABLE] | None = None
    """Networking of the pods; immutable."""
    success_policy: Annotated[SuccessPolicy, IMMUTABLE] | None = None
    """When the JobSet completes; immutable."""
    failure_policy: Annotated[FailurePolicy, IMMUTABLE] | None = None
    """How failures are handled; any failed Job fails the JobSet when unset; immutable."""
    startup_policy: Annotated[StartupPolicy, IMMUTABLE] | None = None
    """Order in which replicated jobs start (deprecated in favour of dependsOn); immutable."""
    suspend: Bool | None = None
    """Suspend the JobSet: child Jobs are suspended and their pods removed."""
    coordinator: Coordinator | None = None
    """Pod announced to all pods as the coordinator."""
    managed_by: Str | None = None
    """Controller that reconciles this JobSet; the built-in controller when unset; immutable."""
    ttl_seconds_after_finished: Annotated[Int32, Field(ge=0)] | None = None
    """Seconds after completion or failure before the JobSet is deleted."""
    volume_claim_policies: (
        Annotated[
            list[VolumeClaimPolicy],
            Field(max_length=c23.VolumeClaimPoliciesMaxItems),
            Ext(list_type="atomic", rules=IMMUTABLE.rules),
        ]
        | None
    ) = None
    """Shared PVCs created for the JobSet and added to the pod templates; immutable."""


JobRestarts = Annotated[list[Int32], Field(max_length=c23.JobRestartsMaxItems), ATOMIC]


class ReplicatedJobStatus(Model):
    """Counts of child Jobs in one replicated job."""

    name: Str
    """Name of the replicated job."""
    ready: Int32
    """Jobs whose pods are all ready or succeeded."""
    succeeded: Int32
    """Jobs that completed successfully."""
    failed: Int32
    """Jobs that failed."""
    active: Int32
    """Jobs with at least one running or pending pod."""
    suspended: Int32
    """Jobs that are suspended."""
    job_restarts: JobRestarts | None = None
    """Individual restarts (RestartJob actions) per Job index."""
    job_restarts_count_towards_max: JobRestarts | None = None
    """Individual restarts per Job index that count toward failurePolicy.maxRestarts."""


class JobSetStatus(Model):
    """Observed state of a JobSet."""

    conditions: ConditionList | None = None
    """Latest observations of the JobSet's state."""
    restarts: Int32 | None = None
    """Times the JobSet has been restarted as a whole."""
    restarts_count_towards_max: Int32 | None = None
    """Whole-JobSet restarts that count toward failurePolicy.maxRestarts."""
    terminal_state: Str | None = None
    """Completed or Failed once the JobSet has finished."""
    replicated_jobs_status: Annotated[list[ReplicatedJobStatus], BY_NAME] | None = None
    """Child Job counts per replicated job."""
    previous_in_place_restart_attempt: Annotated[Int32, Field(ge=0)] | None = None
    """Previous in-place restart attempt; pods at or below it restart in place (InPlaceRestart gate)."""
    current_in_place_restart_attempt: Annotated[Int32, Field(ge=0)] | None = None
    """Current in-place restart attempt; pods at it may start their workers (InPlaceRestart gate)."""


class JobSet(KindModel):
    """A group of Jobs run and restarted together as one workload."""

    api_version: ClassVar[str] = c.API_VERSION
    kind: ClassVar[str] = c.KIND
    plural: ClassVar[str] = v0_10.JobSet.plural
    singular: ClassVar[str] = v0_10.JobSet.singular
    status_subresource: ClassVar[bool] = True
    printer_columns: ClassVar[tuple[dict[str, str], ...]] = v0_10.JobSet.printer_columns

    metadata: ObjectMeta | None = None
    spec: JobSetSpec | None = None
    """Desired state of the JobSet."""
    status: JobSetStatus | None = None
    """Observed state of the JobSet."""


__all__ = [
    "Coordinator",
    "DependsOn",
    "EmbeddedObjectMeta",
    "FailurePolicy",
    "FailurePolicyRule",
    "JobSet",
    "JobSetSpec",
    "JobSetStatus",
    "Network",
    "ReplicatedJob",
    "ReplicatedJobStatus",
    "StartupPolicy",
    "SuccessPolicy",
    "VolumeClaimPolicy",
    "VolumeRetentionPolicy",
]
