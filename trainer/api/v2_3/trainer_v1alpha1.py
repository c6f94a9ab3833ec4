"""``trainer.kubeflow.org/v1alpha1`` of level v2.3: TrainJob, TrainingRuntime, ClusterTrainingRuntime (v2.3.0).

What v2.3.0 changes from v2.1.0 (``trainer.api.trainer_v1alpha1``):

* TrainJob: ``spec.labels``, ``spec.annotations`` and ``spec.podTemplateOverrides`` are gone;
  ``spec.runtimePatches`` (a list keyed by ``manager``, at most 16) patches the runtime's JobSet
  template, and ``spec.activeDeadlineSeconds`` (>= 1, immutable) bounds the run time;
  ``spec.trainer.numProcPerNode`` is an int32 (no ``auto``/``cpu``/``gpu``); ``spec.trainer`` and
  ``spec.initializer`` are immutable as wholes; names, images, commands, env lists and the
  status lists are bounded; ``status.trainerStatus`` is part of the API.
* Runtimes: ``mlPolicy.torch`` loses ``numProcPerNode`` and ``elasticPolicy`` and gains
  ``envInjection``; ``mlPolicy.jax``, ``mlPolicy.xgboost`` and ``mlPolicy.flux`` are new; at most
  one policy; the template embeds JobSet v0.12.0's spec.

All defaulting is CRD-side, as at v2.1: the Python defaults are the CRD ``default:`` values.
Classes with the same schema at both levels are v2.1's, imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field

from trainer.api import trainer_constants as c
from trainer.api import trainer_v1alpha1 as v2_1
from trainer.api.base import Bool, Ext, Int32, Int64, KindModel, Model, Rule, Str, StringMap, Time
from trainer.api.core import (
    Affinity,
    ConditionList,
    EmbeddedObjectMeta,
    EnvVar,
    LocalObjectReference,
    ObjectMeta,
    PodSchedulingGate,
    ResourceRequirements,
    Toleration,
    Volume,
    VolumeMount,
)
from trainer.api.trainer_v1alpha1 import (
    ATOMIC,
    CoschedulingPodGroupPolicySource,
    PodGroupPolicy,
    VolcanoNetworkTopology,
    VolcanoPodGroupPolicySource,
)
from trainer.api.trainjob_progress_v1alpha1 import Metric, TrainerStatus
from trainer.api.v2_3 import trainer_constants as c23
from trainer.api.v2_3.core import PodSecurityContext, SecurityContext
from trainer.api.v2_3.jobset_v1alpha2 import JobSetSpec

IMMUTABLE = Ext(rules=(Rule("self == oldSelf", c23.FieldImmutableMessage),))
NAME = Field(min_length=1, max_length=c23.NameMaxLength)
BOUNDED_NAME = Annotated[Str, NAME]


def _unique_by(key: str) -> Callable[[list[Any]], list[Any]]:
    """Refuse a repeated list-map key as the API server does (``Duplicate value``).

    So an object the CRD would reject does not load into the model either.
    """

    def check(items: list[Any]) -> list[Any]:
        seen: set[Any] = set()
        for i, item in enumerate(items):
            value = item.get(key) if isinstance(item, dict) else getattr(item, key, None)
            if value in seen:
                raise ValueError(f"[{i}]: Duplicate value: {{{key!r}: {value!r}}}")
            seen.add(value)
        return items

    return check


BY_NAME = Ext(list_type="map", map_keys=("name",))
BY_NAME_IMMUTABLE = Ext(list_type="map", map_keys=("name",), rules=IMMUTABLE.rules)
UNIQUE_NAME = AfterValidator(_unique_by("name"))
EnvList = Annotated[list[EnvVar], Field(max_length=c23.EnvMaxItems), BY_NAME, UNIQUE_NAME]
CommandList = Annotated[
    list[Annotated[Str, Field(max_length=c23.CommandItemMaxLength)]],
    Field(max_length=c23.CommandMaxItems),
    ATOMIC,
]
StorageUri = Annotated[
    Str,
    Field(max_length=c23.StorageUriMaxLength),
    Ext(rules=(Rule("self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')", c23.StorageUriMessage),)),
]

# -- TrainJob ---------------------------------------------------------------------------------


class RuntimeRef(Model):
    """The runtime a TrainJob is built from."""

    name: BOUNDED_NAME
    """Name of the runtime; a TrainingRuntime must be in the TrainJob's namespace."""
    api_group: Annotated[Str, Field(max_length=c23.NameMaxLength)] = c.GROUP
    """API group of the runtime."""
    kind: Annotated[Str, Field(max_length=c23.NameMaxLength)] = c.ClusterTrainingRuntimeKind
    """Kind of the runtime: TrainingRuntime or ClusterTrainingRuntime."""


class DatasetInitializer(Model):
    """Where the dataset is downloaded from before training."""

    storage_uri: StorageUri | None = None
    """URI of the dataset (scheme://...), e.g. hf://owner/name; may be empty."""
    env: EnvList | None = None
    """Environment variables for the dataset initializer container."""
    secret_ref: LocalObjectReference | None = None
    """Secret with credentials for the storage, exposed to the initializer as environment variables."""


class ModelInitializer(Model):
    """Where the pre-trained model is downloaded from before training."""

    storage_uri: StorageUri | None = None
    """URI of the model (scheme://...), e.g. hf://owner/name; may be empty."""
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

    image: Annotated[Str, Field(max_length=c23.ImageMaxLength)] | None = None
    """Container image of the trainer."""
    command: CommandList | None = None
    """Entrypoint of the trainer container."""
    args: CommandList | None = None
    """Arguments of the trainer entrypoint."""
    env: EnvList | None = None
    """Environment variables for the trainer container."""
    num_nodes: Int32 | None = None
    """Number of training nodes."""
    resources_per_node: ResourceRequirements | None = None
    """Compute resources of each training node."""
    num_proc_per_node: Int32 | None = None
    """Processes (workers, MPI slots) per node; an integer at this level."""


class ContainerPatch(Model):
    """Additions to one container of the runtime's pod template."""

    name: BOUNDED_NAME
    """Name of the container; the runtime must have it."""
    env: EnvList | None = None
    """Environment variables merged into the container (not for node or the initializers)."""
    volume_mounts: (
        Annotated[list[VolumeMount], Field(max_length=c23.EnvMaxItems), BY_NAME, UNIQUE_NAME] | None
    ) = None
    """Volume mounts added to the container, by volume name."""
    security_context: SecurityContext | None = None
    """Security context of the container."""


class PodSpecPatch(Model):
    """The pod spec fields a runtime patch may set; the first seven are immutable."""

    service_account_name: Annotated[Str, Field(max_length=c23.NameMaxLength), IMMUTABLE] | None = None
    """Service account of the pods; immutable."""
    volumes: Annotated[list[Volume], Field(max_length=128), BY_NAME_IMMUTABLE, UNIQUE_NAME] | None = None
    """Volumes added to the pods; immutable."""
    init_containers: (
        Annotated[list[ContainerPatch], Field(max_length=64), BY_NAME_IMMUTABLE, UNIQUE_NAME] | None
    ) = None
    """Patches of init containers, by name; immutable."""
    containers: (
        Annotated[list[ContainerPatch], Field(max_length=64), BY_NAME_IMMUTABLE, UNIQUE_NAME] | None
    ) = None
    """Patches of containers, by name; immutable."""
    image_pull_secrets: (
        Annotated[list[LocalObjectReference], Field(max_length=64), BY_NAME_IMMUTABLE, UNIQUE_NAME] | None
    ) = None
    """Secrets used to pull the pods' images; immutable."""
    security_context: Annotated[PodSecurityContext, IMMUTABLE] | None = None
    """Security context of the pods; immutable."""
    node_selector: StringMap | None = None
    """Node labels the pods must be scheduled on."""
    affinity: Affinity | None = None
    """Scheduling affinity of the pods."""
    tolerations: Annotated[list[Toleration], Field(max_length=128), ATOMIC] | None = None
    """Taints the pods tolerate."""
    scheduling_gates: (
        Annotated[list[PodSchedulingGate], Field(max_length=16), BY_NAME, UNIQUE_NAME] | None
    ) = None
    """Scheduling gates added to the pods."""
    termination_grace_period_seconds: Annotated[Int64, Field(ge=0), IMMUTABLE] | None = None
    """Termination grace period of the pods in seconds; immutable."""


class PodTemplatePatch(Model):
    """Patch of the pod template of a Job."""

    metadata: EmbeddedObjectMeta | None = None
    """Labels and annotations merged into the pod template metadata."""
    spec: PodSpecPatch | None = None
    """Fields merged into the pod spec."""


class JobSpecPatch(Model):
    """Patch of a Job spec: its pod template only."""

    template: PodTemplatePatch | None = None
    """Patch of the Job's pod template."""


class JobTemplatePatch(Model):
    """Patch of the Job template of a replicated job."""

    metadata: EmbeddedObjectMeta | None = None
    """Labels and annotations merged into the Job template metadata."""
    spec: JobSpecPatch | None = None
    """Patch of the Job spec."""


class ReplicatedJobPatch(Model):
    """Patch of one replicated job of the runtime, by name."""

    name: BOUNDED_NAME
    """Name of the replicated job to patch."""
    template: JobTemplatePatch | None = None
    """Patch of its Job template."""


class JobSetSpecPatch(Model):
    """Patch of the JobSet spec: per-replicated-job patches only."""

    replicated_jobs: (
        Annotated[
            list[ReplicatedJobPatch], Field(max_length=c23.ReplicatedJobPatchesMaxItems), BY_NAME, UNIQUE_NAME
        ]
        | None
    ) = None
    """Patches of replicated jobs, by name."""


class JobSetTemplatePatch(Model):
    """Patch of the runtime's JobSet template."""

    metadata: EmbeddedObjectMeta | None = None
    """Labels and annotations merged into the JobSet's metadata."""
    spec: JobSetSpecPatch | None = None
    """Patch of the JobSet spec."""


class TrainingRuntimeSpecPatch(Model):
    """The parts of a TrainingRuntimeSpec a runtime patch may change."""

    template: JobSetTemplatePatch | None = None
    """Patch of the JobSet template."""


class RuntimePatch(Model):
    """One manager's patch of the TrainJob's runtime (users, Kueue, admission webhooks)."""

    manager: Annotated[Str, NAME, IMMUTABLE]
    """Who owns the patch, e.g. kueue.x-k8s.io/manager; the list key; immutable."""
    time: Time | None = None
    """When the patch was last written (set by the Trainer's defaulting webhook)."""
    training_runtime_spec: TrainingRuntimeSpecPatch | None = None
    """Patch of a TrainingRuntime or ClusterTrainingRuntime spec."""


class TrainJobSpec(Model):
    """Desired state of a TrainJob."""

    runtime_ref: Annotated[RuntimeRef, IMMUTABLE]
    """Runtime the TrainJob is built from; immutable."""
    initializer: Annotated[Initializer, IMMUTABLE] | None = None
    """Dataset and model initialization; immutable."""
    trainer: Annotated[Trainer, IMMUTABLE] | None = None
    """Trainer settings that override the runtime's; immutable."""
    runtime_patches: (
        Annotated[
            list[RuntimePatch],
            Field(max_length=c23.RuntimePatchesMaxItems),
            Ext(list_type="map", map_keys=("manager",)),
            AfterValidator(_unique_by("manager")),
        ]
        | None
    ) = None
    """Patches of the runtime, applied in order, one per manager."""
    suspend: Bool = False
    """Suspend the TrainJob: its pods are removed until it is resumed."""
    active_deadline_seconds: Annotated[Int64, Field(ge=1), IMMUTABLE] | None = None
    """Seconds the TrainJob may be active (counted from creation or the last resume) before it
    fails with reason DeadlineExceeded; immutable."""
    managed_by: Annotated[
        Str,
        Field(max_length=c23.NameMaxLength),
        Ext(
            rules=(
                Rule(
                    f"self in ['{c.TrainJobControllerName}', '{c.MultiKueueControllerName}']",
                    f"ManagedBy must be {c.TrainJobControllerName} or {c.MultiKueueControllerName} if set",
                ),
                Rule("self == oldSelf", c23.FieldImmutableMessage),
            )
        ),
    ] = c.TrainJobControllerName
    """Controller that reconciles the TrainJob: the Trainer controller or Kueue MultiKueue; immutable."""


class JobStatus(Model):
    """Counts of child Jobs of one replicated job."""

    name: BOUNDED_NAME
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

    conditions: Annotated[ConditionList, Field(max_length=c23.ConditionsMaxItems)] | None = None
    """Latest observations of the TrainJob's state."""
    jobs_status: (
        Annotated[list[JobStatus], Field(max_length=c23.JobsStatusMaxItems), BY_NAME, UNIQUE_NAME] | None
    ) = None
    """Child Job counts per replicated job."""
    trainer_status: TrainerStatus | None = None
    """Latest runtime status the trainer reported: progress, remaining time, metrics (TrainJobStatus gate)."""


class TrainJob(KindModel):
    """A training job built from a TrainingRuntime or ClusterTrainingRuntime."""

    api_version: ClassVar[str] = c.API_VERSION
    kind: ClassVar[str] = c.TrainJobKind
    plural: ClassVar[str] = v2_1.TrainJob.plural
    singular: ClassVar[str] = v2_1.TrainJob.singular
    status_subresource: ClassVar[bool] = True
    printer_columns: ClassVar[tuple[dict[str, str], ...]] = v2_1.TrainJob.printer_columns
    k8s_rules: ClassVar[tuple[Rule, ...]] = v2_1.TrainJob.k8s_rules

    metadata: ObjectMeta | None = None
    spec: TrainJobSpec | None = None
    """Desired state of the TrainJob."""
    status: TrainJobStatus | None = None
    """Observed state of the TrainJob."""


# -- runtimes ---------------------------------------------------------------------------------


class EnvInjectionTarget(Model):
    """A replicated job and the containers in it that also get the framework's env vars."""

    job_name: BOUNDED_NAME
    """Name of the replicated job, e.g. node."""
    container_names: Annotated[
        list[Annotated[Str, Field(max_length=c23.EnvInjectionContainerNameMaxLength)]],
        Field(min_length=1, max_length=c23.EnvInjectionContainerNamesMaxItems),
        Ext(
            list_type="set",
            rules=(Rule("!self.exists(c, c == 'node')", c23.EnvInjectionNodeContainerMessage),),
        ),
    ]
    """Containers of that job that get the PET_* env vars; not node, which always gets them."""


class EnvInjection(Model):
    """Which containers besides the main node container get the framework's env vars."""

    targets: (
        Annotated[
            list[EnvInjectionTarget],
            Field(max_length=c23.EnvInjectionTargetsMaxItems),
            Ext(list_type="map", map_keys=("jobName",)),
            AfterValidator(_unique_by("jobName")),
        ]
        | None
    ) = None
    """Target containers, by replicated job."""


class TorchMLPolicySource(Model):
    """PyTorch distributed training (torchrun)."""

    env_injection: EnvInjection | None = None
    """Sidecar or init containers that also get the PET_* env vars; the node container only by default."""


class MPIMLPolicySource(Model):
    """MPI training: a launcher starts the processes on the nodes over SSH."""

    num_proc_per_node: Int32 = 1
    """Slots per node in the hostfile."""
    mpi_implementation: Literal["OpenMPI", ""] = "OpenMPI"
    """MPI implementation; only OpenMPI is supported."""
    ssh_auth_mount_path: Annotated[Str, Field(max_length=c23.SSHAuthMountPathMaxLength)] = "/root/.ssh"
    """Directory where the SSH keys are mounted."""
    run_launcher_as_node: Bool = False
    """Whether the launcher also runs training processes."""


class FluxMLPolicySource(Model):
    """Flux Framework HPC training: Flux is installed into the pods and launches the processes."""

    num_proc_per_node: Annotated[Int32, Ext(rules=(Rule("self >= 1", c23.FluxNumProcPerNodeMessage),))] = 1
    """Processes per node; at least 1."""


class JAXMLPolicySource(Model):
    """JAX distributed training (no settings: the plugin derives everything)."""


class XGBoostMLPolicySource(Model):
    """XGBoost distributed training (workers per node follow the GPUs, one per node without GPUs)."""


class MLPolicy(Model):
    """Machine-learning framework settings of a runtime; at most one framework."""

    k8s_rules: ClassVar[tuple[Rule, ...]] = (
        Rule(
            "[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost),has(self.flux)]"
            ".filter(x, x).size() <= 1",
            c23.OnePolicyMessage,
        ),
    )

    num_nodes: Int32 | None = None
    """Number of training nodes."""
    torch: TorchMLPolicySource | None = None
    """PyTorch settings."""
    mpi: MPIMLPolicySource | None = None
    """MPI settings."""
    flux: FluxMLPolicySource | None = None
    """Flux settings."""
    jax: JAXMLPolicySource | None = None
    """JAX settings."""
    xgboost: XGBoostMLPolicySource | None = None
    """XGBoost settings."""


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
    plural: ClassVar[str] = v2_1.TrainingRuntime.plural
    singular: ClassVar[str] = v2_1.TrainingRuntime.singular

    metadata: ObjectMeta | None = None
    spec: TrainingRuntimeSpec | None = None
    """Desired state of the runtime."""


class ClusterTrainingRuntime(KindModel):
    """A cluster-wide blueprint for TrainJobs in any namespace."""

    api_version: ClassVar[str] = c.API_VERSION
    kind: ClassVar[str] = c.ClusterTrainingRuntimeKind
    plural: ClassVar[str] = v2_1.ClusterTrainingRuntime.plural
    singular: ClassVar[str] = v2_1.ClusterTrainingRuntime.singular
    namespaced: ClassVar[bool] = False

    metadata: ObjectMeta | None = None
    spec: TrainingRuntimeSpec | None = None
    """Desired state of the runtime."""


__all__ = [
    "ClusterTrainingRuntime",
    "ContainerPatch",
    "CoschedulingPodGroupPolicySource",
    "DatasetInitializer",
    "EnvInjection",
    "EnvInjectionTarget",
    "FluxMLPolicySource",
    "Initializer",
    "JAXMLPolicySource",
    "JobSetSpecPatch",
    "JobSetTemplatePatch",
    "JobSetTemplateSpec",
    "JobSpecPatch",
    "JobStatus",
    "JobTemplatePatch",
    "MLPolicy",
    "MPIMLPolicySource",
    "Metric",
    "ModelInitializer",
    "PodGroupPolicy",
    "PodSpecPatch",
    "PodTemplatePatch",
    "ReplicatedJobPatch",
    "RuntimePatch",
    "RuntimeRef",
    "TorchMLPolicySource",
    "TrainJob",
    "TrainJobSpec",
    "TrainJobStatus",
    "Trainer",
    "TrainerStatus",
    "TrainingRuntime",
    "TrainingRuntimeSpec",
    "TrainingRuntimeSpecPatch",
    "VolcanoNetworkTopology",
    "VolcanoPodGroupPolicySource",
    "XGBoostMLPolicySource",
]
