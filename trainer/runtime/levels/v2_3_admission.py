"""Level v2.3's validation rules of the built-in plugins that differ from v2.1's (Trainer v2.3.0
``pkg/runtime/framework/plugins/{jobset,torch,mpi}``; docs/behaviour/trainer.md §12.5).

* JobSet: a dataset or model initializer container must mount the ``initializer`` volume;
  ``runtimePatches`` may change only when the TrainJob is suspended before or after the update,
  and not while its JobSet still has active jobs; each patch's ``manager`` is a domain-prefixed
  path; a patch names only replicated jobs, init containers and containers the runtime has,
  and sets no env of the node and initializer containers.
* Torch: every ``envInjection`` target of the runtime's torch policy names a container of the
  runtime; the reserved ``PET_*`` names are checked whatever ``numProcPerNode`` (an integer at
  this level: the CRD refuses anything else, so the v2.1 ``auto``/``cpu``/``gpu`` rule is gone).
* MPI: the reserved OpenMPI env names may not be set (v2.1's "int value" rule is gone too).

Also the Semantic equality of ``runtimePatches`` (``equality.Semantic.DeepEqual``) that these
rules and the v2.3 defaulting webhook use.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from manager.client.interfaces import Reader
from manager.meta.field import FieldError
from manager.meta.gotext import go_quote
from manager.meta.object import Json
from manager.meta.validation import is_domain_prefixed_path
from trainer.api import gocodec
from trainer.api import trainer_constants as tc
from trainer.api.gocodec import GoField, GoStruct, GoType
from trainer.api.trainer_v1alpha1 import Trainer, TrainJob
from trainer.runtime.apply import typed_env_var
from trainer.runtime.info import Info
from trainer.runtime.levels.active_jobs import refuse_while_jobs_are_active

__all__ = [
    "INITIALIZER_VOLUME",
    "MPI_RESERVED_ENVS",
    "RUNTIME_PATCHES_PATH",
    "runtime_patches_equal",
    "runtime_patches_text",
    "validate_env_injection_targets",
    "validate_mpi_reserved_envs",
    "validate_runtime_patches",
]

RUNTIME_PATCHES_PATH = "spec.runtimePatches"
INITIALIZER_VOLUME = "initializer"
"""jobset plugin's ``VolumeNameInitializer``."""
MPI_RESERVED_ENVS = frozenset(
    {
        "OMPI_MCA_orte_default_hostfile",
        "OMPI_MCA_plm_rsh_args",
        "OMPI_MCA_orte_keep_fqdn_hostnames",
        "OMPI_MCA_orte_set_default_slots",
    }
)
"""``constants.MPIReservedEnvNames``: what the MPI plugin sets on the launcher."""

# -- Semantic equality -----------------------------------------------------------------------------


@functools.cache
def _typed_runtime_patches() -> GoType:
    """``spec.runtimePatches`` of v2.3.0's TrainJob, from the trainer v2.3.0 binary's Go types."""
    return gocodec.field_type(
        f"{tc.GROUP}/{tc.VERSION}", tc.TrainJobKind, RUNTIME_PATCHES_PATH, gocodec.TRAINER_V2_3_TYPES_FILE
    )


def runtime_patches_equal(old: Any, new: Any) -> bool:
    """``equality.Semantic.DeepEqual`` of two ``runtimePatches`` lists as v2.3.0's structs hold
    them (``gocodec.semantic_form``): None and [] alike, an absent field equal to its zero value,
    unknown fields ignored, quantities by value, times by instant."""
    patches = _typed_runtime_patches()
    return bool(gocodec.semantic_form(old, patches) == gocodec.semantic_form(new, patches))


def runtime_patches(trainjob: TrainJob) -> list[Json]:
    spec = trainjob.spec.to_dict() if trainjob.spec is not None else {}
    return [p if isinstance(p, dict) else {} for p in spec.get("runtimePatches") or ()]


# -- v2.3.0's RuntimePatch as encoding/json writes it (field errors print their bad value so) ---------


def _ptr(t: GoType) -> GoType:
    return GoType("ptr", "*" + t.go, t.ref, elem=t)


def _slice(t: GoType) -> GoType:
    return GoType("slice", "[]" + t.go, elem=t)


def _struct(name: str, fields: list[tuple[str, GoType]]) -> GoType:
    """A struct whose fields are all ``omitempty`` pointers, slices, maps or strings."""
    struct = GoStruct(f"v2.3/{name}", name)
    for json_name, field_type in fields:
        struct.fields[json_name] = GoField(json_name, field_type, always=False)
    return GoType("struct", f"v1alpha1.{name}", struct.key, struct=struct)


def _pod(path: str) -> GoType:
    """A core/v1 type, by its path in a Pod."""
    return gocodec.field_type("v1", "Pod", path)


@functools.cache
def _runtime_patches_type() -> GoType:
    string = GoType("string", "string")
    # *metav1.ObjectMeta: a patch may set only labels and annotations (its CRD schema)
    meta = _ptr(
        _struct(
            "ObjectMeta", [("labels", _pod("metadata.labels")), ("annotations", _pod("metadata.annotations"))]
        )
    )
    container = _struct(
        "ContainerPatch",
        [
            ("name", string),
            ("env", _pod("spec.containers.env")),
            ("volumeMounts", _pod("spec.containers.volumeMounts")),
            ("securityContext", _pod("spec.containers.securityContext")),
        ],
    )
    pod_spec = _struct(
        "PodSpecPatch",
        [
            ("serviceAccountName", _ptr(string)),
            ("volumes", _pod("spec.volumes")),
            ("initContainers", _slice(container)),
            ("containers", _slice(container)),
            ("imagePullSecrets", _pod("spec.imagePullSecrets")),
            ("securityContext", _pod("spec.securityContext")),
            ("nodeSelector", _pod("spec.nodeSelector")),
            ("affinity", _pod("spec.affinity")),
            ("tolerations", _pod("spec.tolerations")),
            ("schedulingGates", _pod("spec.schedulingGates")),
            ("terminationGracePeriodSeconds", _pod("spec.terminationGracePeriodSeconds")),
        ],
    )
    pod_template = _struct("PodTemplatePatch", [("metadata", meta), ("spec", _ptr(pod_spec))])
    job_spec = _struct("JobSpecPatch", [("template", _ptr(pod_template))])
    job_template = _struct("JobTemplatePatch", [("metadata", meta), ("spec", _ptr(job_spec))])
    rjob = _struct("ReplicatedJobPatch", [("name", string), ("template", _ptr(job_template))])
    jobset_spec = _struct("JobSetSpecPatch", [("replicatedJobs", _slice(rjob))])
    jobset_template = _struct("JobSetTemplatePatch", [("metadata", meta), ("spec", _ptr(jobset_spec))])
    runtime_spec = _struct("TrainingRuntimeSpecPatch", [("template", _ptr(jobset_template))])
    time = GoType("custom", "v1.Time", gocodec.TIME)
    patch = _struct(
        "RuntimePatch",
        [("manager", string), ("time", _ptr(time)), ("trainingRuntimeSpec", _ptr(runtime_spec))],
    )
    return _slice(patch)


def runtime_patches_text(patches: list[Json]) -> str:
    """``json.Marshal`` of ``spec.runtimePatches`` as v2.3.0's types write it."""
    return gocodec.marshal(patches, _runtime_patches_type())


# -- JobSet plugin ---------------------------------------------------------------------------------


async def validate_runtime_patches_immutability(
    reader: Reader, old: TrainJob | None, new: TrainJob
) -> list[FieldError]:
    """``checkRuntimePatchesImmutability``: a change needs the TrainJob suspended before or
    after the update (so Kueue may change its patch and ``suspend`` in one request), and no
    active job left in the JobSet."""
    if old is None or old.spec is None or new.spec is None:
        return []
    if runtime_patches_equal(runtime_patches(old), runtime_patches(new)):
        return []
    if not old.spec.suspend and not new.spec.suspend:
        return [
            FieldError.forbidden(
                RUNTIME_PATCHES_PATH,
                "RuntimePatches can only be modified when the TrainJob is suspended before or after the update",
            )
        ]
    return await refuse_while_jobs_are_active(reader, new, RUNTIME_PATCHES_PATH, "RuntimePatches")


def validate_runtime_patch_targets(
    new: TrainJob, containers_by_job: Mapping[str, set[str]]
) -> list[FieldError]:
    """Each patch: its ``manager`` a domain-prefixed path; its replicated jobs, init containers
    and containers the runtime's; no env for node and the initializers. Upstream reports every
    target error on the whole list."""
    patches = runtime_patches(new)
    text = runtime_patches_text(patches)

    def invalid(detail: str) -> FieldError:
        return FieldError.invalid(RUNTIME_PATCHES_PATH, patches, detail, value_text=text)

    errors: list[FieldError] = []
    for patch in patches:
        errors += is_domain_prefixed_path(f"{RUNTIME_PATCHES_PATH}.manager", str(patch.get("manager") or ""))
        template = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
        spec = template.get("spec")
        if not isinstance(spec, dict):
            continue
        for rjob in spec.get("replicatedJobs") or ():
            name = rjob.get("name", "")
            known = containers_by_job.get(name)
            if known is None:
                errors.append(
                    invalid("must not have replicated job that doesn't exist in the runtime job template")
                )
                continue
            job_spec = ((rjob.get("template") or {}).get("spec")) or {}
            pod_spec = ((job_spec.get("template") or {}).get("spec")) if isinstance(job_spec, dict) else None
            if not isinstance(pod_spec, dict):
                continue
            for container in pod_spec.get("initContainers") or ():
                if container.get("name") not in known:
                    errors.append(
                        invalid(f"must not have initContainer that doesn't exist in the runtime job {name}")
                    )
            for container in pod_spec.get("containers") or ():
                if container.get("name") not in known:
                    errors.append(
                        invalid(f"must not have container that doesn't exist in the runtime job {name}")
                    )
                elif container.get("env") and container.get("name") in (
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


async def validate_runtime_patches(
    reader: Reader, old: TrainJob | None, new: TrainJob, containers_by_job: Mapping[str, set[str]]
) -> list[FieldError]:
    """The JobSet plugin's ``runtimePatches`` rules, in upstream's order."""
    return await validate_runtime_patches_immutability(reader, old, new) + validate_runtime_patch_targets(
        new, containers_by_job
    )


# -- Torch and MPI plugins -------------------------------------------------------------------------


def validate_env_injection_targets(info: Info) -> list[FieldError]:
    """``validateEnvInjectionTargets``: each target container is in the runtime's pod set."""
    torch = info.runtime_policy.ml_policy.torch if info.runtime_policy.ml_policy else None
    extra = (torch.model_extra or {}) if torch is not None else {}
    injection = extra.get("envInjection")
    targets = injection.get("targets") if isinstance(injection, dict) else None
    errors: list[FieldError] = []
    for target in targets or ():
        if not isinstance(target, dict):
            continue
        job = target.get("jobName", "")
        for container in target.get("containerNames") or ():
            if _find_container(info, job, container):
                continue
            errors.append(
                FieldError.invalid(
                    "spec.runtimeRef",
                    {k: target[k] for k in ("jobName", "containerNames") if target.get(k)},
                    f"envInjection target podSet {go_quote(job)} container {go_quote(container)} "
                    "not found in runtime template",
                )
            )
    return errors


def _find_container(info: Info, pod_set: str, container: str) -> bool:
    """``Info.FindContainerByPodSetName``: the pod set's containers, then its init containers."""
    found = info.find_pod_set_by_name(pod_set)
    if found is None:
        return False
    return any(c.name == container for c in (*found.containers, *found.init_containers))


def validate_mpi_reserved_envs(trainer: Trainer | None) -> list[FieldError]:
    """The OpenMPI variables the plugin sets may not be set by the TrainJob."""
    if trainer is None:
        return []
    reserved = sorted({e.get("name", "") for e in trainer.env or () if e.get("name") in MPI_RESERVED_ENVS})
    if not reserved:
        return []
    return [
        FieldError.invalid(
            "spec.trainer.env",
            [typed_env_var(e) for e in trainer.env or ()],
            f"must not have reserved envs, invalid envs configured: [{' '.join(reserved)}]",
        )
    ]
