"""JobSet v0.12.0's own steps of the JobSet and Pod webhooks (level v2.3;
docs/behaviour/jobset-v0.12.md §2).

What v0.12.0 (``pkg/webhooks/jobset_webhook.go``, ``pod_webhook.go``) does differently from v0.10.1:

* built with controller-runtime v0.24: a defaulter that changed nothing is answered with no patch
  at all; with k8s.io/api v0.36 (``gocodec.JOBSET_V0_12_TYPES_FILE``, which also has
  ``volumeClaimPolicies`` and the new status fields);
* refusals are ``apierrors.NewInvalid``: 422 ``Invalid``, ``JobSet.jobset.x-k8s.io "<name>" is
  invalid: <aggregate>``, a plain error as ``<nil>: Internal error: <text>``;
* ``volumeClaimPolicies[].retentionPolicy`` defaults to ``{whenDeleted: Delete}`` and the
  policies are checked (names, a matching volumeMount, no clashing volume, an existing PVC);
* the coordinator's endpoint must be a valid label value;
* the release's feature gates (``trainer.features``, off by default): with ``InPlaceRestart``
  off the restart strategy ``InPlaceRestart`` is refused, on its replicated jobs must suit it;
  with ``RestartJob`` off the ``RestartJob`` actions are refused, on they limit ``replicas``;
  with ``ElasticJobSet`` on an Indexed replicated job may change ``parallelism`` and
  ``completions`` (``v0_12_elastic``);
* on update while suspended the Kueue-mutable fields are taken from the old replicated job of
  the same name;
* the Pod defaulter labels every JobSet pod with its priority, and a leader on a Node that is
  gone refuses the follower (v0.10.1 took "").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from manager.client.errors import ApiError, NotFound
from manager.meta import gvk
from manager.meta.field import FieldError
from manager.meta.gotext import go_quote
from manager.meta.object import Json as Object
from manager.meta.object import annotations_of, labels_of, name_of, namespace_of
from manager.meta.validation import is_dns1123_subdomain, is_valid_label_value
from manager.scheme import GroupVersionKind
from manager.webhook import CustomDefaulter, Denied, Handler, defaulting_handler
from manager.webhook.custom import Decode, Encode
from trainer import features
from trainer.api import gocodec
from trainer.api import jobset_constants as c
from trainer.api.v2_3 import jobset_constants as c23
from trainer.jobset.levels import v0_12_elastic as elastic
from trainer.jobset.levels.admission import Problem
from trainer.jobset.placement import PlacementError

__all__ = ["STEPS", "default_retention_policies"]

GROUP, KIND, API_VERSION = "jobset.x-k8s.io", "JobSet", "jobset.x-k8s.io/v1alpha2"
PVC = GroupVersionKind("", "v1", "PersistentVolumeClaim")
MAX_VOLUME_CLAIM_LENGTH = 63
MAX_INT32 = 2147483647
NIL_PATH = "<nil>"
"""What a nil ``*field.Path`` prints: the field of a plain error made a ``field.InternalError``."""
TYPES = gocodec.JOBSET_V0_12_TYPES_FILE


def _in_place_restart(js: Object) -> bool:
    policy = (js.get("spec") or {}).get("failurePolicy")
    return policy is not None and policy.get("restartStrategy") == c23.InPlaceRestart


def default_retention_policies(spec: Object) -> None:
    """``spec.volumeClaimPolicies``: each policy without a retention policy gets
    ``{whenDeleted: Delete}`` (in place), what the defaulting webhook writes on create."""
    for policy in spec.get("volumeClaimPolicies") or []:
        if isinstance(policy, dict) and policy.get("retentionPolicy") is None:
            policy["retentionPolicy"] = {"whenDeleted": c23.RetentionPolicyDelete}


def _field_errors(problems: Sequence[Problem]) -> list[FieldError]:
    """``toFieldErrorList``: field errors kept, a plain error as ``InternalError(nil, err)``."""
    return [p if isinstance(p, FieldError) else FieldError.internal(NIL_PATH, p) for p in problems]


def _marshal(value: Any, path: str) -> str:
    return gocodec.marshal(value, gocodec.field_type(API_VERSION, KIND, path, TYPES))


def _has_mount(containers: list[Object], claim: str) -> bool:
    return any(
        (mount or {}).get("name") == claim
        for container in containers
        for mount in (container or {}).get("volumeMounts") or []
    )


def _pod_spec(rjob: Object) -> Object:
    spec: Object = (
        (((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")
    ) or {}
    return spec


def _replicated_jobs_claim_problems(rjobs: list[Object], claim: str) -> list[Problem]:
    """``validateReplicatedJobsVolumeClaims``: no volume named as the claim, and a mount of it
    in an init container or container of at least one replicated job."""
    problems: list[Problem] = []
    mounted = False
    for index, rjob in enumerate(rjobs):
        pod_spec = _pod_spec(rjob or {})
        for vol_index, volume in enumerate(pod_spec.get("volumes") or []):
            if (volume or {}).get("name") == claim:
                problems.append(
                    FieldError.invalid(
                        f"spec.replicatedJobs[{index}].template.spec.template.spec.volumes[{vol_index}].name",
                        claim,
                        f"volume name conflicts with VolumeClaimPolicy template name: {claim}",
                    )
                )
        if not mounted:
            mounted = _has_mount(pod_spec.get("initContainers") or [], claim) or _has_mount(
                pod_spec.get("containers") or [], claim
            )
    if not mounted:
        problems.append(
            FieldError.invalid(
                "spec.replicatedJobs",
                rjobs,
                f"replicatedJob containers don't have a matching volumeMount: {claim} from VolumeClaimPolicies",
                value_text=_marshal(rjobs, "spec.replicatedJobs"),
            )
        )
    return problems


def _pvc_spec(value: Any) -> Object:
    """A PersistentVolumeClaimSpec as Go's typed struct holds it (for ``reflect.DeepEqual``)."""
    spec_type = gocodec.field_type(API_VERSION, KIND, "spec.volumeClaimPolicies.templates.spec", TYPES)
    assert spec_type.struct is not None
    return gocodec.Codec("v1", "PersistentVolumeClaimSpec", spec_type.struct).encode(dict(value or {}))


class _Steps:
    """AdmissionSteps of JobSet v0.12.0."""

    @property
    def go_types(self) -> str:
        return TYPES

    async def watch(self, cache: Any) -> None:
        """The PVCs a volume claim policy names are read from the cache."""
        await cache.get_informer(PVC)

    def defaulting_handler(
        self, defaulter: CustomDefaulter[Object], *, decode: Decode[Object], encode: Encode[Object]
    ) -> Handler:
        return defaulting_handler(defaulter, decode=decode, encode=encode, unchanged_without_patch=True)

    def default_jobset(self, js: Object) -> None:
        """Each volume claim policy without a retention policy: ``{whenDeleted: Delete}``."""
        default_retention_policies(js.get("spec") or {})

    def restart_strategy_problems(self, js: Object) -> list[Problem]:
        """``InPlaceRestart`` only with its feature gate on."""
        if _in_place_restart(js) and not features.enabled(features.InPlaceRestart):
            return [
                "InPlaceRestart restart strategy cannot be set when InPlaceRestart feature gate is disabled"
            ]
        return []

    def failure_action_problems(self, js: Object) -> tuple[list[Problem], bool]:
        """A RestartJob action: with the RestartJob gate off, refused and the failure-policy
        checks end there; on, no replicated job may have more than 1024 replicas (the length
        limit of the status's per-Job counts) and the checks go on."""
        rules = ((js.get("spec") or {}).get("failurePolicy") or {}).get("rules") or []
        if not any(
            rule.get("action") in (c23.RestartJob, c23.RestartJobAndIgnoreMaxRestarts) for rule in rules
        ):
            return [], True
        if not features.enabled(features.RestartJob):
            return [
                "RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not allowed when "
                "RestartJob feature gate is disabled"
            ], False
        for rjob in (js.get("spec") or {}).get("replicatedJobs") or []:
            if int((rjob or {}).get("replicas") or 0) > c23.JobRestartsMaxItems:
                return [
                    "JobSet cannot have a failure policy rule with RestartJob or RestartJobAndIgnoreMaxRestarts "
                    f"action and a replicated job with replicas > {c23.JobRestartsMaxItems}"
                ], True
        return [], True

    def replicated_job_problems(self, js: Object, index: int, rjob: Object) -> list[Problem]:
        """With the InPlaceRestart gate on and that strategy: each replicated job's Jobs must
        never fail (``backoffLimit`` MaxInt32), replace only failed pods, and have
        ``completions`` equal to ``parallelism`` (the controller counts the pods by them)."""
        if not (features.enabled(features.InPlaceRestart) and _in_place_restart(js)):
            return []
        spec = ((rjob or {}).get("template") or {}).get("spec") or {}
        name = str((rjob or {}).get("name") or "")
        path = f"spec.replicatedJobs[{index}].template.spec"
        problems: list[Problem] = []
        backoff = spec.get("backoffLimit")
        if backoff is None or int(backoff) != MAX_INT32:
            problems.append(
                FieldError.invalid(
                    f"{path}.backoffLimit",
                    backoff,
                    f"replicatedJob {name}: must be set to {MAX_INT32} (MaxInt32) when in-place restart is enabled",
                )
            )
        replacement = spec.get("podReplacementPolicy")
        if replacement != "Failed":
            problems.append(
                FieldError.invalid(
                    f"{path}.podReplacementPolicy",
                    replacement,
                    f"replicatedJob {name}: must be set to Failed when in-place restart is enabled",
                )
            )
        completions, parallelism = spec.get("completions"), spec.get("parallelism")
        if completions is None or parallelism is None or int(completions) != int(parallelism):
            problems.append(
                FieldError.invalid(
                    f"{path}.completions",
                    completions,
                    f"replicatedJob {name}: completions and parallelism must be set and equal to each other "
                    "when in-place restart is enabled",
                )
            )
        return problems

    def coordinator_problems(self, js: Object) -> list[Problem]:
        """``validateCoordinatorLabelValue``: the coordinator endpoint is a label value."""
        spec = js.get("spec") or {}
        coord = spec.get("coordinator") or {}
        subdomain = (spec.get("network") or {}).get("subdomain") or name_of(js)
        endpoint = (
            f"{name_of(js)}-{coord.get('replicatedJob') or ''}-{int(coord.get('jobIndex') or 0)}-"
            f"{int(coord.get('podIndex') or 0)}.{subdomain}"
        )
        errs = is_valid_label_value(endpoint)
        if not errs:
            return []
        return [
            f"spec will lead to invalid label value {go_quote(endpoint)} for coordinator label "
            f"{go_quote(c.CoordinatorKey)} "
            f"(long JobSet / ReplicatedJob / SubDomain name?): {', '.join(errs)}"
        ]

    async def volume_claim_problems(self, js: Object, reader: Any) -> list[Problem]:
        """``validateVolumeClaimPolicies``, per template of each policy in order."""
        spec = js.get("spec") or {}
        rjobs = list(spec.get("replicatedJobs") or [])
        namespace = namespace_of(js)
        problems: list[Problem] = []
        claim_names: set[str] = set()
        for policy_index, policy in enumerate(spec.get("volumeClaimPolicies") or []):
            path = f"spec.volumeClaimPolicies[{policy_index}]"
            for template_index, template in enumerate(policy.get("templates") or []):
                template_path = f"{path}.template[{template_index}]"
                claim = str(((template or {}).get("metadata") or {}).get("name") or "")
                if claim in claim_names:
                    problems.append(
                        FieldError.invalid(
                            f"{template_path}.name",
                            claim,
                            "names must be unique for VolumeClaimPolicies template",
                        )
                    )
                problems += [
                    FieldError.invalid(f"{template_path}.name", claim, m) for m in is_dns1123_subdomain(claim)
                ]
                pvc_name = f"{claim}-{name_of(js)}"
                if len(pvc_name) > MAX_VOLUME_CLAIM_LENGTH:
                    problems.append(
                        FieldError.invalid(
                            f"{template_path}.name", claim, "VolumeClaimPolicies template name is too long"
                        )
                    )
                problems += _replicated_jobs_claim_problems(rjobs, claim)
                problems += await self._existing_pvc_problems(
                    reader, policy, template or {}, path, template_path, pvc_name, namespace
                )
                claim_names.add(claim)
        return problems

    async def _existing_pvc_problems(
        self,
        reader: Any,
        policy: Object,
        template: Object,
        path: str,
        template_path: str,
        pvc_name: str,
        namespace: str,
    ) -> list[Problem]:
        """An existing PVC of that name must have the template's spec and be retained."""
        try:
            existing = await reader.get(PVC, pvc_name, namespace=namespace)
        except NotFound:
            return []
        except ApiError as err:
            return [FieldError.internal(template_path, f"failed to check for existing PVC {pvc_name}: {err}")]
        problems: list[Problem] = []
        if _pvc_spec(existing.get("spec")) != _pvc_spec(template.get("spec")):
            problems.append(
                FieldError.invalid(
                    f"{template_path}.spec",
                    template.get("spec"),
                    f"spec does not match existing PVC {pvc_name} in namespace {namespace}",
                    value_text=_marshal(template.get("spec"), "spec.volumeClaimPolicies.templates.spec"),
                )
            )
        retention = policy.get("retentionPolicy")
        if retention is not None and retention.get("whenDeleted") != c23.RetentionPolicyRetain:
            problems.append(
                FieldError.invalid(
                    f"{path}.retentionPolicy.whenDeleted",
                    retention.get("whenDeleted"),
                    "retentionPolicy must be retain when PVC exists",
                )
            )
        return problems

    def create_denial(self, js: Object, problems: Sequence[Problem]) -> Denied:
        return Denied.invalid(GROUP, KIND, name_of(js), _field_errors(problems))

    def kueue_pairs(
        self, old_rjobs: list[Object], new_rjobs: list[Object]
    ) -> list[tuple[Object, Object]] | None:
        """By name: a new replicated job without an old one of its name keeps its fields."""
        old_by_name = {str((rjob or {}).get("name") or ""): rjob for rjob in old_rjobs}
        return [
            (rjob, old_by_name[name])
            for rjob in new_rjobs
            if (name := str((rjob or {}).get("name") or "")) in old_by_name
        ]

    def scaling_problems(self, old: Object, new: Object, new_rjobs: list[Object]) -> list[FieldError]:
        """With the ElasticJobSet gate on: the scaling rules, and the Indexed replicated jobs'
        ``parallelism``/``completions`` left out of the immutability check."""
        if not features.enabled(features.ElasticJobSet):
            return []
        problems = elastic.scaling_problems(old, new)
        elastic.mask_scaling(list((old.get("spec") or {}).get("replicatedJobs") or []), new_rjobs)
        return problems

    def update_denial(self, js: Object, problems: Sequence[FieldError]) -> Denied:
        return Denied.invalid(GROUP, KIND, name_of(js), list(problems))

    def pod_labelled_with_priority(self, pod: Object) -> bool:
        """Every JobSet pod (annotation ``jobset-name``) but those of the node-selector strategy."""
        annotations = annotations_of(pod)
        return c.JobSetNameKey in annotations and c.NodeSelectorStrategyKey not in annotations

    async def leader_topology(self, reader: Any, leader: Object, topology_key: str) -> str:
        """The Node read's error (``NotFound`` included) refuses the follower."""
        node = await reader.get(gvk.NODE, str((leader.get("spec") or {}).get("nodeName") or ""))
        labels = labels_of(node)
        if topology_key not in labels:
            raise PlacementError(f"node does not have topology label: {topology_key}")
        return str(labels[topology_key])


STEPS = _Steps()
