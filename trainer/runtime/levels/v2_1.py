"""Level v2.1's customisation of a runtime (Trainer v2.1.0; docs/behaviour/trainer.md §2.4
steps 1 and 2): ``spec.labels``/``spec.annotations`` over the runtime template's, and the
``podTemplateOverrides`` strategic-merged into the targeted replicated jobs' pod templates.

Its reconciler and admission steps are Trainer v2.1.0's (docs/behaviour/trainer.md §3, §5) but
for ``managedBy``: a TrainJob of another controller is left alone, as v2.3.0 does (divergence
T-18); there is no active deadline, a changed status is PUT (resourceVersion-checked), events
are core/v1 Events and no TrainJob defaulting webhook is served. The plugins' rules of this
level (§2.7-§2.10): ``podTemplateOverrides`` name existing jobs and containers and change only
while suspended; ``numProcPerNode`` is an integer or ``auto``/``cpu``/``gpu`` for torch (and
the torch rules are skipped without it), an integer for MPI.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from manager.client.interfaces import Reader
from manager.events import Recorder
from manager.meta.field import FieldError
from manager.meta.object import Json
from manager.meta.strategicmerge import POD_TEMPLATE_SPEC, strategic_merge
from trainer.api import gocodec
from trainer.api import trainer_constants as tc
from trainer.api.trainer_v1alpha1 import JobSetTemplateSpec, PodTemplateOverride, Trainer, TrainJob
from trainer.runtime.info import Info
from trainer.runtime.levels import MPISSHAuthModes, Recorders, TorchTuneRules
from trainer.runtime.levels.active_jobs import refuse_while_jobs_are_active
from trainer.runtime.levels.managed_by import is_managed_by_external_controller
from trainer.runtime.levels.v2_1_build import REPLACE_IN_BUILDER
from trainer.runtime.levels.v2_1_finalizer import KEEP_WHILE_REFERENCED

__all__ = [
    "LIVE_RUNTIME",
    "NO_DEADLINE",
    "PUT_STATUS",
    "V2_1",
    "V2_1Runtime",
    "apply_pod_template_overrides",
    "jobset_annotations",
    "jobset_labels",
    "override_patch",
]


def jobset_labels(trainjob: TrainJob, template: JobSetTemplateSpec | None) -> dict[str, str]:
    """Runtime template labels overlaid with the TrainJob's ``spec.labels`` (the TrainJob wins)."""
    labels = dict((template.metadata.labels if template and template.metadata else None) or {})
    labels.update((trainjob.spec.labels if trainjob.spec else None) or {})
    return labels


def jobset_annotations(trainjob: TrainJob, template: JobSetTemplateSpec | None) -> dict[str, str]:
    """Runtime template annotations overlaid with the TrainJob's ``spec.annotations``."""
    annotations = dict((template.metadata.annotations if template and template.metadata else None) or {})
    annotations.update((trainjob.spec.annotations if trainjob.spec else None) or {})
    return annotations


def _omit_empty(value: Any) -> Any:
    """Go's ``omitempty`` on the override types: no nulls and no empty lists reach the patch."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            cleaned = _omit_empty(item)
            if cleaned is None or cleaned == []:
                continue
            out[key] = cleaned
        return out
    if isinstance(value, list):
        return [_omit_empty(item) for item in value]
    return value


def override_patch(override: PodTemplateOverride) -> Json:
    """The strategic-merge patch document of one ``podTemplateOverrides`` entry."""
    patch: Json = {}
    meta = override.metadata
    if meta is not None and (meta.labels or meta.annotations):
        patch["metadata"] = {}
        if meta.labels:
            patch["metadata"]["labels"] = dict(meta.labels)
        if meta.annotations:
            patch["metadata"]["annotations"] = dict(meta.annotations)
    if override.spec is not None:
        spec = _omit_empty(override.spec.to_dict())
        if isinstance(spec.get("nodeSelector"), dict) and not spec["nodeSelector"]:
            del spec["nodeSelector"]
        if spec:
            patch["spec"] = spec
    return patch


def apply_pod_template_overrides(jobset_spec: Json, overrides: list[PodTemplateOverride] | None) -> None:
    """Patch each targeted replicated job's pod template, entries in order (later ones win)."""
    for override in overrides or ():
        targets = {t.name for t in override.target_jobs}
        patch = override_patch(override)
        if not patch:
            continue
        for rjob in jobset_spec.get("replicatedJobs") or ():
            if rjob.get("name") in targets:
                job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
                job_spec["template"] = strategic_merge(
                    job_spec.get("template") or {}, patch, POD_TEMPLATE_SPEC
                )


class NoDeadline:
    """``TrainJobDeadline`` of v2.1: the field does not exist; nothing is kept, nothing enforced."""

    def keep(self, before: Json, computed: Json) -> Json:
        return computed

    def passed(self, trainjob: Json, status: Json, clock: Callable[[], datetime.datetime]) -> bool:
        return False

    async def enforce(
        self,
        client: Any,
        trainjob: Json,
        original: Json,
        status: Json,
        clock: Callable[[], datetime.datetime],
        now: Callable[[], str],
    ) -> float | None:
        return None

    async def remove_jobset(self, client: Any, trainjob: Json, original: Json, status: Json) -> str | None:
        return None


class PutStatus:
    """``StatusWrite`` of v2.1: upstream's typed ``Status().Update``, resourceVersion-checked
    (a stale one answers 409 Conflict, which the reconciler takes as cache lag)."""

    _codec = gocodec.codec_for("trainer.kubeflow.org/v1alpha1", "TrainJob")

    async def write(self, client: Any, trainjob: Json, original: Json, status: Json, field_owner: str) -> Any:
        # the whole struct as Go re-encodes it ...
        trainjob["status"] = status
        self._codec.encode(trainjob)
        if not trainjob["status"]:
            # ... except an empty status, which Go sends as {} and the CRD (minProperties: 1)
            # rejects (T-11): the PUT without it clears the status instead.
            trainjob.pop("status")
        return await client.status.update(trainjob, field_owner=field_owner)


NO_DEADLINE = NoDeadline()
PUT_STATUS = PutStatus()

NUM_PROC_PER_NODE_WORDS = (tc.NumProcPerNodeAuto, tc.NumProcPerNodeCPU, tc.NumProcPerNodeGPU)


def _overrides_dump(trainjob: TrainJob) -> list[Json]:
    return [o.to_dict() for o in (trainjob.spec.pod_template_overrides if trainjob.spec else None) or []]


async def validate_override_immutability(
    reader: Reader, old: TrainJob | None, new: TrainJob
) -> list[FieldError]:
    """``podTemplateOverrides`` change only while the TrainJob is suspended, and not while its
    JobSet still has active jobs (``checkPodTemplateOverridesImmutability``)."""
    if old is None or old.spec is None or new.spec is None:
        return []
    if _overrides_dump(old) == _overrides_dump(new):
        return []
    path = "spec.podTemplateOverrides"
    if not new.spec.suspend:
        return [
            FieldError.forbidden(
                path, "PodTemplateOverrides can only be modified when the TrainJob is suspended"
            )
        ]
    return await refuse_while_jobs_are_active(reader, new, path, "PodTemplateOverrides")


def validate_override_targets(new: TrainJob, containers_by_job: Mapping[str, set[str]]) -> list[FieldError]:
    """Every override names jobs and containers the runtime has; no env for node or the
    initializers."""
    overrides = (new.spec.pod_template_overrides if new.spec else None) or []
    bad_value = [o.to_dict() for o in overrides]

    def invalid(detail: str) -> FieldError:
        # Upstream reports every override error on the whole list.
        return FieldError.invalid("spec.podTemplateOverrides", bad_value, detail)

    errors: list[FieldError] = []
    for override in overrides:
        for target in override.target_jobs:
            known = containers_by_job.get(target.name)
            if known is None:
                errors.append(
                    invalid("must not have targetJob that doesn't exist in the runtime job template")
                )
                known = set()
            if override.spec is None:
                continue
            for container in override.spec.init_containers or ():
                if container.name not in known:
                    errors.append(
                        invalid(
                            f"must not have initContainer that doesn't exist in the runtime job {target.name}"
                        )
                    )
            for container in override.spec.containers or ():
                if container.name not in known:
                    errors.append(
                        invalid(
                            f"must not have container that doesn't exist in the runtime job {target.name}"
                        )
                    )
                elif container.env and container.name in (
                    tc.DatasetInitializer,
                    tc.ModelInitializer,
                    tc.Node,
                ):
                    errors.append(
                        invalid(
                            "must not have envs for the dataset-initializer, model-initializer, node containers"
                        )
                    )
    return errors


class LiveRuntime:
    """``RuntimeSource`` of v2.1: the runtime as it is now (v2.1.0 keeps no snapshot)."""

    async def obtain(
        self,
        client: Any,
        reader: Reader,
        trainjob: TrainJob,
        live: Callable[[], Awaitable[Json]],
        snapshot_error: str,
    ) -> Json:
        return await live()


LIVE_RUNTIME = LiveRuntime()


class V2_1Runtime:
    """``RuntimeLevel`` of v2.1."""

    name = "v2.1"
    deadline = NO_DEADLINE
    status_write = PUT_STATUS
    trainjob_defaulter: str | None = None
    runtime_finalizer = KEEP_WHILE_REFERENCED
    """Added while TrainJobs reference the runtime (``v2_1_finalizer.py``)."""
    runtime_source = LIVE_RUNTIME
    """Every reconcile reads the runtime as it is now."""
    mpi_ssh_auth_modes: MPISSHAuthModes | None = None
    build = REPLACE_IN_BUILDER
    """resourcesPerNode replaced by the JobSet builder, one replica's endpoints, counts in
    ``Build`` (``v2_1_build.py``)."""
    ml_policy_plugins: tuple[str, ...] = ()
    """No ML-policy plugins beyond the shared ones."""
    plainml_skips: tuple[str, ...] = ()
    """PlainML leaves only torch and mpi runtimes alone."""
    """The SSH key files get the kubelet's default mode."""

    def reconciles(self, trainjob: Json) -> bool:
        """Only TrainJobs the Trainer's own controller manages, as v2.3.0 (``managed_by.py``):
        v2.1.0's reconciler did not look at ``managedBy`` and ran a MultiKueue TrainJob on the
        management cluster too (divergence T-18)."""
        return not is_managed_by_external_controller(trainjob)

    def trainjob_event_recorder(self, recorders: Recorders, component: str) -> Recorder:
        return recorders.event_recorder(component)

    runtime_deprecation_policy_url = tc.RuntimeDeprecationPolicyURL
    initializer_volume: str | None = None
    torchtune: TorchTuneRules | None = None
    """v2.1.0's torchtune rules (``plugins/torchtune.py``)."""
    trainer_go_types = gocodec.TYPES_FILE
    """trainer v2.1.0's types (with jobset v0.10.1, k8s.io/api v0.34)."""

    async def validate_customisation(
        self,
        reader: Reader,
        old: TrainJob | None,
        new: TrainJob,
        containers_by_job: Mapping[str, set[str]],
    ) -> list[FieldError]:
        return await validate_override_immutability(reader, old, new) + validate_override_targets(
            new, containers_by_job
        )

    def validate_torch(self, info: Info, trainer: Trainer | None) -> tuple[list[FieldError], bool]:
        """``numProcPerNode`` an integer or a word; without it nothing else is checked (v2.1.0
        returns early when the TrainJob sets no numProcPerNode)."""
        if trainer is None or trainer.num_proc_per_node is None:
            return [], False
        nproc = trainer.num_proc_per_node
        if isinstance(nproc, str) and nproc not in NUM_PROC_PER_NODE_WORDS:
            return [
                FieldError.invalid(
                    "spec.trainer.numProcPerNode", nproc, "must have an int value or [auto cpu gpu]"
                )
            ], True
        return [], True

    def validate_mpi(self, trainer: Trainer | None) -> tuple[list[FieldError], list[FieldError]]:
        """``numProcPerNode`` must be an integer for an MPI TrainJob."""
        if (
            trainer is not None
            and trainer.num_proc_per_node is not None
            and not isinstance(trainer.num_proc_per_node, int)
        ):
            return [
                FieldError.invalid(
                    "spec.trainer.numProcPerNode",
                    trainer.num_proc_per_node,
                    "must have an int value for MPI TrainJob",
                )
            ], []
        return [], []

    def jobset_metadata(
        self, trainjob: TrainJob, template: JobSetTemplateSpec | None
    ) -> tuple[dict[str, str], dict[str, str]]:
        return jobset_labels(trainjob, template), jobset_annotations(trainjob, template)

    def customise_jobset_spec(self, trainjob: TrainJob, jobset_spec: Json) -> None:
        apply_pod_template_overrides(
            jobset_spec, trainjob.spec.pod_template_overrides if trainjob.spec else None
        )


V2_1 = V2_1Runtime()
