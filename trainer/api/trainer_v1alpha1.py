"""``trainer.kubeflow.org/v1alpha1``: TrainJob, TrainingRuntime, ClusterTrainingRuntime (v2.1.0).

All defaulting is CRD-side: the Python defaults here are the CRD ``default:`` values, so a
model built in Python reads like the stored object while dumping only what was set.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from trainer.api import trainer_constants as c
from trainer.api.base import (
    Bool,
    Ext,
    Int,
    Int32,
    IntOrString,
    KindModel,
    Model,
    Rule,
    Str,
    StringList,
    StringMap,
)
from trainer.api.core import (
    Affinity,
    ConditionList,
    EmbeddedObjectMeta,
    EnvVar,
    LocalObjectReference,
    MetricSpec,
    ObjectMeta,
    PodSchedulingGate,
    ResourceRequirements,
    Toleration,
    Volume,
    VolumeMount,
)
from trainer.api.jobset_v1alpha2 import JobSetSpec

ATOMIC = Ext(list_type="atomic")
BY_NAME = Ext(list_type="map", map_keys=("name",))
EnvList = Annotated[list[EnvVar], BY_NAME]

# -- TrainJob ---------------------------------------------------------------------------------


class RuntimeRef(Model):
    name: Annotated[Str, Field(min_length=1)]
    api_group: Str = c.GROUP
    kind: Str = c.ClusterTrainingRuntimeKind


class DatasetInitializer(Model):
    storage_uri: Str | None = None
    env: EnvList | None = None
    secret_ref: LocalObjectReference | None = None


class ModelInitializer(Model):
    storage_uri: Str | None = None
    env: EnvList | None = None
    secret_ref: LocalObjectReference | None = None


class Initializer(Model):
    dataset: DatasetInitializer | None = None
    model: ModelInitializer | None = None


class Trainer(Model):
    image: Str | None = None
    command: Annotated[StringList, ATOMIC] | None = None
    args: Annotated[StringList, ATOMIC] | None = None
    env: EnvList | None = None
    num_nodes: Int32 | None = None
    resources_per_node: ResourceRequirements | None = None
    num_proc_per_node: IntOrString | None = None


class PodTemplateOverrideTargetJob(Model):
    name: Annotated[Str, Field(min_length=1)]


class ContainerOverride(Model):
    name: Annotated[Str, Field(min_length=1)]
    env: EnvList | None = None
    # Keyed by name here (upstream's marker), unlike Container.volumeMounts (mountPath).
    volume_mounts: Annotated[list[VolumeMount], BY_NAME] | None = None


class PodTemplateSpecOverride(Model):
    service_account_name: Str | None = None
    node_selector: StringMap | None = None
    affinity: Affinity | None = None
    tolerations: Annotated[list[Toleration], ATOMIC] | None = None
    volumes: Annotated[list[Volume], BY_NAME] | None = None
    init_containers: Annotated[list[ContainerOverride], BY_NAME] | None = None
    containers: Annotated[list[ContainerOverride], BY_NAME] | None = None
    scheduling_gates: Annotated[list[PodSchedulingGate], BY_NAME] | None = None
    image_pull_secrets: Annotated[list[LocalObjectReference], BY_NAME] | None = None


class PodTemplateOverride(Model):
    target_jobs: Annotated[list[PodTemplateOverrideTargetJob], ATOMIC]
    metadata: EmbeddedObjectMeta | None = None
    spec: PodTemplateSpecOverride | None = None


class TrainJobSpec(Model):
    runtime_ref: Annotated[RuntimeRef, Ext(rules=(Rule("self == oldSelf", "runtimeRef is immutable"),))]
    initializer: Initializer | None = None
    trainer: Trainer | None = None
    labels: StringMap | None = None
    annotations: StringMap | None = None
    pod_template_overrides: Annotated[list[PodTemplateOverride], ATOMIC] | None = None
    suspend: Bool = False
    managed_by: Annotated[
        Str,
        Ext(
            rules=(
                Rule(
                    f"self in ['{c.TrainJobControllerName}', '{c.MultiKueueControllerName}']",
                    f"ManagedBy must be {c.TrainJobControllerName} or {c.MultiKueueControllerName} if set",
                ),
                Rule("self == oldSelf", "ManagedBy value is immutable"),
            )
        ),
    ] = c.TrainJobControllerName


class JobStatus(Model):
    name: Annotated[Str, Field(min_length=1)]
    ready: Annotated[Int32, Field(ge=0)]
    succeeded: Annotated[Int32, Field(ge=0)]
    failed: Annotated[Int32, Field(ge=0)]
    active: Annotated[Int32, Field(ge=0)]
    suspended: Annotated[Int32, Field(ge=0)]


class TrainJobStatus(Model):
    k8s_min_properties: ClassVar[int | None] = 1

    conditions: ConditionList | None = None
    jobs_status: Annotated[list[JobStatus], BY_NAME] | None = None


class TrainJob(KindModel):
    api_version: ClassVar[str] = c.API_VERSION
    kind: ClassVar[str] = c.TrainJobKind
    plural: ClassVar[str] = "trainjobs"
    singular: ClassVar[str] = "trainjob"
    status_subresource: ClassVar[bool] = True
    printer_columns: ClassVar[tuple[dict[str, str], ...]] = (
        {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    )
    k8s_rules: ClassVar[tuple[Rule, ...]] = (
        Rule(
            "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
            "metadata.name must match RFC 1035 DNS label format",
        ),
        Rule("size(self.metadata.name) <= 63", "metadata.name must be no more than 63 characters"),
    )

    metadata: ObjectMeta | None = None
    spec: TrainJobSpec | None = None
    status: TrainJobStatus | None = None


# -- runtimes ---------------------------------------------------------------------------------


class TorchElasticPolicy(Model):
    max_restarts: Int32 | None = None
    min_nodes: Int32 | None = None
    max_nodes: Int32 | None = None
    metrics: Annotated[list[MetricSpec], ATOMIC] | None = None


class TorchMLPolicySource(Model):
    num_proc_per_node: Annotated[
        IntOrString,
        Ext(
            rules=(
                Rule(
                    "self > 0 || self in ['auto', 'cpu', 'gpu']",
                    "NumProcPerNode must be equal to auto, cpu, gpu, or int value",
                ),
            )
        ),
    ] = c.NumProcPerNodeAuto
    elastic_policy: TorchElasticPolicy | None = None


class MPIMLPolicySource(Model):
    num_proc_per_node: Int32 = 1
    mpi_implementation: Literal["OpenMPI", ""] = "OpenMPI"
    ssh_auth_mount_path: Str = "/root/.ssh"
    run_launcher_as_node: Bool = False


class MLPolicy(Model):
    k8s_rules: ClassVar[tuple[Rule, ...]] = (
        Rule(
            "!(has(self.numNodes) && (has(self.torch) && has(self.torch.elasticPolicy)))",
            "numNodes should not be set if torch.elasticPolicy is configured",
        ),
        Rule("!(has(self.torch) && has(self.mpi))", "Only one of the policy can be configured"),
    )

    num_nodes: Int32 | None = None
    torch: TorchMLPolicySource | None = None
    mpi: MPIMLPolicySource | None = None


class CoschedulingPodGroupPolicySource(Model):
    schedule_timeout_seconds: Int32 = 60


class VolcanoNetworkTopology(Model):
    """Volcano ``scheduling.volcano.sh/v1beta1`` NetworkTopologySpec as Trainer embeds it."""

    mode: Literal["hard", "soft"] = "hard"
    highest_tier_allowed: Int = 1


class VolcanoPodGroupPolicySource(Model):
    network_topology: VolcanoNetworkTopology | None = None


class PodGroupPolicy(Model):
    coscheduling: CoschedulingPodGroupPolicySource | None = None
    volcano: VolcanoPodGroupPolicySource | None = None


class JobSetTemplateSpec(Model):
    k8s_min_properties: ClassVar[int | None] = 1

    metadata: EmbeddedObjectMeta | None = None
    spec: JobSetSpec | None = None


class TrainingRuntimeSpec(Model):
    k8s_min_properties: ClassVar[int | None] = 1

    ml_policy: MLPolicy | None = None
    pod_group_policy: PodGroupPolicy | None = None
    template: JobSetTemplateSpec | None = None


class TrainingRuntime(KindModel):
    api_version: ClassVar[str] = c.API_VERSION
    kind: ClassVar[str] = c.TrainingRuntimeKind
    plural: ClassVar[str] = "trainingruntimes"
    singular: ClassVar[str] = "trainingruntime"

    metadata: ObjectMeta | None = None
    spec: TrainingRuntimeSpec | None = None


class ClusterTrainingRuntime(KindModel):
    api_version: ClassVar[str] = c.API_VERSION
    kind: ClassVar[str] = c.ClusterTrainingRuntimeKind
    plural: ClassVar[str] = "clustertrainingruntimes"
    singular: ClassVar[str] = "clustertrainingruntime"
    namespaced: ClassVar[bool] = False

    metadata: ObjectMeta | None = None
    spec: TrainingRuntimeSpec | None = None
