"""JobSet v0.12.0's ``ElasticJobSet`` feature gate (docs/behaviour/jobset-v0.12.md §1.11, §2.7;
upstream ``syncJobScaling`` of ``jobset_controller.go`` and ``ValidateUpdate`` of
``jobset_webhook.go``, KEP-463).

A running JobSet's Indexed replicated jobs may change ``parallelism`` and ``completions``
(kept equal: Kubernetes' elastic Indexed Jobs); the controller patches each active Job of such
a replicated job to the template's values. Pure functions; the steps of ``v0_12_controller``
and ``v0_12_admission`` call them while the gate is on.
"""

from __future__ import annotations

import copy
from typing import Any

from manager.meta.conditions import find_condition
from manager.meta.field import FieldError
from manager.meta.object import Json as Object
from manager.meta.object import labels_of
from trainer.api import jobset_constants as c

__all__ = ["mask_scaling", "scaling_patch", "scaling_patches", "scaling_problems"]

_INDEXED = "Indexed"
_SCALING = ("parallelism", "completions")


def _job_spec(rjob: Object) -> Object:
    spec: Object = ((rjob or {}).get("template") or {}).get("spec") or {}
    return spec


# -- the controller: syncJobScaling --------------------------------------------------------------


def _defaulted(parallelism: Any, completions: Any) -> tuple[Any, Any]:
    """What the API server stores for a Job sent with these values (``SetDefaults_Job``: both
    unset are both 1, an unset parallelism is 1)."""
    if parallelism is None and completions is None:
        return 1, 1
    return (1 if parallelism is None else parallelism), completions


def scaling_patch(job: Object, parallelism: Any, completions: Any) -> Object | None:
    """The merge patch upstream's ``client.MergeFrom`` sends to bring one Job to the template's
    values, or None when none is due.

    As upstream: nothing unless the template's two values are equal (both unset counts), and
    only the fields that differ (an unset template value as ``null``). Unlike upstream, no patch
    whose result the API server's defaulting makes the Job it already is (a template without
    either value, a Job with both 1): upstream sends that no-op on every reconcile
    (docs/divergences.md)."""
    if parallelism != completions:
        return None
    spec = job.get("spec") or {}
    current = (spec.get("parallelism"), spec.get("completions"))
    if current == (parallelism, completions) or current == _defaulted(parallelism, completions):
        return None
    changed = {
        key: value
        for key, value, now in zip(_SCALING, (parallelism, completions), current, strict=True)
        if value != now
    }
    return {"spec": changed}


def scaling_patches(js: Object, active_jobs: list[Object]) -> list[tuple[Object, Object]]:
    """(Job, merge patch) for every active Job whose replicated job's template scales it
    otherwise; Jobs without the replicated-job label or of an unknown one are left alone."""
    desired = {
        str(rjob.get("name") or ""): (_job_spec(rjob).get("parallelism"), _job_spec(rjob).get("completions"))
        for rjob in (js.get("spec") or {}).get("replicatedJobs") or []
    }
    patches = []
    for job in active_jobs:
        labels = labels_of(job)
        if c.ReplicatedJobNameKey not in labels or labels[c.ReplicatedJobNameKey] not in desired:
            continue
        patch = scaling_patch(job, *desired[labels[c.ReplicatedJobNameKey]])
        if patch is not None:
            patches.append((job, patch))
    return patches


# -- the webhook: ValidateUpdate -----------------------------------------------------------------


def _terminal(js: Object) -> bool:
    status = js.get("status")
    for kind in (c.JobSetCompleted, c.JobSetFailed):
        cond = find_condition(status, kind)
        if cond is not None and cond.get("status") == "True":
            return True
    return False


def scaling_problems(old: Object, new: Object) -> list[FieldError]:
    """The update rules of a scaled Indexed replicated job (one of the old JobSet's, by name):
    not once the JobSet is Completed or Failed, at least 1, ``completions`` equal to
    ``parallelism``. Each value is checked only when it changed; equality always."""
    old_by_name = {
        str((r or {}).get("name") or ""): r for r in (old.get("spec") or {}).get("replicatedJobs") or []
    }
    terminal = _terminal(old)
    problems: list[FieldError] = []
    for index, rjob in enumerate((new.get("spec") or {}).get("replicatedJobs") or []):
        name = str((rjob or {}).get("name") or "")
        if name not in old_by_name:
            continue
        spec, old_spec = _job_spec(rjob), _job_spec(old_by_name[name])
        if spec.get("completionMode") != _INDEXED:
            continue
        path = f"spec.replicatedJobs[{index}].template.spec"
        parallelism, completions = spec.get("parallelism"), spec.get("completions")
        parallelism_changed = parallelism != old_spec.get("parallelism")
        completions_changed = completions != old_spec.get("completions")
        if not (parallelism_changed or completions_changed):
            continue
        if terminal:
            problems.append(
                FieldError.forbidden(
                    path,
                    "Cannot mutate parallelism or completions when JobSet is in a terminal state (Completed or Failed)",
                )
            )
            continue
        if parallelism_changed and parallelism is not None and int(parallelism) < 1:
            problems.append(
                FieldError.invalid(f"{path}.parallelism", int(parallelism), "parallelism must be >= 1")
            )
        if completions_changed and completions is not None and int(completions) < 1:
            problems.append(
                FieldError.invalid(f"{path}.completions", int(completions), "completions must be >= 1")
            )
        if parallelism is not None and completions is not None and int(parallelism) != int(completions):
            problems.append(
                FieldError.invalid(
                    f"{path}.completions",
                    int(completions),
                    "completions must be equal to parallelism for Elastic Indexed Jobs",
                )
            )
    return problems


def mask_scaling(old_rjobs: list[Object], new_rjobs: list[Object]) -> None:
    """In the copy of the new replicated jobs the immutability check compares: each Indexed one
    of an old one's name gets the old ``parallelism`` and ``completions`` (so only the rules
    above judge them)."""
    old_by_name = {str((r or {}).get("name") or ""): r for r in old_rjobs}
    for rjob in new_rjobs:
        name = str((rjob or {}).get("name") or "")
        if name not in old_by_name or _job_spec(rjob).get("completionMode") != _INDEXED:
            continue
        old_spec = _job_spec(old_by_name[name])
        spec = rjob.setdefault("template", {}).setdefault("spec", {})
        for key in _SCALING:
            if old_spec.get(key) is None:
                spec.pop(key, None)
            else:
                spec[key] = copy.deepcopy(old_spec[key])
