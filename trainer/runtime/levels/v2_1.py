"""Level v2.1's customisation of a runtime (Trainer v2.1.0; docs/behaviour/trainer.md §2.4
steps 1 and 2): ``spec.labels``/``spec.annotations`` over the runtime template's, and the
``podTemplateOverrides`` strategic-merged into the targeted replicated jobs' pod templates.

Its reconciler and admission steps are Trainer v2.1.0's (docs/behaviour/trainer.md §3, §5):
every TrainJob is reconciled whatever its ``managedBy``, there is no active deadline, a changed
status is PUT (resourceVersion-checked), events are core/v1 Events, the built-in plugins are
the shared ones and no TrainJob defaulting webhook is served.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from manager.events import Recorder
from manager.meta.object import Json
from manager.meta.strategicmerge import POD_TEMPLATE_SPEC, strategic_merge
from trainer.api import gocodec
from trainer.api.trainer_v1alpha1 import JobSetTemplateSpec, PodTemplateOverride, TrainJob
from trainer.runtime.levels import Recorders

__all__ = [
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


class V2_1Runtime:
    """``RuntimeLevel`` of v2.1."""

    name = "v2.1"
    deadline = NO_DEADLINE
    status_write = PUT_STATUS
    trainjob_defaulter: str | None = None

    def reconciles(self, trainjob: Json) -> bool:
        """Every TrainJob: v2.1.0's reconciler does not look at ``managedBy``."""
        return True

    def trainjob_event_recorder(self, recorders: Recorders, component: str) -> Recorder:
        return recorders.event_recorder(component)

    def jobset_metadata(
        self, trainjob: TrainJob, template: JobSetTemplateSpec | None
    ) -> tuple[dict[str, str], dict[str, str]]:
        return jobset_labels(trainjob, template), jobset_annotations(trainjob, template)

    def customise_jobset_spec(self, trainjob: TrainJob, jobset_spec: Json) -> None:
        apply_pod_template_overrides(
            jobset_spec, trainjob.spec.pod_template_overrides if trainjob.spec else None
        )


V2_1 = V2_1Runtime()
