"""Level v2.3's customisation of a runtime (Trainer v2.3.0 ``newRuntimeInfo`` and
``mergeRuntimePatches``, docs/levels.md): ``spec.runtimePatches``, applied in list order.

* Step 1: the runtime template's labels and annotations, then each patch's
  ``trainingRuntimeSpec.template.metadata`` labels and annotations over them (later wins).
* Step 2: each patch's ``trainingRuntimeSpec.template.spec``, as Go encodes the typed patch
  (``v2_3_patch.py``), strategic-merged onto the whole JobSetSpec (JobSet v0.12's patch tags:
  ``replicatedJobs`` by ``name``; inside, the pod template as core/v1 merges it), then the
  runtime's order of the replicated jobs restored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from manager.client.interfaces import Reader
from manager.events import Recorder
from manager.meta.field import FieldError
from manager.meta.object import Json
from manager.meta.strategicmerge import JOB_TEMPLATE_SPEC, Schema, strategic_merge
from trainer.api import gocodec
from trainer.api.trainer_v1alpha1 import JobSetTemplateSpec, Trainer, TrainJob
from trainer.api.v2_3 import trainer_constants as c23
from trainer.runtime.info import Info
from trainer.runtime.levels import MPISSHAuthModes, Recorders, TorchTuneRules
from trainer.runtime.levels.managed_by import is_managed_by_external_controller
from trainer.runtime.levels.v2_3_admission import (
    INITIALIZER_VOLUME,
    validate_env_injection_targets,
    validate_mpi_reserved_envs,
    validate_runtime_patches,
)
from trainer.runtime.levels.v2_3_build import MERGE_IN_RUNTIME_INFO
from trainer.runtime.levels.v2_3_deadline import ACTIVE_DEADLINE
from trainer.runtime.levels.v2_3_finalizer import REMOVE_ONLY
from trainer.runtime.levels.v2_3_patch import marshal_spec_patch
from trainer.runtime.levels.v2_3_snapshot import SNAPSHOT_FIRST
from trainer.runtime.levels.v2_3_status import MERGE_PATCH_STATUS
from trainer.runtime.levels.v2_3_torchtune import BOOL_ARGS

__all__ = [
    "JOBSET_SPEC",
    "MPI_SSH_AUTH_MODES",
    "TRAINJOB_DEFAULTER",
    "TRAINJOB_EVENT_ACTION",
    "V2_3",
    "V2_3Runtime",
    "is_managed_by_external_controller",
    "runtime_patches",
    "spec_patch",
]

JOBSET_SPEC = Schema(
    lists={
        "replicatedJobs": ("name", Schema(fields={"template": JOB_TEMPLATE_SPEC})),
    }
)
"""jobset/v1alpha2 JobSetSpec's patch tags (v0.12.0): replicated jobs merge by name."""


def runtime_patches(trainjob: TrainJob) -> list[Json]:
    """``spec.runtimePatches`` as JSON, in list order."""
    spec = trainjob.spec.to_dict() if trainjob.spec is not None else {}
    patches = spec.get("runtimePatches") or []
    return [p for p in patches if isinstance(p, dict)]


def _template(patch: Mapping[str, Any]) -> Json:
    runtime_spec = patch.get("trainingRuntimeSpec")
    template = runtime_spec.get("template") if isinstance(runtime_spec, dict) else None
    return template if isinstance(template, dict) else {}


def spec_patch(patch: Mapping[str, Any]) -> Json | None:
    """The strategic-merge patch one runtime patch makes to the JobSetSpec (None: none): its
    ``template.spec`` as Go's ``json.Marshal`` of the typed ``JobSetSpecPatch`` writes it
    (``v2_3_patch.py``: empty non-pointer values dropped, ``emptyDir: {}`` kept, quantities
    canonical, the templates' whole ``metadata``)."""
    spec = _template(patch).get("spec")
    if not isinstance(spec, dict):
        return None
    return marshal_spec_patch(spec)


def merge_runtime_patches(jobset_spec: Json, patches: list[Json]) -> Json:
    """Every patch onto the JobSetSpec in order; the runtime's replicated-job order kept."""
    order = {rjob.get("name"): i for i, rjob in enumerate(jobset_spec.get("replicatedJobs") or ())}
    merged = jobset_spec
    for patch in patches:
        document = spec_patch(patch)
        if document is None:
            continue
        merged = strategic_merge(merged, document, JOBSET_SPEC)
    if "replicatedJobs" in merged:
        # a job the runtime does not have sorts first, as Go's zero value from a missing map key
        merged["replicatedJobs"] = sorted(
            merged["replicatedJobs"], key=lambda rjob: order.get(rjob.get("name"), 0)
        )
    return merged


MPI_SSH_AUTH_MODES = MPISSHAuthModes(default=0o400, private_key=0o640, public_key=0o644)
"""The MPI plugin's SSH key Secret volume (v2.3.0 ``pkg/constants``): owner read-only for any
item without a mode, the private key owner read-write and group read, the public key and
``authorized_keys`` also world-readable."""

TRAINJOB_DEFAULTER = "defaulter.trainer.kubeflow.org"
"""v2.3.0's MutatingWebhookConfiguration (config/overlays/v2.3/webhook/defaulter.yaml)."""

TRAINJOB_EVENT_ACTION = "Reconciling"
"""The ``action`` of the TrainJob controller's events (``Eventf(..., reason, "Reconciling", ...)``)."""


class V2_3Runtime:
    """``RuntimeLevel`` of v2.3."""

    name = "v2.3"
    deadline = ACTIVE_DEADLINE
    """``spec.activeDeadlineSeconds`` (``v2_3_deadline.py``)."""
    status_write = MERGE_PATCH_STATUS
    """A merge patch of the status subresource (``v2_3_status.py``)."""
    trainjob_defaulter: str | None = TRAINJOB_DEFAULTER
    """The TrainJob defaulter's MutatingWebhookConfiguration (``webhooks/trainjob_defaulter.py``
    stamps ``runtimePatches[].time``)."""
    runtime_finalizer = REMOVE_ONLY
    """``resource-in-use`` only removed, no TrainJob watchers (``v2_3_finalizer.py``)."""
    runtime_source = SNAPSHOT_FIRST
    """The TrainJob's ``<name>-runtime-snapshot`` ConfigMap first (``v2_3_snapshot.py``)."""
    mpi_ssh_auth_modes: MPISSHAuthModes | None = MPI_SSH_AUTH_MODES
    """v2.3.0's ``MPISSHAuthDefaultMode``, ``MPISSHPrivateKeyFileMode``, ``MPISSHPublicKeyFileMode``."""
    build = MERGE_IN_RUNTIME_INFO
    """resourcesPerNode merged per resource name, endpoints of every replica, SyncParallelCount,
    torch envInjection (``v2_3_build.py``)."""
    ml_policy_plugins: tuple[str, ...] = ("JAX", "XGBoost", "Flux")
    """v2.3.0's ``jax``, ``xgboost`` and ``flux`` plugins (``plugins/jax.py``, ``xgboost.py``,
    ``flux.py``)."""
    plainml_skips: tuple[str, ...] = ("jax",)
    """v2.3.0's PlainML also skips JAX runtimes (not XGBoost or Flux ones: it sets their count
    and env)."""

    def reconciles(self, trainjob: Json) -> bool:
        """Only TrainJobs the Trainer's own controller manages (v2.3.0's early return,
        ``managed_by.py``). Kueue's MultiKueue (``kueue.x-k8s.io/multikueue``) runs the TrainJob
        elsewhere and mirrors its status here itself."""
        return not is_managed_by_external_controller(trainjob)

    def trainjob_event_recorder(self, recorders: Recorders, component: str) -> Recorder:
        """events.k8s.io/v1 Events (v2.3.0's ``mgr.GetEventRecorder``), reporting controller
        ``component``, action ``Reconciling`` (the one upstream's TrainJob controller writes)."""
        return recorders.events_recorder(component, TRAINJOB_EVENT_ACTION)

    runtime_deprecation_policy_url = c23.RuntimeDeprecationPolicyURL
    initializer_volume: str | None = INITIALIZER_VOLUME
    """The initializer containers mount the ``initializer`` volume (``v2_3_admission.py``)."""
    torchtune: TorchTuneRules | None = BOOL_ARGS
    """QLoRA by the args' values, one node by default, no LoRA on several nodes, no managed
    configs in the args (``v2_3_torchtune.py``)."""
    trainer_go_types = gocodec.TRAINER_V2_3_TYPES_FILE
    """The trainer v2.3.0 binary's types (with jobset v0.12.0, k8s.io/api v0.36.2)."""

    async def validate_customisation(
        self,
        reader: Reader,
        old: TrainJob | None,
        new: TrainJob,
        containers_by_job: Mapping[str, set[str]],
    ) -> list[FieldError]:
        """``runtimePatches``: when they may change, the jobs and containers they name."""
        return await validate_runtime_patches(reader, old, new, containers_by_job)

    def validate_torch(self, info: Info, trainer: Trainer | None) -> tuple[list[FieldError], bool]:
        """The torch policy's ``envInjection`` targets; the shared rules always follow."""
        return validate_env_injection_targets(info), True

    def validate_mpi(self, trainer: Trainer | None) -> tuple[list[FieldError], list[FieldError]]:
        """After the shared rule: the reserved OpenMPI env names."""
        return [], validate_mpi_reserved_envs(trainer)

    def jobset_metadata(
        self, trainjob: TrainJob, template: JobSetTemplateSpec | None
    ) -> tuple[dict[str, str], dict[str, str]]:
        labels = dict((template.metadata.labels if template and template.metadata else None) or {})
        annotations = dict((template.metadata.annotations if template and template.metadata else None) or {})
        for patch in runtime_patches(trainjob):
            metadata = _template(patch).get("metadata")
            if isinstance(metadata, dict):
                labels.update(metadata.get("labels") or {})
                annotations.update(metadata.get("annotations") or {})
        return labels, annotations

    def customise_jobset_spec(self, trainjob: TrainJob, jobset_spec: Json) -> None:
        merged = merge_runtime_patches(jobset_spec, runtime_patches(trainjob))
        if merged is not jobset_spec:
            jobset_spec.clear()
            jobset_spec.update(merged)


V2_3 = V2_3Runtime()
