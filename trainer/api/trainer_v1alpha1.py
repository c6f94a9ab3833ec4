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
    """The runtime a TrainJob is built from."""

    name: Annotated[Str, Field(min_length=1)]
    """Name of the runtime; a TrainingRuntime must be in the TrainJob's namespace."""
    api_group: Str = c.GROUP
    """API group of the runtime."""
    kind: Str = c.ClusterTrainingRuntimeKind
    """Kind of the runtime: TrainingRuntime or ClusterTrainingRuntime."""


class DatasetInitializer(Model):
    """Where the dataset is downloaded from before training."""

    storage_uri: Str | None = None
    """URI of the dataset, e.g. hf://owner/name."""
    env: EnvList | None = None
    """Environment variables for the dataset initializer container."""
    secret_ref: LocalObjectReference | None = None
    """Secret with credentials for the storage, exposed to the initializer as environment variables."""


class ModelInitializer(Model):
    """Where the pre-trained model is downloaded from before training."""

    storage_uri: Str | None = None
    """URI of the model, e.g. hf://owner/name."""
    env: EnvList | None = None
    """Environment variables for the model initializer container."""
    secret_ref: LocalObjectReference | None = None
    """Secret with credentials for the storage, exposed to the initializer as environment variables."""


class Initializer(Model):
    """Data and model preparation steps that run before the trainer."""

    dataset: DatasetInitializer | None = None
    """Dataset initializer settings."""
    model: ModelInitializer | None = None
    """Model initializer settings."""


class Trainer(Model):
    """Overrides for the trainer nodes of the runtime."""

    image: Str | None = None
    """Container image of the trainer."""
    command: Annotated[StringList, ATOMIC] | None = None
    """Entrypoint of the trainer container."""
    args: Annotated[StringList, ATOMIC] | None = None
    """Arguments of the trainer entrypoint."""
    env: EnvList | None = None
    """Environment variables for the trainer container."""
    num_nodes: Int32 | None = None
    """Number of training nodes."""
    resources_per_node: ResourceRequirements | None = None
    """Compute resources of each training node."""
    num_proc_per_node: IntOrString | None = None
    """Processes per node: a number, or auto, cpu or gpu for PyTorch."""


class PodTemplateOverrideTargetJob(Model):
    """A replicated job of the runtime that an override applies to."""

    name: Annotated[Str, Field(min_length=1)]
    """Name of the replicated job."""


class ContainerOverride(Model):
    """Additions to one container of the runtime's pod template."""

    name: Annotated[Str, Field(min_length=1)]
    """Name of the container to override."""
    env: EnvList | None = None
    """Environment variables added to the container."""
    # Keyed by name here (upstream's marker), unlike Container.volumeMounts (mountPath).
    volume_mounts: Annotated[list[VolumeMount], BY_NAME] | None = None
    """Volume mounts added to the container."""


class PodTemplateSpecOverride(Model):
    """Pod spec fields merged into the runtime's pod template."""

    service_account_name: Str | None = None
    """Service account of the pods."""
    node_selector: StringMap | None = None
    """Node labels the pods must be scheduled on."""
    affinity: Affinity | None = None
    """Scheduling affinity of the pods."""
    tolerations: Annotated[list[Toleration], ATOMIC] | None = None
    """Taints the pods tolerate."""
    volumes: Annotated[list[Volume], BY_NAME] | None = None
    """Volumes added to the pods."""
    init_containers: Annotated[list[ContainerOverride], BY_NAME] | None = None
    """Overrides of init containers, by name."""
    containers: Annotated[list[ContainerOverride], BY_NAME] | None = None
    """Overrides of containers, by name."""
    scheduling_gates: Annotated[list[PodSchedulingGate], BY_NAME] | None = None
    """Scheduling gates added to the pods."""
    image_pull_secrets: Annotated[list[LocalObjectReference], BY_NAME] | None = None
    """Secrets used to pull the pods' images."""


class PodTemplateOverride(Model):
    """Changes to the pod templates of some replicated jobs of the runtime."""

    target_jobs: Annotated[list[PodTemplateOverrideTargetJob], ATOMIC]
    """Replicated jobs whose pod templates are overridden."""
    metadata: EmbeddedObjectMeta | None = None
    """Labels and annotations merged into the pod template metadata."""
    spec: PodTemplateSpecOverride | None = None
    """Fields merged into the pod template spec."""


class TrainJobSpec(Model):
    """Desired state of a TrainJob."""

    runtime_ref: Annotated[RuntimeRef, Ext(rules=(Rule("self == oldSelf", "runtimeRef is immutable"),))]
    """Runtime the TrainJob is built from; immutable."""
    initializer: Initializer | None = None
    """Dataset and model initialization."""
    trainer: Trainer | None = None
    """Trainer settings that override the runtime's."""
    labels: StringMap | None = None
    """Labels added to the JobSet and Jobs built for the TrainJob."""
    annotations: StringMap | None = None
    """Annotations added to the JobSet and Jobs built for the TrainJob."""
    pod_template_overrides: Annotated[list[PodTemplateOverride], ATOMIC] | None = None
    """Pod template overrides; a later entry wins over an earlier one for the same job."""
    suspend: Bool = False
    """Suspend the TrainJob: its pods are removed until it is resumed."""
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
    """Controller that reconciles the TrainJob: the Trainer controller or Kueue MultiKueue; immutable."""


class JobStatus(Model):
    """Counts of child Jobs of one replicated job."""

    name: Annotated[Str, Field(min_length=1)]
    """Name of the replicated job."""
    ready: Annotated[Int32, Field(ge=0)]
    """Jobs whose pods are all ready or succeeded."""
    succeeded: Annotated[Int32, Field(ge=0)]
    """Jobs that completed successfully."""
    failed: Annotated[Int32, Field(ge=0)]
    """Jobs that failed."""
    active: Annotated[Int32, Field(ge=0)]
    """Jobs with at least one running or pending pod."""
    suspended: Annotated[Int32, Field(ge=0)]
    """Jobs that are suspended."""


class TrainJobStatus(Model):
    """Observed state of a TrainJob."""

    k8s_min_properties: ClassVar[int | None] = 1

    conditions: ConditionList | None = None
    """Latest observations of the TrainJob's state."""
    jobs_status: Annotated[list[JobStatus], BY_NAME] | None = None
    """Child Job counts per replicated job."""


class TrainJob(KindModel):
    """A training job built from a TrainingRuntime or ClusterTrainingRuntime."""

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
    """Desired state of the TrainJob."""
    status: TrainJobStatus | None = None
    """Observed state of the TrainJob."""


# -- runtimes ---------------------------------------------------------------------------------


class TorchElasticPolicy(Model):
    """Elastic PyTorch training: the node count may change within bounds."""

    max_restarts: Int32 | None = None
    """How many times the training may restart."""
    min_nodes: Int32 | None = None
    """Lower bound of the node count."""
    max_nodes: Int32 | None = None
    """Upper bound of the node count."""
    metrics: Annotated[list[MetricSpec], ATOMIC] | None = None
    """Metrics that drive scaling between the bounds."""


class TorchMLPolicySource(Model):
    """PyTorch distributed training (torchrun)."""

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
    """Processes per node: a positive number, or auto, cpu or gpu."""
    elastic_policy: TorchElasticPolicy | None = None
    """Elastic training settings."""


class MPIMLPolicySource(Model):
    """MPI training: a launcher starts the processes on the nodes over SSH."""

    num_proc_per_node: Int32 = 1
    """Slots per node in the hostfile."""
    mpi_implementation: Literal["OpenMPI", ""] = "OpenMPI"
    """MPI implementation; only OpenMPI is supported."""
    ssh_auth_mount_path: Str = "/root/.ssh"
    """Directory where the SSH keys are mounted."""
    run_launcher_as_node: Bool = False
    """Whether the launcher also runs training processes."""


class MLPolicy(Model):
    """Machine-learning framework settings of a runtime; at most one framework."""

    k8s_rules: ClassVar[tuple[Rule, ...]] = (
        Rule(
            "!(has(self.numNodes) && (has(self.torch) && has(self.torch.elasticPolicy)))",
            "numNodes should not be set if torch.elasticPolicy is configured",
        ),
        Rule("!(has(self.torch) && has(self.mpi))", "Only one of the policy can be configured"),
    )

    num_nodes: Int32 | None = None
    """Number of training nodes."""
    torch: TorchMLPolicySource | None = None
    """PyTorch settings."""
    mpi: MPIMLPolicySource | None = None
    """MPI settings."""


class CoschedulingPodGroupPolicySource(Model):
    """Gang scheduling with the scheduler-plugins Coscheduling plugin."""

    schedule_timeout_seconds: Int32 = 60
    """Seconds the scheduler waits for the whole group before giving up."""


class VolcanoNetworkTopology(Model):
    """Volcano ``scheduling.volcano.sh/v1beta1`` NetworkTopologySpec as Trainer embeds it."""

    mode: Literal["hard", "soft"] = "hard"
    """hard: pods must fit within the allowed tier; soft: best effort."""
    highest_tier_allowed: Int = 1
    """Highest network tier the pods may span."""


class VolcanoPodGroupPolicySource(Model):
    """Gang scheduling with Volcano."""

    network_topology: VolcanoNetworkTopology | None = None
    """Network-topology-aware placement."""


class PodGroupPolicy(Model):
    """Gang scheduling of the runtime's pods; set one of the sources."""

    coscheduling: CoschedulingPodGroupPolicySource | None = None
    """Use the Coscheduling plugin."""
    volcano: VolcanoPodGroupPolicySource | None = None
    """Use Volcano."""


class JobSetTemplateSpec(Model):
    """The JobSet a runtime produces for each TrainJob."""

    k8s_min_properties: ClassVar[int | None] = 1

    metadata: EmbeddedObjectMeta | None = None
    """Labels and annotations of the JobSet."""
    spec: JobSetSpec | None = None
    """Spec of the JobSet."""


class TrainingRuntimeSpec(Model):
    """Desired state of a training runtime."""

    k8s_min_properties: ClassVar[int | None] = 1

    ml_policy: MLPolicy | None = None
    """Framework settings."""
    pod_group_policy: PodGroupPolicy | None = None
    """Gang scheduling settings."""
    template: JobSetTemplateSpec | None = None
    """JobSet template."""


class TrainingRuntime(KindModel):
    """A namespaced blueprint for TrainJobs in its namespace."""

    api_version: ClassVar[str] = c.API_VERSION
    kind: ClassVar[str] = c.TrainingRuntimeKind
    plural: ClassVar[str] = "trainingruntimes"
    singular: ClassVar[str] = "trainingruntime"

    metadata: ObjectMeta | None = None
    spec: TrainingRuntimeSpec | None = None
    """Desired state of the runtime."""


class ClusterTrainingRuntime(KindModel):
    """A cluster-wide blueprint for TrainJobs in any namespace."""

    api_version: ClassVar[str] = c.API_VERSION
    kind: ClassVar[str] = c.ClusterTrainingRuntimeKind
    plural: ClassVar[str] = "clustertrainingruntimes"
    singular: ClassVar[str] = "clustertrainingruntime"
    namespaced: ClassVar[bool] = False

    metadata: ObjectMeta | None = None
    spec: TrainingRuntimeSpec | None = None
    """Desired state of the runtime."""
