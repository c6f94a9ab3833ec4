"""Building the ``Info`` of a TrainJob on a runtime (upstream ``newRuntimeInfo``, docs/behaviour/trainer.md
§2.4).

One function per step of that section. Steps 1 and 2 (the JobSet's labels and annotations, the
TrainJob's changes to the runtime's JobSetSpec) are the API level's (``trainer/runtime/levels``);
``jobset_spec_apply_document`` is step 3 and ``pod_sets`` step 4. All are pure: the inputs
are never modified.
"""

from __future__ import annotations

from typing import Any

from manager.meta.object import Json, json_copy
from trainer.api import trainer_constants as tc
from trainer.api.trainer_v1alpha1 import JobSetTemplateSpec, MLPolicy, PodGroupPolicy, TrainJob
from trainer.runtime.info import ContainerInfo, Info, PodSet, RuntimePolicy, TemplateSpec
from trainer.runtime.levels import RuntimeLevel
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.resources import canonical_quantities, pod_requests, typed_resource_requirements

__all__ = [
    "canonical_resources",
    "jobset_spec_apply_document",
    "new_runtime_info",
    "pod_sets",
    "typed_round_trip",
]


def canonical_resources(resources: Any) -> Any:
    """``limits``/``requests`` of a ResourceRequirements as Go encodes them."""
    return typed_resource_requirements(resources)


def _typed_metadata(holder: Json) -> None:
    meta = holder.get("metadata")
    if meta is None:
        holder["metadata"] = {}
    elif isinstance(meta, dict) and "creationTimestamp" in meta and meta["creationTimestamp"] is None:
        del meta["creationTimestamp"]


def typed_round_trip(jobset_spec: Json) -> None:
    """What decoding into Go's typed JobSetSpec and encoding again does to the document.

    Non-pointer structs appear even when empty (template ``metadata: {}``, every container's
    ``resources: {}``), ``creationTimestamp: null`` is dropped and quantities are re-printed in
    canonical form. Upstream builds its apply document this way (trainer.md §2.4 step 3).
    """
    for rjob in jobset_spec.get("replicatedJobs") or ():
        if not isinstance(rjob, dict):
            continue
        job_template = rjob.setdefault("template", {})
        _typed_metadata(job_template)
        pod_template = job_template.setdefault("spec", {}).setdefault("template", {})
        _typed_metadata(pod_template)
        pod_spec = pod_template.setdefault("spec", {})
        for key in ("initContainers", "containers", "ephemeralContainers"):
            for container in pod_spec.get(key) or ():
                if isinstance(container, dict):
                    container["resources"] = canonical_resources(container.get("resources") or {})
        if "resources" in pod_spec:
            pod_spec["resources"] = canonical_resources(pod_spec["resources"])
        if "overhead" in pod_spec:
            pod_spec["overhead"] = canonical_quantities(pod_spec["overhead"])


def jobset_spec_apply_document(template: JobSetTemplateSpec | None) -> Json:
    """The runtime's JobSetSpec as an apply document: every field set in the runtime flows through.

    ``to_dict`` builds a new document (pydantic's JSON dump) from the runtime the reconcile
    read, so it is the caller's to change: no copy (the deep copies here were about a fifth of
    a steady TrainJob reconcile's CPU, docs/bench.md)."""
    return template.spec.to_dict() if template and template.spec else {}


def _container_infos(containers: list[Json] | None) -> list[ContainerInfo]:
    return [
        ContainerInfo(
            name=c.get("name", ""),
            image=c.get("image") or "",
            command=list(c["command"]) if c.get("command") else None,
            env=json_copy(c.get("env") or []),
            ports=json_copy(c.get("ports") or []),
            volume_mounts=json_copy(c.get("volumeMounts") or []),
        )
        for c in containers or ()
    ]


def pod_sets(jobset_spec: Json, ml_policy: MLPolicy | None) -> list[PodSet]:
    """One PodSet per replicated job: count, ancestor, containers, volumes, requests of one pod."""
    result: list[PodSet] = []
    for rjob in jobset_spec.get("replicatedJobs") or ():
        job_template = rjob.get("template") or {}
        job_spec = job_template.get("spec") or {}
        count = job_spec.get("parallelism")
        count = 1 if count is None else count
        labels = (job_template.get("metadata") or {}).get("labels") or {}
        ancestor = labels.get(tc.LabelTrainJobAncestor)
        if ancestor == tc.AncestorTrainer and ml_policy is not None:
            count = 1 if ml_policy.num_nodes is None else ml_policy.num_nodes
        pod_spec = (job_spec.get("template") or {}).get("spec") or {}
        result.append(
            PodSet(
                name=rjob.get("name", ""),
                ancestor=ancestor,
                count=max(count, 1),
                init_containers=_container_infos(pod_spec.get("initContainers")),
                containers=_container_infos(pod_spec.get("containers")),
                volumes=json_copy(pod_spec.get("volumes") or []),
                single_pod_requests=pod_requests(pod_spec),
            )
        )
    return result


def new_runtime_info(
    trainjob: TrainJob,
    template: JobSetTemplateSpec | None,
    ml_policy: MLPolicy | None,
    pod_group_policy: PodGroupPolicy | None,
    level: RuntimeLevel = V2_1,
) -> Info:
    """Upstream ``newRuntimeInfo``: labels, the level's customisation, the JobSetSpec document,
    the level's step for ``resourcesPerNode`` (v2.3: merged into the ``node`` container) and the
    PodSets."""
    spec = jobset_spec_apply_document(template)
    typed_round_trip(spec)
    level.customise_jobset_spec(trainjob, spec)
    typed_round_trip(spec)
    level.build.node_resources(trainjob, spec, ml_policy)
    labels, annotations = level.jobset_metadata(trainjob, template)
    return Info(
        labels=labels,
        annotations=annotations,
        runtime_policy=RuntimePolicy(
            # the caller's policies, not copies, as upstream keeps its pointers: a plugin may
            # change them (MPI's slots per node), and both callers parse the runtime afresh for
            # each TrainJob, so nothing else holds them
            ml_policy=ml_policy,
            pod_group_policy=pod_group_policy,
        ),
        template_spec=TemplateSpec(obj_apply=spec, pod_sets=pod_sets(spec, ml_policy)),
    )
