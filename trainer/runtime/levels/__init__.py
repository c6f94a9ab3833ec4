"""What the runtime framework, the TrainJob controller and the webhooks take from an API level
(trainer/levels, docs/levels.md).

The runtime's steps are shared by every level except where a TrainJob says how its runtime is
customised: v2.1 has ``spec.labels``/``spec.annotations`` and ``podTemplateOverrides``, v2.3
has ``runtimePatches``. Each level's way lives in its own module here (``v2_1.py``,
``v2_3.py``) behind the ``RuntimeLevel`` Protocol; ``trainer/levels`` hands the chosen one to
the runtimes through the ``SetupContext``.

The same value carries the few steps of the TrainJob reconciler and of admission that differ
between the lines (docs/levels.md "Level v2.3"): whether a TrainJob is reconciled here at all
(``managedBy``), its active deadline, how its status is written, which events API the
controller reports through, the validation rules of the built-in plugins that differ, and
whether a TrainJob defaulting webhook is served. The shared code calls these; it
never asks which level it runs.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from manager.client.interfaces import Reader
from manager.events import Recorder, Recorders
from manager.meta.field import FieldError
from manager.meta.object import Json
from trainer.api.trainer_v1alpha1 import JobSetTemplateSpec, MLPolicy, Trainer, TrainJob
from trainer.runtime.info import ContainerInfo, Info

__all__ = [
    "MPISSHAuthModes",
    "Recorders",
    "RuntimeBuild",
    "RuntimeFinalizer",
    "RuntimeLevel",
    "RuntimeSource",
    "StatusWrite",
    "TorchTuneRules",
    "TrainJobDeadline",
]


class TrainJobDeadline(Protocol):
    """``spec.activeDeadlineSeconds``: what the reconciler does about it (v2.1: nothing)."""

    def keep(self, before: Json, computed: Json) -> Json:
        """The status after the runtime's status plugin (``computed``), with what of the status
        before it (``before``) the level keeps over it."""
        ...

    def passed(self, trainjob: Json, status: Json, clock: Callable[[], datetime.datetime]) -> bool:
        """Whether the deadline has already passed as the pass starts (``status``: the status
        it read): the pass then builds nothing and ``enforce`` fails the TrainJob."""
        ...

    async def enforce(
        self,
        client: Any,
        trainjob: Json,
        original: Json,
        status: Json,
        clock: Callable[[], datetime.datetime],
        now: Callable[[], str],
    ) -> float | None:
        """Fail ``status`` (in place) once the deadline has passed (``remove_jobset`` then deletes
        the JobSet); else the seconds until it passes (the reconciler requeues then), or None:
        nothing to wait for.
        ``original`` is the status the reconcile started from, ``clock`` the precise time,
        ``now`` the condition stamp."""
        ...

    async def remove_jobset(self, client: Any, trainjob: Json, original: Json, status: Json) -> str | None:
        """Delete the JobSet of a TrainJob the deadline failed (``status``; ``original``: the
        status the reconcile started from); the error text when the delete fails, else None."""
        ...


class StatusWrite(Protocol):
    """How the reconciler writes a changed TrainJob status (v2.1: PUT; v2.3: merge patch)."""

    async def write(self, client: Any, trainjob: Json, original: Json, status: Json, field_owner: str) -> Any:
        """Write ``status`` (it differs from ``original``); returns what the server stored.
        ``trainjob`` is the TrainJob the status belongs to (the write may change it)."""
        ...


class RuntimeFinalizer(Protocol):
    """The ``resource-in-use`` finalizer of TrainingRuntimes and ClusterTrainingRuntimes
    (v2.1: kept while TrainJobs reference the runtime; v2.3: only removed)."""

    @property
    def follows_trainjobs(self) -> bool:
        """Whether TrainJob events reconcile the runtime they reference (v2.1.0's TrainJob
        controller watchers); else only the runtimes' own events do."""
        ...

    async def reconcile(
        self, client: Any, runtime: Json, referencing: Callable[[], Awaitable[list[Json]]]
    ) -> None:
        """Bring the finalizer of ``runtime`` (as the cache has it) to what the level wants,
        writing it through ``client``; ``referencing`` lists the TrainJobs naming it."""
        ...


class RuntimeSource(Protocol):
    """How the runtime a TrainJob is built from is obtained (v2.1: the live runtime; v2.3: the
    TrainJob's snapshot ConfigMap first, ``v2_3_snapshot.py``)."""

    async def obtain(
        self,
        client: Any,
        reader: Reader,
        trainjob: TrainJob,
        live: Callable[[], Awaitable[Json]],
        snapshot_error: str,
    ) -> Json:
        """The runtime document for ``trainjob``: ``live`` reads the runtime it names (raising
        what the caller reports as a missing runtime); what else is read goes through
        ``reader``, what is written through ``client``. A snapshot that cannot be read or is
        invalid is a ``RuntimeFailure`` prefixed ``snapshot_error`` (the runtime kind's words)."""
        ...


class TorchTuneRules(Protocol):
    """The Torch plugin's torchtune rules that differ from v2.1.0's (``plugins/torchtune.py``
    has v2.1.0's; v2.3: ``v2_3_torchtune.py``)."""

    @property
    def default_num_nodes(self) -> int | None:
        """The node count of a TrainJob without ``numNodes`` (None: it is refused as required)."""
        ...

    def uses_qlora(self, args: list[str] | None) -> bool:
        """Whether the TrainJob's args ask for QLoRA (the recipe and config follow from it)."""
        ...

    def extra_errors(self, trainer: Trainer, num_nodes: int) -> list[FieldError]:
        """The level's errors after the shared rules (model, nodes, QLoRA sizes)."""
        ...


class RuntimeBuild(Protocol):
    """The steps of building a TrainJob's objects that moved or changed between the lines
    (v2.1: ``v2_1_build.py``; v2.3: ``v2_3_build.py``, docs/behaviour/trainer.md §12.14)."""

    def node_resources(self, trainjob: TrainJob, jobset_spec: Json, ml_policy: MLPolicy | None) -> None:
        """``newRuntimeInfo``, before the PodSets: the TrainJob's ``resourcesPerNode`` onto the
        runtime's trainer ``node`` container, in place (v2.3: merged per resource name; v2.1:
        nothing here, the JobSet builder replaces them)."""
        ...

    def jobset_node_resources(self, container: Json, trainer: Trainer) -> None:
        """JobSet builder: the TrainJob's ``resourcesPerNode`` onto a trainer ``node``
        container of the JobSet document (v2.1: replaced; v2.3: nothing, already merged)."""
        ...

    def endpoint_replicas(self, rjob: Json) -> int:
        """JobSet ``IdentifyPodNetwork``: the replicas of a replicated job its PodSet has
        endpoints for (v2.1: one; v2.3: the job's ``replicas``)."""
        ...

    def sync_parallel_count(self, builders: Sequence[object], info: Info | None) -> None:
        """Before any component builder builds: v2.3 runs every builder's
        ``sync_parallel_count`` (JobSet: the PodSets' counts into the jobs' parallelism and
        completions, by name); v2.1 nothing."""
        ...

    def build_counts(self, jobset_spec: Json, info: Info) -> None:
        """JobSet ``Build``, before the PodSets are synced into the document: v2.1 writes their
        counts by index; v2.3 refuses a document with fewer jobs than PodSets."""
        ...

    def torch_env_targets(self, info: Info) -> list[ContainerInfo]:
        """Torch plugin: the containers besides the trainer's that get the ``PET_*`` env
        (v2.3: the runtime's ``mlPolicy.torch.envInjection.targets``; v2.1: none). A target
        not found is a ``RuntimeFailure``."""
        ...

    def volume_claim_policies(self, jobset_spec: Json) -> None:
        """JobSet ``Build``: the document's ``volumeClaimPolicies`` as the JobSet stores them,
        in place, so that applying it again changes nothing (v2.3: Go's encoding and JobSet
        v0.12.0's create-time default retention policy; v2.1: nothing, JobSet v0.10.1 has no
        such field)."""
        ...


@dataclass(frozen=True)
class MPISSHAuthModes:
    """The file modes of the MPI plugin's SSH key Secret volume (v2.3: set; v2.1: the kubelet's
    default 0644 for every file)."""

    default: int
    """The volume's ``defaultMode``."""
    private_key: int
    """``id_rsa``'s ``mode``."""
    public_key: int
    """``id_rsa.pub``'s and ``authorized_keys``' ``mode``."""


class RuntimeLevel(Protocol):
    """The level-specific steps of ``newRuntimeInfo`` (docs/behaviour/trainer.md §2.4), of the
    TrainJob reconciler and of admission."""

    name: str

    def jobset_metadata(
        self, trainjob: TrainJob, template: JobSetTemplateSpec | None
    ) -> tuple[dict[str, str], dict[str, str]]:
        """Step 1: the JobSet's labels and annotations."""
        ...

    def customise_jobset_spec(self, trainjob: TrainJob, jobset_spec: Json) -> None:
        """Step 2: the TrainJob's changes to the runtime's JobSetSpec document, in place."""
        ...

    # -- the TrainJob reconciler ----------------------------------------------------------

    def reconciles(self, trainjob: Json) -> bool:
        """Whether the TrainJob controller reconciles this TrainJob (v2.3: ``managedBy``)."""
        ...

    @property
    def deadline(self) -> TrainJobDeadline:
        """``spec.activeDeadlineSeconds``."""
        ...

    @property
    def status_write(self) -> StatusWrite:
        """How a changed status is written."""
        ...

    def trainjob_event_recorder(self, recorders: Recorders, component: str) -> Recorder:
        """The TrainJob controller's event recorder, named ``component``."""
        ...

    @property
    def runtime_source(self) -> RuntimeSource:
        """How the TrainJob reconciler gets the runtime a TrainJob is built from."""
        ...

    # -- the runtime reconcilers ----------------------------------------------------------

    @property
    def runtime_finalizer(self) -> RuntimeFinalizer:
        """What the TrainingRuntime and ClusterTrainingRuntime reconcilers do."""
        ...

    # -- the plugins ----------------------------------------------------------------------

    @property
    def build(self) -> RuntimeBuild:
        """The build steps that differ (resourcesPerNode, endpoints, parallelism, envInjection)."""
        ...

    @property
    def mpi_ssh_auth_modes(self) -> MPISSHAuthModes | None:
        """MPI plugin: the modes of the SSH key Secret volume (None: none set)."""
        ...

    @property
    def ml_policy_plugins(self) -> tuple[str, ...]:
        """The built-in ML-policy plugins only this level registers, by registry name (v2.3:
        ``JAX``, ``XGBoost``, ``Flux``); ``plugins/__init__.py`` runs them after Torch."""
        ...

    @property
    def plainml_skips(self) -> tuple[str, ...]:
        """PlainML plugin: the ML policies besides ``torch`` and ``mpi`` (``mlPolicy`` field
        names) whose runtimes it leaves alone (v2.3: ``jax``; an ``xgboost`` or ``flux``
        runtime is still PlainML's)."""
        ...

    # -- admission ------------------------------------------------------------------------

    @property
    def runtime_deprecation_policy_url(self) -> str:
        """The policy the TrainJob webhook's warning about a deprecated ClusterTrainingRuntime
        links to (it moved to the Trainer docs site in v2.2)."""
        ...

    @property
    def initializer_volume(self) -> str | None:
        """JobSet plugin: the volume the dataset and model initializer containers of the
        runtime must mount when the TrainJob configures them (v2.3: ``initializer``); None:
        no such rule."""
        ...

    async def validate_customisation(
        self,
        reader: Reader,
        old: TrainJob | None,
        new: TrainJob,
        containers_by_job: Mapping[str, set[str]],
    ) -> list[FieldError]:
        """JobSet plugin: the TrainJob's customisation of its runtime (v2.1
        ``podTemplateOverrides``, v2.3 ``runtimePatches``) against the runtime's replicated jobs
        and their containers (``containers_by_job``), and when it may change (``old``: the
        TrainJob before an update; the JobSet is read through ``reader``)."""
        ...

    def validate_torch(self, info: Info, trainer: Trainer | None) -> tuple[list[FieldError], bool]:
        """Torch plugin, for a runtime with a torch policy: the level's own errors, and whether
        the shared rules (reserved env names, torchtune) run after them."""
        ...

    def validate_mpi(self, trainer: Trainer | None) -> tuple[list[FieldError], list[FieldError]]:
        """MPI plugin, for a runtime with an MPI policy: the level's errors before and after the
        shared ``numNodes`` rule."""
        ...

    @property
    def torchtune(self) -> TorchTuneRules | None:
        """Torch plugin: the torchtune rules of the level (None: v2.1.0's)."""
        ...

    @property
    def trainer_go_types(self) -> str:
        """The Go types the Trainer webhooks decode TrainJobs, TrainingRuntimes and
        ClusterTrainingRuntimes with (a ``trainer.api.gocodec`` types file: the trainer binary
        of the level)."""
        ...

    @property
    def trainjob_defaulter(self) -> str | None:
        """The MutatingWebhookConfiguration of the TrainJob defaulting webhook the level serves
        (``webhooks/trainjob_defaulter.py``); None: the level has none."""
        ...
