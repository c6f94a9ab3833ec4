"""Level v2.1's customisation of a runtime (Trainer v2.1.0; docs/behaviour/trainer.md §2.4
steps 1 and 2): ``spec.labels``/``spec.annotations`` over the runtime template's, and the
``podTemplateOverrides`` strategic-merged into the targeted replicated jobs' pod templates."""

from __future__ import annotations

from typing import Any

from manager.meta.object import Json
from manager.meta.strategicmerge import POD_TEMPLATE_SPEC, strategic_merge
from trainer.api.trainer_v1alpha1 import JobSetTemplateSpec, PodTemplateOverride, TrainJob

__all__ = [
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


class V2_1Runtime:
    """``RuntimeLevel`` of v2.1."""

    name = "v2.1"

    def jobset_metadata(
        self, trainjob: TrainJob, template: JobSetTemplateSpec | None
    ) -> tuple[dict[str, str], dict[str, str]]:
        return jobset_labels(trainjob, template), jobset_annotations(trainjob, template)

    def customise_jobset_spec(self, trainjob: TrainJob, jobset_spec: Json) -> None:
        apply_pod_template_overrides(
            jobset_spec, trainjob.spec.pod_template_overrides if trainjob.spec else None
        )


V2_1 = V2_1Runtime()
