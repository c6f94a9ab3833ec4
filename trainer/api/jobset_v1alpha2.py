"""``jobset.x-k8s.io/v1alpha2`` JobSet (kubernetes-sigs/jobset v0.10.1).

The spec types are shared with TrainingRuntime, which embeds a full ``JobSetSpec``. Attribute
docstrings become the CRD field descriptions (what ``kubectl explain`` shows).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from trainer.api import jobset_constants as c
from trainer.api.base import Bool, Ext, Int, Int32, KindModel, Model, Rule, Str, StringList
from trainer.api.core import ConditionList, EmbeddedObjectMeta, JobTemplateSpec, ObjectMeta

IMMUTABLE = Ext(rules=(Rule("self == oldSelf", "Value is immutable"),))
ATOMIC = Ext(list_type="atomic")


class DependsOn(Model):
    """A replicated job that must reach a status before this one starts."""

    name: Str
    """Name of the replicated job this one waits for."""
    status: Literal["Ready", "Complete"]
    """Status the awaited replicated job must reach: Ready or Complete."""


class ReplicatedJob(Model):
    """A group of identical Jobs created from one template."""

    name: Str
    """Name of the replicated job; part of every child Job's name."""
    group_name: Str = "default"
    """Group the replicated job belongs to; must be a DNS-1035 label."""
    template: JobTemplateSpec
    """Template of the child Jobs."""
    replicas: Int32 = 1
    """Number of Jobs created from the template."""
    depends_on: (
        Annotated[
            list[DependsOn],
            Field(max_length=5),
            Ext(list_type="map", map_keys=("name",), rules=IMMUTABLE.rules),
        ]
        | None
    ) = None
    """Replicated jobs that must reach a status before these Jobs are created; immutable."""


class Network(Model):
    """Pod-to-pod networking of the JobSet."""

    enable_dns_hostnames: Bool | None = Field(default=None, alias="enableDNSHostnames")
    """Give pods DNS hostnames through a headless Service."""
    subdomain: Str | None = None
    """Subdomain (headless Service name) of the pods; the JobSet name when empty."""
    publish_not_ready_addresses: Bool | None = None
    """Publish DNS records of pods before they are ready."""


class SuccessPolicy(Model):
    """When the JobSet counts as completed."""

    operator: Literal["All", "Any"]
    """All: every targeted Job must succeed. Any: one succeeded Job is enough."""
    target_replicated_jobs: Annotated[StringList, ATOMIC] | None = None
    """Replicated jobs the operator applies to; all of them when empty."""


class FailurePolicyRule(Model):
    """What to do when a child Job fails in a matching way."""

    name: Str
    """Name of the rule, unique within the policy."""
    action: Literal["FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"]
    """Action taken when the rule matches."""
    on_job_failure_reasons: StringList | None = None
    """Job failure reasons the rule matches; any reason when empty."""
    on_job_failure_message_patterns: StringList | None = None
    """Regular expressions matched against the Job failure message; any message when empty."""
    target_replicated_jobs: Annotated[StringList, ATOMIC] | None = None
    """Replicated jobs the rule applies to; all of them when empty."""


class FailurePolicy(Model):
    """How the JobSet reacts to failed child Jobs."""

    max_restarts: Int32 | None = None
    """How many times the JobSet may be restarted before it is failed."""
    restart_strategy: Literal["Recreate", "BlockingRecreate"] = "Recreate"
    """Recreate restarts Jobs as they are deleted; BlockingRecreate waits until all are gone."""
    rules: list[FailurePolicyRule] | None = None
    """Rules checked in order; the first matching rule decides."""


class StartupPolicy(Model):
    """In which order replicated jobs are started."""

    startup_policy_order: Literal["AnyOrder", "InOrder"]
    """AnyOrder starts all at once; InOrder starts each after the previous one is ready."""


class Coordinator(Model):
    """The pod whose stable address is published to every pod as the coordinator."""

    replicated_job: Str
    """Replicated job of the coordinator pod."""
    job_index: Int | None = None
    """Index of the Job within the replicated job."""
    pod_index: Int | None = None
    """Index of the pod within the Job."""


class JobSetSpec(Model):
    """Desired state of a JobSet."""

    k8s_rules: ClassVar[tuple[Rule, ...]] = (
        Rule(
            "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
            "self.replicatedJobs.exists(x, has(x.dependsOn)))",
            "StartupPolicy and DependsOn APIs are mutually exclusive",
        ),
    )

    replicated_jobs: Annotated[list[ReplicatedJob], Ext(list_type="map", map_keys=("name",))] | None = None
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


class JobSetStatus(Model):
    """Observed state of a JobSet."""

    conditions: ConditionList | None = None
    """Latest observations of the JobSet's state."""
    restarts: Int32 | None = None
    """Times the JobSet has been restarted."""
    restarts_count_towards_max: Int32 | None = None
    """Restarts that count toward failurePolicy.maxRestarts."""
    terminal_state: Str | None = None
    """Completed or Failed once the JobSet has finished."""
    replicated_jobs_status: (
        Annotated[list[ReplicatedJobStatus], Ext(list_type="map", map_keys=("name",))] | None
    ) = None
    """Child Job counts per replicated job."""


class JobSet(KindModel):
    """A group of Jobs run and restarted together as one workload."""

    api_version: ClassVar[str] = c.API_VERSION
    kind: ClassVar[str] = c.KIND
    plural: ClassVar[str] = "jobsets"
    singular: ClassVar[str] = "jobset"
    status_subresource: ClassVar[bool] = True
    printer_columns: ClassVar[tuple[dict[str, str], ...]] = (
        {
            "name": "TerminalState",
            "type": "string",
            "jsonPath": ".status.terminalState",
            "description": "Final state of JobSet",
        },
        {
            "name": "Restarts",
            "type": "string",
            "jsonPath": ".status.restarts",
            "description": "Number of restarts",
        },
        {
            "name": "Completed",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Completed")].status',
        },
        {
            "name": "Suspended",
            "type": "string",
            "jsonPath": ".spec.suspend",
            "description": "JobSet suspended",
        },
        {
            "name": "Age",
            "type": "date",
            "jsonPath": ".metadata.creationTimestamp",
            "description": "Time this JobSet was created",
        },
    )

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
]
