"""``spec.volumeClaimPolicies`` of JobSet v0.12.0 (upstream's volume_claim_policy.go;
docs/behaviour/jobset-v0.12.md §1.4): the shared PVCs a JobSet's pods may mount.

Pure: the PVCs to create and the claim volumes of a child Job's pod template. The reconciler
creates the PVCs; the garbage collector deletes the owned ones with their JobSet.
"""

from __future__ import annotations

from manager.meta.object import Json as Object
from manager.meta.object import meta_of, name_of
from trainer.api import jobset_constants as c
from trainer.api.v2_3 import jobset_constants as c23
from trainer.jobset.objects import owner_reference

__all__ = ["add_volumes", "has_volume_mount", "policies_of", "pvc_name", "volume_claims"]


def pvc_name(jobset_name: str, claim_name: str) -> str:
    """``<claim>-<jobset>``: one PVC per claim template and JobSet, shared by all its pods."""
    return f"{claim_name}-{jobset_name}"


def policies_of(js: Object) -> list[Object]:
    return list((js.get("spec") or {}).get("volumeClaimPolicies") or [])


def _claim_name(template: Object) -> str:
    return str((template.get("metadata") or {}).get("name") or "")


def _deleted_with_jobset(policy: Object) -> bool:
    """Owned (so collected with the JobSet) only for ``retentionPolicy.whenDeleted: Delete``.

    Quirk: no ``retentionPolicy`` at all keeps the PVC, although the API says Delete is the
    default (the webhook fills it in on create, so only an object that skipped it sees this).
    Port note: a present policy without ``whenDeleted`` (Go would dereference nil; the CRD
    defaults it) counts as the CRD's default, Delete.
    """
    retention = policy.get("retentionPolicy")
    if retention is None:
        return False
    return (retention.get("whenDeleted") or c23.RetentionPolicyDelete) == c23.RetentionPolicyDelete


def volume_claims(js: Object) -> list[list[Object]]:
    """The PVCs of each policy, in order, as upstream's createPVCsIfNecessary builds them: the
    template's labels plus ``jobset-name``, its annotations and spec, nothing else."""
    namespace = str(meta_of(js).get("namespace") or "")
    out: list[list[Object]] = []
    for policy in policies_of(js):
        claims = []
        for template in policy.get("templates") or []:
            template_meta = template.get("metadata") or {}
            meta: Object = {
                "name": pvc_name(name_of(js), _claim_name(template)),
                "namespace": namespace,
                "labels": {**(template_meta.get("labels") or {}), c.JobSetNameKey: name_of(js)},
            }
            if template_meta.get("annotations"):
                meta["annotations"] = dict(template_meta["annotations"])
            if _deleted_with_jobset(policy):
                meta["ownerReferences"] = [owner_reference(js)]
            claims.append(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": meta,
                    "spec": dict(template.get("spec") or {}),
                }
            )
        out.append(claims)
    return out


def has_volume_mount(job: Object, volume_name: str) -> bool:
    """Whether a container or init container of the Job's pod template mounts ``volume_name``."""
    pod_spec = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    for key in ("containers", "initContainers"):
        for container in pod_spec.get(key) or []:
            if any(m.get("name") == volume_name for m in container.get("volumeMounts") or []):
                return True
    return False


def add_volumes(job: Object, js: Object) -> None:
    """Upstream's addVolumes: a claim volume for each template the Job's containers mount (a
    template no container of this Job mounts adds nothing to it)."""
    for policy in policies_of(js):
        for template in policy.get("templates") or []:
            name = _claim_name(template)
            if not has_volume_mount(job, name):
                continue
            pod_spec = job.setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})
            pod_spec["volumes"] = [
                *(pod_spec.get("volumes") or []),
                {"name": name, "persistentVolumeClaim": {"claimName": pvc_name(name_of(js), name)}},
            ]
