"""JobSet admission webhooks: defaulting on CREATE (docs/behaviour/jobset.md §1.7), validation on CREATE and
UPDATE (§1.8, §1.9); what JobSet v0.12.0 (level v2.3) does differently is a step of the level's
``AdmissionSteps`` (``trainer/jobset/levels``, docs/behaviour/jobset-v0.12.md §2).

Objects are the JSON dicts the API server sends, so a field this code does not know is never
touched. Denials carry upstream's texts; how the errors make the answer is the release's step
(v0.10.1: create errors joined with newlines, Go's ``errors.Join``, update errors aggregated as
``[e1, e2]``, both 403; v0.12.0: 422 ``apierrors.NewInvalid``). Without ``steps`` the handlers
are v0.10.1's (level v2.1, the default).
"""

from __future__ import annotations

import copy
import re
from collections import defaultdict
from typing import Any

from manager.meta.field import FieldError
from manager.meta.object import Json as Object
from manager.meta.validation import is_dns1035_label, is_dns1123_subdomain, is_domain_prefixed_path
from manager.webhook import Handler, validating_handler
from trainer.api import gocodec
from trainer.api import jobset_constants as c
from trainer.jobset.levels import v0_10_admission
from trainer.jobset.levels.admission import AdmissionSteps, Problem
from webhooks import typed

API_VERSION, KIND = "jobset.x-k8s.io/v1alpha2", "JobSet"
MUTATE_PATH = "/mutate-jobset-x-k8s-io-v1alpha2-jobset"
VALIDATE_PATH = "/validate-jobset-x-k8s-io-v1alpha2-jobset"

MAX_INT32 = 2147483647
MAX_MANAGED_BY_LENGTH = 63
DNS1035_MAX_LENGTH_EXCEEDED = "must be no more than 63 characters"
GROUP_NAME_TOO_LONG = ".spec.replicatedJob[].groupName is too long, must be less than 63 characters"
JOB_NAME_TOO_LONG = "JobSet name is too long, job names generated for this JobSet will exceed 63 characters"
POD_NAME_TOO_LONG = "JobSet name is too long, pod names generated for this JobSet will exceed 63 characters"
SUBDOMAIN_TOO_LONG = ".spec.network.subdomain is too long, must be less than 63 characters"
RULE_NAME_FMT = "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
_RULE_NAME = re.compile(RULE_NAME_FMT)


_V0_10: AdmissionSteps = v0_10_admission.STEPS


def _invalid(path: str, value: Any, detail: str, *, value_text: str | None = None) -> FieldError:
    return FieldError.invalid(path, value, detail, value_text=value_text)


def _spec(js: Object) -> Object:
    result: Object = js.setdefault("spec", {})
    return result


def _child(parent: Object, key: str) -> Object:
    """``parent[key]`` as a dict, created when absent or null (Go decodes null as a zero struct)."""
    if parent.get(key) is None:
        parent[key] = {}
    result: Object = parent[key]
    return result


# -- defaulting (1.7) -------------------------------------------------------------------------------


class JobSetDefaulter:
    """Fills what the controller assumes present; applied on CREATE only."""

    def __init__(self, steps: AdmissionSteps = _V0_10) -> None:
        self.steps = steps

    async def default(self, js: Object) -> None:
        default_jobset(js, self.steps)


def default_jobset(js: Object, steps: AdmissionSteps = _V0_10) -> None:
    spec = _spec(js)
    if spec.get("successPolicy") is None:
        spec["successPolicy"] = {"operator": c.OperatorAll}
    if spec.get("startupPolicy") is None:
        spec["startupPolicy"] = {"startupPolicyOrder": c.AnyOrder}
    for rjob in spec.get("replicatedJobs") or []:
        job_spec = _child(_child(rjob, "template"), "spec")
        if job_spec.get("completionMode") is None:
            job_spec["completionMode"] = "Indexed"
        pod_spec = _child(_child(job_spec, "template"), "spec")
        if not pod_spec.get("restartPolicy"):
            pod_spec["restartPolicy"] = "OnFailure"
    network = spec.get("network")
    if network is None:
        network = spec["network"] = {}
    if network.get("enableDNSHostnames") is None:
        network["enableDNSHostnames"] = True
    if network.get("publishNotReadyAddresses") is None:
        network["publishNotReadyAddresses"] = True
    policy = spec.get("failurePolicy")
    if policy is not None:
        for i, rule in enumerate(policy.get("rules") or []):
            if not rule.get("name"):
                rule["name"] = f"failurePolicyRule{i}"
    steps.default_jobset(js)


# -- validation: create (1.8) -----------------------------------------------------------------------


def _replace_too_long(messages: list[str], replacement: str) -> list[str]:
    return [replacement if DNS1035_MAX_LENGTH_EXCEEDED in m else m for m in messages]


def _validate_replicated_job(
    js: Object, index: int, rjob: Object, seen: set[str], steps: AdmissionSteps = _V0_10
) -> list[Problem]:
    errs: list[Problem] = []
    path = f"spec.replicatedJobs[{index}]"
    name = str(rjob.get("name") or "")
    seen.add(name)
    job_spec = (rjob.get("template") or {}).get("spec") or {}
    parallelism = job_spec.get("parallelism")
    parallelism = 1 if parallelism is None else int(parallelism)
    # replicas and groupName as the Go struct holds them: an absent one is 0 or "" (the CRD's
    # defaults, 1 and "default", are the API server's, before a validating webhook is called;
    # a review sent straight here is judged as the Go webhook judges it)
    replicas = int(rjob.get("replicas") or 0)
    if parallelism * replicas > MAX_INT32:
        errs.append(
            f"the product of replicas and parallelism must not exceed {MAX_INT32} for replicatedJob '{name}'"
        )
    group = str(rjob.get("groupName") or "")
    for msg in _replace_too_long(is_dns1035_label(group), GROUP_NAME_TOO_LONG):
        errs.append(_invalid(f"{path}.groupName", group, msg))
    js_name = str((js.get("metadata") or {}).get("name") or "")
    longest_job = f"{js_name}-{name}-{replicas - 1}"
    for msg in _replace_too_long(is_dns1035_label(longest_job), JOB_NAME_TOO_LONG):
        errs.append(_invalid(f"{path}.name", longest_job, msg))
    completions = job_spec.get("completions")
    if job_spec.get("completionMode") == "Indexed" and completions is not None:
        longest_pod = f"{longest_job}-{int(completions) - 1}-abcde"
        for msg in _replace_too_long(is_dns1035_label(longest_pod), POD_NAME_TOO_LONG):
            errs.append(_invalid(f"{path}.name", longest_job, msg))  # upstream quotes the Job name
    for dep in rjob.get("dependsOn") or []:
        if dep.get("name") not in seen:
            errs.append(f"replicatedJob: {name} cannot depend on replicatedJob: {dep.get('name')}")
    errs += steps.replicated_job_problems(js, index, rjob)
    return errs


def _validate_failure_policy(
    js: Object, policy: Object, names: set[str], steps: AdmissionSteps
) -> list[Problem]:
    errs, go_on = steps.failure_action_problems(js)
    if not go_on:
        return errs
    by_name: dict[str, list[int]] = defaultdict(list)
    for index, rule in enumerate(policy.get("rules") or []):
        rule_name = str(rule.get("name") or "")
        if not 1 <= len(rule_name) <= 128:
            errs.append(
                f"invalid failure policy rule name of length {len(rule_name)}, the rule name must be at least 1 "
                "characters long and at most 128 characters long"
            )
        by_name[rule_name].append(index)
        if not _RULE_NAME.match(rule_name):
            errs.append(
                f"invalid failure policy rule name '{rule_name}', a failure policy rule name must start with an "
                "alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and "
                "must end with an alphanumeric character or '_'"
            )
        for target in rule.get("targetReplicatedJobs") or []:
            if target not in names:
                errs.append(
                    f"invalid replicatedJob name '{target}' in failure policy does not appear in .spec.ReplicatedJobs"
                )
        for reason in rule.get("onJobFailureReasons") or []:
            if reason not in c.JobFailureReasons:
                errs.append(
                    f"invalid job failure reason '{reason}' in failure policy is not a recognized job failure reason"
                )
    # PORT NOTE: Go walks a map here (random order); we report duplicates by first appearance.
    for rule_name, indices in by_name.items():
        if len(indices) > 1:
            joined = " ".join(str(i) for i in indices)
            errs.append(
                f"rule names are not unique, rules with indices [{joined}] all have the same name '{rule_name}'"
            )
    return errs


def _validate_coordinator(spec: Object) -> str | None:
    coord = spec.get("coordinator") or {}
    rjob_name = coord.get("replicatedJob")
    rjob = next((r for r in spec.get("replicatedJobs") or [] if r.get("name") == rjob_name), None)
    if rjob is None:
        return f"coordinator replicatedJob {rjob_name} does not exist"
    job_index = int(coord.get("jobIndex") or 0)
    replicas = rjob.get("replicas")
    replicas = 1 if replicas is None else int(replicas)
    if job_index < 0 or job_index >= replicas:
        return f"coordinator job index {job_index} is invalid for replicatedJob {rjob_name}"
    job_spec = (rjob.get("template") or {}).get("spec") or {}
    completions = job_spec.get("completions")
    if job_spec.get("completionMode") != "Indexed" or completions is None:
        return "job for coordinator pod must be indexed completion mode, and completions number must be set"
    pod_index = int(coord.get("podIndex") or 0)
    if pod_index < 0 or pod_index >= int(completions):
        return f"coordinator pod index {pod_index} is invalid for replicatedJob {rjob_name} job index {job_index}"
    return None


def create_problems(js: Object, steps: AdmissionSteps = _V0_10) -> list[Problem]:
    """Every create check but the volume claims' (which read PVCs), in upstream's order."""
    spec = js.get("spec") or {}
    rjobs = list(spec.get("replicatedJobs") or [])
    errs: list[Problem] = steps.restart_strategy_problems(js)
    if rjobs and rjobs[0].get("dependsOn") is not None:
        errs.append("DependsOn can't be set for the first ReplicatedJob")
    network = spec.get("network")
    if network is not None and network.get("subdomain"):
        subdomain = str(network["subdomain"])
        path = "spec.network.subdomain"
        errs += [_invalid(path, subdomain, m) for m in is_dns1123_subdomain(subdomain)]
        errs += [
            _invalid(path, subdomain, m)
            for m in _replace_too_long(is_dns1035_label(subdomain), SUBDOMAIN_TOO_LONG)
        ]
    managed_by = spec.get("managedBy")
    if managed_by is not None:
        errs += is_domain_prefixed_path("spec.managedBy", str(managed_by))
        if len(str(managed_by)) > MAX_MANAGED_BY_LENGTH:
            errs.append(FieldError.too_long("spec.managedBy", MAX_MANAGED_BY_LENGTH))
    names: set[str] = set()
    for index, rjob in enumerate(rjobs):
        errs += _validate_replicated_job(js, index, rjob, names, steps)
    # PORT NOTE: Go panics on a nil successPolicy; the defaulter always sets it. Nil = no targets.
    for target in (spec.get("successPolicy") or {}).get("targetReplicatedJobs") or []:
        if target not in names:
            errs.append(f"invalid replicatedJob name '{target}' does not appear in .spec.ReplicatedJobs")
    if spec.get("failurePolicy") is not None:
        errs += _validate_failure_policy(js, spec["failurePolicy"], names, steps)
    if spec.get("coordinator") is not None:
        coord_err = _validate_coordinator(spec)
        if coord_err:
            errs.append(coord_err)
        errs += steps.coordinator_problems(js)
    return errs


def validate_create(js: Object) -> list[str]:
    """v0.10.1's create checks as the texts its denial joins; an empty list means valid."""
    return [str(p) for p in create_problems(js)]


# -- validation: update (1.9) -------------------------------------------------------------------------

_KUEUE_MUTABLE_META = ("annotations", "labels")
_KUEUE_MUTABLE_SPEC = ("nodeSelector", "tolerations", "schedulingGates")


def _pod_template(rjob: Object) -> Object:
    result: Object = rjob.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
    return result


def _copy_kueue_fields(target: Object, source: Object) -> None:
    target_tpl, source_tpl = _pod_template(target), _pod_template(copy.deepcopy(source))
    for key in _KUEUE_MUTABLE_META:
        _assign(target_tpl.setdefault("metadata", {}), key, (source_tpl.get("metadata") or {}).get(key))
    for key in _KUEUE_MUTABLE_SPEC:
        _assign(target_tpl.setdefault("spec", {}), key, (source_tpl.get("spec") or {}).get(key))


def _assign(target: Object, key: str, value: Any) -> None:
    if value is None:
        target.pop(key, None)
    else:
        target[key] = value


def _semantic(value: Any) -> Any:
    """Semantic equality: empty maps and lists equal absent ones (apimachinery's DeepEqual).

    Each value is normalised once: normalising it again to test for emptiness doubled the work
    at every level, 2^depth calls for a nested value (a 40-level object took minutes)."""
    if isinstance(value, dict):
        normalised = ((k, _semantic(x)) for k, x in value.items())
        return {k: x for k, x in normalised if x not in (None, {}, [])}
    if isinstance(value, list):
        return [_semantic(x) for x in value]
    return value


def update_problems(old: Object, new: Object, steps: AdmissionSteps = _V0_10) -> list[FieldError]:
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    munged = copy.deepcopy(new_spec)
    old_rjobs = list(old_spec.get("replicatedJobs") or [])
    new_rjobs = list(munged.get("replicatedJobs") or [])
    errs: list[FieldError] = steps.scaling_problems(old, new, new_rjobs)
    immutable_rjobs = False
    if old_spec.get("suspend") is True or new_spec.get("suspend") is True:
        pairs = steps.kueue_pairs(old_rjobs, new_rjobs)
        if pairs is None:
            immutable_rjobs = True
        else:
            for rjob, old_rjob in pairs:
                _copy_kueue_fields(rjob, old_rjob)
    if immutable_rjobs or _semantic(new_rjobs) != _semantic(old_rjobs):
        # Go prints the copy it compared: the Kueue fields (and, with ElasticJobSet, the scaled
        # values) already taken from the old object
        rjobs = munged.get("replicatedJobs")
        # Go prints the typed []ReplicatedJob (field order, zero fields), not the JSON we got
        rjobs_type = gocodec.field_type(API_VERSION, KIND, "spec.replicatedJobs", steps.go_types)
        typed = gocodec.marshal(rjobs, rjobs_type) if isinstance(rjobs, dict | list) else None
        errs.append(_invalid("spec.replicatedJobs", rjobs, "field is immutable", value_text=typed))
    if munged.get("managedBy") != old_spec.get("managedBy"):
        errs.append(_invalid("spec.managedBy", munged.get("managedBy"), "field is immutable"))
    return errs


def validate_update(old: Object, new: Object) -> list[str]:
    """v0.10.1's update checks as the texts its denial aggregates; an empty list means valid."""
    return [str(p) for p in update_problems(old, new)]


class JobSetValidator:
    """CREATE and UPDATE checks; DELETE is always allowed. ``reader`` reads the PVCs a
    JobSet's volume claim policies name (v0.12.0)."""

    def __init__(self, steps: AdmissionSteps = _V0_10, reader: Any = None) -> None:
        self.steps = steps
        self.reader = reader

    async def validate_create(self, js: Object) -> list[str] | None:
        problems = create_problems(js, self.steps)
        problems += await self.steps.volume_claim_problems(js, self.reader)
        if problems:
            raise self.steps.create_denial(js, problems)
        return None

    async def validate_update(self, old: Object, new: Object) -> list[str] | None:
        problems = update_problems(old, new, self.steps)
        if problems:
            raise self.steps.update_denial(new, problems)
        return None

    async def validate_delete(self, js: Object) -> list[str] | None:
        return None


def mutating_handler(steps: AdmissionSteps = _V0_10) -> Handler:
    """The defaulter behind Go's typed decode and re-encode (the patch carries Go's zero fields)."""
    return steps.defaulting_handler(
        JobSetDefaulter(steps),
        decode=typed.decoder(API_VERSION, KIND, typed_view=True, types_file=steps.go_types),
        encode=typed.encoder(API_VERSION, KIND, types_file=steps.go_types),
    )


def validation_handler(steps: AdmissionSteps = _V0_10, reader: Any = None) -> Handler:
    """The validator behind Go's typed decode (an ill-typed object is answered 400)."""
    return validating_handler(
        JobSetValidator(steps, reader), decode=typed.decoder(API_VERSION, KIND, types_file=steps.go_types)
    )
