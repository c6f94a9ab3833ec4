"""What a stored v2.1 object becomes at level v2.3 (docs/migration.md "What changes").

TrainJob (Trainer v2.1.0 ``TrainJobSpec`` -> v2.3.0's):

* ``spec.labels``, ``spec.annotations`` and every ``spec.podTemplateOverrides`` entry become ONE
  ``spec.runtimePatches`` entry of manager ``trainer.kubeflow.org/migrate``: the labels and
  annotations its ``trainingRuntimeSpec.template.metadata`` (v2.3.0 lays them over the runtime
  template's, as v2.1.0 laid ``spec.labels`` over them), each override's pod template metadata
  and spec under ``template.spec.replicatedJobs[name]`` of each job it targets. Overrides that
  target the same job are folded into one pod template patch in their order (a later entry wins,
  as in v2.1.0); a target the runtime lacks is dropped (v2.1.0 skipped it). The result is checked
  by building the JobSet both ways (``trainer.runtime.levels.v2_1`` and ``v2_3``): a patch that
  would build another JobSet is refused.
* ``spec.trainer.numProcPerNode``: v2.3.0's is an integer and a missing one means ``auto``; the
  runtime's ``torch.numProcPerNode`` default is gone. v2.1.0's torch plugin took the TrainJob's
  value, else the runtime's, else ``auto``, then: ``auto`` without GPUs in ``resourcesPerNode``
  -> the CPU count (at least 1), with GPUs -> ``auto`` (torchrun's), ``cpu`` -> the CPU count
  (at least 1), ``gpu`` -> ``gpu`` (torchrun counts the node's CUDA devices). So ``auto`` is
  dropped (v2.3.0 computes the same), ``cpu`` becomes its number, ``gpu`` the GPUs requested per
  node (what the container is given) and is refused without any; an integer the runtime gave is
  written into the TrainJob (v2.3.0 would not read it from the runtime).

TrainingRuntime and ClusterTrainingRuntime: ``mlPolicy.torch.numProcPerNode`` and
``mlPolicy.torch.elasticPolicy`` are removed (``torch: {}`` stays: the policy is still torch).
v2.1.0 never read ``elasticPolicy``. Their ``trainer.kubeflow.org/resource-in-use`` finalizer
(v2.1.0's, which v2.3.0's runtime controllers only remove) is removed too: otherwise whether a
TrainJob's runtime snapshot, written by its first v2.3 reconcile, carries it is a race between
two controllers (``conformance --migrate-from v2.1`` saw both outcomes), and a runtime deleted
while no manager runs would wait.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from manager.meta.object import Json
from manager.meta.strategicmerge import POD_TEMPLATE_SPEC, strategic_merge
from manager.meta.validation import is_domain_prefixed_path
from trainer.api import gocodec
from trainer.api import trainer_constants as tc
from trainer.api.trainer_v1alpha1 import JobSetTemplateSpec, PodTemplateOverride, TrainJob
from trainer.runtime.levels import RuntimeLevel
from trainer.runtime.levels.v2_1 import V2_1, override_patch
from trainer.runtime.levels.v2_3 import V2_3
from trainer.runtime.resources import cpu_count, gpu_count, trainer_resources_from_runtime

__all__ = [
    "MANAGER",
    "Refusal",
    "Translation",
    "build_jobset",
    "translate_runtime",
    "translate_trainjob",
]

MANAGER = "trainer.kubeflow.org/migrate"
"""The ``manager`` of the runtime patch migrate writes: a domain-prefixed path, as v2.3.0's
TrainJob webhook requires (``IsDomainPrefixedPath``), and one no other writer uses (Kueue
writes ``kueue.x-k8s.io/manager``)."""

# v2.1.0's PodTemplateSpecOverride and ContainerOverride fields; all of them are fields of
# v2.3.0's PodSpecPatch and ContainerPatch.
OVERRIDE_SPEC_FIELDS = frozenset(
    {
        "serviceAccountName",
        "nodeSelector",
        "affinity",
        "tolerations",
        "volumes",
        "initContainers",
        "containers",
        "schedulingGates",
        "imagePullSecrets",
    }
)
CONTAINER_OVERRIDE_FIELDS = frozenset({"name", "env", "volumeMounts"})
# v2.3.0's PodSpecPatch and ContainerPatch fields v2.1.0's override types do not have.
POD_SPEC_PATCH_ONLY = frozenset({"securityContext", "terminationGracePeriodSeconds"})
CONTAINER_PATCH_ONLY = frozenset({"securityContext"})
OVERRIDE_FIELDS = frozenset({"targetJobs", "metadata", "spec"})
RESERVED_ENV_CONTAINERS = (tc.DatasetInitializer, tc.ModelInitializer, tc.Node)
_JOBSET = gocodec.codec_for("jobset.x-k8s.io/v1alpha2", "JobSet")


@dataclass(frozen=True)
class Refusal:
    """An object migrate cannot translate: which, the field, why."""

    kind: str
    namespace: str
    name: str
    field: str
    reason: str

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}: {self.field}: {self.reason}"


@dataclass
class Translation:
    """One object: as stored, as level v2.3 wants it (equal: nothing to change), the refusals
    (any: nothing may be written) and notes for the reader of the diff."""

    before: Json
    after: Json
    refusals: list[Refusal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return str(self.before.get("kind", ""))

    @property
    def namespace(self) -> str:
        return str((self.before.get("metadata") or {}).get("namespace") or "")

    @property
    def name(self) -> str:
        return str((self.before.get("metadata") or {}).get("name") or "")

    @property
    def changed(self) -> bool:
        return self.before.get("spec") != self.after.get("spec") or _finalizers(self.before) != _finalizers(
            self.after
        )


def _finalizers(obj: Json) -> list[Any]:
    return list((obj.get("metadata") or {}).get("finalizers") or ())


# -- runtimes -----------------------------------------------------------------------------------


def translate_runtime(runtime: Json) -> Translation:
    """A TrainingRuntime or ClusterTrainingRuntime without the torch fields v2.3.0 removed."""
    after = copy.deepcopy(runtime)
    result = Translation(runtime, after)
    finalizers = _finalizers(after)
    if tc.ResourceInUseFinalizer in finalizers:
        kept = [f for f in finalizers if f != tc.ResourceInUseFinalizer]
        meta = after["metadata"]
        if kept:
            meta["finalizers"] = kept
        else:
            meta.pop("finalizers", None)
        result.notes.append(
            f"metadata.finalizers: {tc.ResourceInUseFinalizer} removed (Trainer v2.1.0's; v2.3.0 only removes it)"
        )
    torch = ((after.get("spec") or {}).get("mlPolicy") or {}).get("torch")
    if not isinstance(torch, dict):
        return result
    if "numProcPerNode" in torch:
        value = torch.pop("numProcPerNode")
        if value != tc.NumProcPerNodeAuto:
            result.notes.append(
                f"mlPolicy.torch.numProcPerNode {value!r} removed: the TrainJobs migrated with it carry "
                "it in spec.trainer.numProcPerNode; new TrainJobs of this runtime run with auto "
                "unless they set it"
            )
    if "elasticPolicy" in torch:
        torch.pop("elasticPolicy")
        result.notes.append("mlPolicy.torch.elasticPolicy removed: Trainer v2.1.0 never read it")
    return result


# -- TrainJobs ----------------------------------------------------------------------------------


def _runtime_jobs(runtime: Json | None) -> list[Json]:
    spec = (((runtime or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    return [j for j in spec.get("replicatedJobs") or () if isinstance(j, dict)]


def _job_containers(rjob: Json) -> set[str]:
    pod = (((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    return {str(c.get("name", "")) for c in (pod.get("initContainers") or []) + (pod.get("containers") or [])}


class _TrainJobTranslator:
    def __init__(self, trainjob: Json, runtime: Json | None, now: str) -> None:
        self.before = trainjob
        self.after = copy.deepcopy(trainjob)
        spec = self.after.get("spec")
        self.spec: Json = spec if isinstance(spec, dict) else {}  # none: nothing to translate
        self.runtime = runtime
        self.now = now
        self.result = Translation(trainjob, self.after)
        meta = trainjob.get("metadata") or {}
        self.namespace = str(meta.get("namespace") or "")
        self.name = str(meta.get("name") or "")

    def refuse(self, path: str, reason: str) -> None:
        self.result.refusals.append(Refusal("TrainJob", self.namespace, self.name, path, reason))

    def note(self, text: str) -> None:
        self.result.notes.append(text)

    # -- labels, annotations, podTemplateOverrides -> one runtime patch ----------------------

    def runtime_patch(self) -> bool:
        """Whether the TrainJob had v2.1's customisation fields (they are removed)."""
        labels = self.spec.pop("labels", None) or {}
        annotations = self.spec.pop("annotations", None) or {}
        overrides = self.spec.pop("podTemplateOverrides", None) or []
        if not (labels or annotations or overrides):
            return False
        existing = self.spec.get("runtimePatches") or []
        if existing:
            managers = ", ".join(str(p.get("manager")) for p in existing if isinstance(p, dict))
            self.refuse(
                "spec.runtimePatches",
                f"already set (managers: {managers}) next to v2.1's fields: Trainer v2.1.0 ignored "
                "them, so no patch list reproduces the JobSet it built",
            )
            return True
        template: Json = {}
        metadata: Json = {}
        if labels:
            metadata["labels"] = dict(labels)
        if annotations:
            metadata["annotations"] = dict(annotations)
        if metadata:
            template["metadata"] = metadata
        jobs = self.pod_template_patches(overrides)
        if jobs:
            template["spec"] = {"replicatedJobs": jobs}
        if not template:
            return True
        errors = is_domain_prefixed_path("spec.runtimePatches.manager", MANAGER)
        assert not errors, errors  # MANAGER is a constant the unit tests check
        self.spec["runtimePatches"] = [
            {"manager": MANAGER, "time": self.now, "trainingRuntimeSpec": {"template": template}}
        ]
        return True

    def pod_template_patches(self, overrides: list[Any]) -> list[Json]:
        """Each targeted job's pod template patch, the overrides folded in their order."""
        rjobs = _runtime_jobs(self.runtime)
        known = {str(j.get("name", "")): _job_containers(j) for j in rjobs}
        order = list(known)
        folded: dict[str, Json] = {}
        for i, raw in enumerate(overrides):
            path = f"spec.podTemplateOverrides[{i}]"
            if not isinstance(raw, dict):
                self.refuse(path, "not an object")
                continue
            if not self.override_fields(path, raw):
                continue
            try:
                override = PodTemplateOverride.from_dict(raw)
            except ValueError as err:
                self.refuse(path, f"not a v2.1 PodTemplateOverride: {err}")
                continue
            patch = override_patch(override)
            for target in override.target_jobs:
                if self.runtime is not None and target.name not in known:
                    self.note(
                        f"{path}.targetJobs: {target.name!r} dropped: the runtime has no such "
                        "replicated job (Trainer v2.1.0 skipped it)"
                    )
                    continue
                if self.runtime is not None:
                    self.override_containers(path, raw, target.name, known[target.name])
                if target.name not in order:
                    order.append(target.name)
                if patch:
                    folded[target.name] = strategic_merge(
                        folded.get(target.name, {}), patch, POD_TEMPLATE_SPEC
                    )
        return [
            {"name": name, "template": {"spec": {"template": folded[name]}}}
            for name in order
            if name in folded
        ]

    def override_fields(self, path: str, raw: Json) -> bool:
        """Every field of the override is one v2.1.0 read and v2.3.0's patch types carry."""
        ok = True
        for key in sorted(set(raw) - OVERRIDE_FIELDS):
            self.refuse(f"{path}.{key}", "not a field of v2.1's PodTemplateOverride")
            ok = False
        meta = raw.get("metadata") or {}
        dropped = sorted(k for k in meta if k not in ("labels", "annotations"))
        if dropped:
            self.note(
                f"{path}.metadata: {', '.join(dropped)} dropped: Trainer v2.1.0 took only labels and "
                "annotations from it (v2.3.0 would merge them into the pod template)"
            )
        spec = raw.get("spec") or {}
        for key in sorted(set(spec) - OVERRIDE_SPEC_FIELDS):
            ok = False
            if key in POD_SPEC_PATCH_ONLY:
                self.refuse(
                    f"{path}.spec.{key}",
                    "Trainer v2.1.0 did not apply it (not in PodTemplateSpecOverride), v2.3.0's "
                    "PodSpecPatch would",
                )
            else:
                self.refuse(f"{path}.spec.{key}", "v2.3.0's PodSpecPatch cannot carry this field")
        for list_name in ("initContainers", "containers"):
            for j, container in enumerate(spec.get(list_name) or ()):
                if not isinstance(container, dict):
                    continue
                for key in sorted(set(container) - CONTAINER_OVERRIDE_FIELDS):
                    ok = False
                    where = f"{path}.spec.{list_name}[{j}].{key}"
                    if key in CONTAINER_PATCH_ONLY:
                        self.refuse(where, "Trainer v2.1.0 did not apply it, v2.3.0's ContainerPatch would")
                    else:
                        self.refuse(where, "v2.3.0's ContainerPatch cannot carry this field")
        return ok

    def override_containers(self, path: str, raw: Json, job: str, containers: set[str]) -> None:
        """What v2.3.0's TrainJob webhook refuses in a runtime patch: containers the runtime's job
        lacks, env of the node and initializer containers."""
        spec = raw.get("spec") or {}
        for list_name in ("initContainers", "containers"):
            for j, container in enumerate(spec.get(list_name) or ()):
                name = str((container or {}).get("name", ""))
                where = f"{path}.spec.{list_name}[{j}]"
                if name not in containers:
                    self.refuse(
                        where,
                        f"the runtime's job {job} has no container {name!r} (v2.3.0's webhook refuses "
                        "a patch naming it)",
                    )
                elif list_name == "containers" and container.get("env") and name in RESERVED_ENV_CONTAINERS:
                    self.refuse(
                        f"{where}.env",
                        "v2.3.0 refuses env for the dataset-initializer, model-initializer, node "
                        "containers in a patch (use spec.trainer.env / spec.initializer)",
                    )

    # -- numProcPerNode ------------------------------------------------------------------------

    def num_proc_per_node(self) -> None:
        trainer = self.spec.get("trainer")
        if not isinstance(trainer, dict):
            return  # v2.1.0's torch plugin sets no PET_ env without spec.trainer
        path = "spec.trainer.numProcPerNode"
        value = trainer.get("numProcPerNode")
        policy = ((self.runtime or {}).get("spec") or {}).get("mlPolicy") or {}
        if self.runtime is None:
            if value is None or isinstance(value, int):
                return
            if value == tc.NumProcPerNodeAuto:
                trainer.pop("numProcPerNode")
                return
            self.refuse(path, f"{value!r} cannot be decided: the TrainJob's runtime is not found")
            return
        if isinstance(policy.get("torch"), dict):
            self.torch_num_proc(trainer, value, policy["torch"])
        elif isinstance(policy.get("mpi"), dict):
            if value is not None and not isinstance(value, int):
                self.refuse(path, f"{value!r}: must have an int value for MPI TrainJob")
        elif value is not None and not isinstance(value, int):
            trainer.pop("numProcPerNode")
            self.note(
                f"{path} {value!r} dropped: the runtime has no torch policy, Trainer v2.1.0 did not read it"
            )

    def resources_per_node(self) -> None:
        """v2.3.0 merges ``resourcesPerNode`` into the runtime's node container per resource name
        where v2.1.0 replaced its resources: a name only the runtime has stays. No TrainJob field
        removes it, so the difference is reported (it shows when the JobSet is built again, for a
        suspended TrainJob)."""
        trainer = self.spec.get("trainer")
        resources = trainer.get("resourcesPerNode") if isinstance(trainer, dict) else None
        policy = ((self.runtime or {}).get("spec") or {}).get("mlPolicy")
        if not isinstance(resources, dict) or not policy:
            return
        jobset_spec = (((self.runtime or {}).get("spec") or {}).get("template") or {}).get("spec")
        base = trainer_resources_from_runtime(jobset_spec) or {}
        for part in ("limits", "requests"):
            kept = sorted(set(base.get(part) or {}) - set(resources.get(part) or {}))
            if kept:
                self.note(
                    f"spec.trainer.resourcesPerNode.{part}: the runtime's {', '.join(kept)} stay in the "
                    "node container at v2.3 (v2.3.0 merges per resource name, v2.1.0 replaced them)"
                )

    def torch_num_proc(self, trainer: Json, value: Any, torch: Mapping[str, Any]) -> None:
        path = "spec.trainer.numProcPerNode"
        source = path
        if value is None:
            value = torch.get("numProcPerNode", tc.NumProcPerNodeAuto)
            source = "the runtime's mlPolicy.torch.numProcPerNode"
        resources = trainer.get("resourcesPerNode")
        if resources is None:
            jobset_spec = (((self.runtime or {}).get("spec") or {}).get("template") or {}).get("spec")
            resources = trainer_resources_from_runtime(jobset_spec) or {}
        if isinstance(value, bool) or not isinstance(value, int | str):
            self.refuse(path, f"{value!r}: must have an int value or [auto cpu gpu]")
            return
        new: int | None
        if isinstance(value, int):
            new = value
        elif value == tc.NumProcPerNodeAuto:
            new = None
        elif value == tc.NumProcPerNodeCPU:
            new = max(1, cpu_count(resources))
            self.note(f"{path}: cpu is {new} (resourcesPerNode's CPUs, as Trainer v2.1.0 counted them)")
        elif value == tc.NumProcPerNodeGPU:
            gpus = gpu_count(resources)
            if gpus == 0:
                self.refuse(
                    path,
                    f'"gpu" (from {source}) cannot be decided statically: resourcesPerNode requests no '
                    "GPU, and torchrun counts the CUDA devices the node shows; set a number",
                )
                return
            new = gpus
            self.note(f"{path}: gpu is {new} (the GPUs resourcesPerNode requests per node)")
        else:
            self.refuse(path, f"{value!r}: must have an int value or [auto cpu gpu]")
            return
        if new is None:
            trainer.pop("numProcPerNode", None)
        else:
            trainer["numProcPerNode"] = new

    # -- the check: the same JobSet both ways --------------------------------------------------

    def verify(self) -> None:
        if self.runtime is None:
            if self.before.get("spec") != self.after.get("spec"):
                self.note("the runtime is not found: translated without building the JobSet to compare")
            return
        try:
            v2_1 = build_jobset(V2_1, self.before, self.runtime)
            v2_3 = build_jobset(V2_3, self.after, self.runtime)
        except ValueError as err:
            self.refuse("spec", f"cannot be built: {err}")
            return
        for part, a, b in zip(
            ("JobSet labels", "JobSet annotations", "JobSet spec"), v2_1, v2_3, strict=True
        ):
            if a != b:
                self.refuse(
                    "spec.podTemplateOverrides",
                    f"one runtime patch would build other {part} than v2.1's overrides built",
                )


def build_jobset(level: RuntimeLevel, trainjob: Json, runtime: Json) -> tuple[Json, Json, Json]:
    """The labels, annotations and spec of the JobSet ``level``'s customisation steps make of
    ``runtime``'s template for ``trainjob`` (the spec as Go encodes it)."""
    template_doc = ((runtime.get("spec") or {}).get("template")) or {}
    model = TrainJob.from_dict(copy.deepcopy(trainjob))
    template = JobSetTemplateSpec.from_dict(copy.deepcopy(template_doc))
    labels, annotations = level.jobset_metadata(model, template)
    spec = copy.deepcopy(template_doc.get("spec") or {})
    level.customise_jobset_spec(model, spec)
    encoded = _JOBSET.encode({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "spec": spec})
    return labels, annotations, encoded.get("spec") or {}


def translate_trainjob(trainjob: Json, runtime: Json | None, now: str) -> Translation:
    """``trainjob`` (as stored at v2.1) for level v2.3; ``runtime`` is the (v2.1) runtime it
    names, None when it is not found; ``now`` the patch's ``time`` (RFC 3339)."""
    translator = _TrainJobTranslator(trainjob, runtime, now)
    customised = translator.runtime_patch()
    translator.num_proc_per_node()
    translator.resources_per_node()
    if customised and not translator.result.refusals:
        translator.verify()
    return translator.result
