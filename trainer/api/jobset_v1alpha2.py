"""``jobset.x-k8s.io/v1alpha2`` JobSet (kubernetes-sigs/jobset v0.10.1).

The spec types are shared with TrainingRuntime, which embeds a full ``JobSetSpec``.
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
    name: Str
    status: Literal["Ready", "Complete"]


class ReplicatedJob(Model):
    name: Str
    group_name: Str = "default"
    template: JobTemplateSpec
    replicas: Int32 = 1
    depends_on: (
        Annotated[
            list[DependsOn],
            Field(max_length=5),
            Ext(list_type="map", map_keys=("name",), rules=IMMUTABLE.rules),
        ]
        | None
    ) = None


class Network(Model):
    enable_dns_hostnames: Bool | None = Field(default=None, alias="enableDNSHostnames")
    subdomain: Str | None = None
    publish_not_ready_addresses: Bool | None = None


class SuccessPolicy(Model):
    operator: Literal["All", "Any"]
    target_replicated_jobs: Annotated[StringList, ATOMIC] | None = None


class FailurePolicyRule(Model):
    name: Str
    action: Literal["FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"]
    on_job_failure_reasons: StringList | None = None
    on_job_failure_message_patterns: StringList | None = None
    target_replicated_jobs: Annotated[StringList, ATOMIC] | None = None


class FailurePolicy(Model):
    max_restarts: Int32 | None = None
    restart_strategy: Literal["Recreate", "BlockingRecreate"] = "Recreate"
    rules: list[FailurePolicyRule] | None = None


class StartupPolicy(Model):
    startup_policy_order: Literal["AnyOrder", "InOrder"]


class Coordinator(Model):
    replicated_job: Str
    job_index: Int | None = None
    pod_index: Int | None = None


class JobSetSpec(Model):
    k8s_rules: ClassVar[tuple[Rule, ...]] = (
        Rule(
            "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
            "self.replicatedJobs.exists(x, has(x.dependsOn)))",
            "StartupPolicy and DependsOn APIs are mutually exclusive",
        ),
    )

    replicated_jobs: Annotated[list[ReplicatedJob], Ext(list_type="map", map_keys=("name",))] | None = None
    network: Annotated[Network, IMMUTABLE] | None = None
    success_policy: Annotated[SuccessPolicy, IMMUTABLE] | None = None
    failure_policy: Annotated[FailurePolicy, IMMUTABLE] | None = None
    startup_policy: Annotated[StartupPolicy, IMMUTABLE] | None = None
    suspend: Bool | None = None
    coordinator: Coordinator | None = None
    managed_by: Str | None = None
    ttl_seconds_after_finished: Annotated[Int32, Field(ge=0)] | None = None


class ReplicatedJobStatus(Model):
    name: Str
    ready: Int32
    succeeded: Int32
    failed: Int32
    active: Int32
    suspended: Int32


class JobSetStatus(Model):
    conditions: ConditionList | None = None
    restarts: Int32 | None = None
    restarts_count_towards_max: Int32 | None = None
    terminal_state: Str | None = None
    replicated_jobs_status: (
        Annotated[list[ReplicatedJobStatus], Ext(list_type="map", map_keys=("name",))] | None
    ) = None


class JobSet(KindModel):
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
    status: JobSetStatus | None = None


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
