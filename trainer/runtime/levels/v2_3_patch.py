"""Level v2.3: a runtime patch's ``template.spec`` as Go's ``json.Marshal`` writes it.

Trainer v2.3.0's ``mergeRuntimePatches`` does not merge the TrainJob's JSON: it merges
``json.Marshal(runtimePatch.TrainingRuntimeSpec.Template.Spec)``, the typed ``JobSetSpecPatch``
re-encoded, onto the JobSetSpec with ``strategicpatch.StrategicMergePatch``. What that encoding
drops or keeps is visible in the JobSet the TrainJob gets:

* ``omitempty`` drops empty values of non-pointer fields: an env var's ``value: ""``, a volume
  mount's ``readOnly: false`` or ``subPath: ""`` are not in the patch, so the runtime's value
  stays (a JSON document would set them);
* a pointer to an empty struct is kept: a volume's ``emptyDir: {}`` stays in the patch (a
  document cleaned of empty maps would lose the volume's source);
* quantities are written canonical (``1024Mi`` as ``1Gi``), times in RFC 3339 seconds;
* the job- and pod-level ``metadata`` are whole ``metav1.ObjectMeta``: ``name``, ``namespace``
  and ``finalizers`` (which the CRD lets through) merge into the templates with the labels and
  annotations;
* unknown fields are dropped (the CRD has pruned them already).

The patch types are v2.3.0's (``pkg/apis/trainer/v1alpha1/trainjob_types.go``); the core/v1 and
meta/v1 types inside them are ``trainer.api.gocodec``'s (``openapi/go-types.json``).
"""

from __future__ import annotations

import json
from typing import Any

from trainer.api import gocodec
from trainer.api.gocodec import GoField, GoStruct, GoType

__all__ = ["JOBSET_SPEC_PATCH", "marshal_spec_patch"]

_CORE = "k8s.io/api/core/v1"
_META = "k8s.io/apimachinery/pkg/apis/meta/v1"
_TRAINER = "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"


def _known(key: str) -> GoType:
    package, _, name = key.rpartition(".")
    return GoType("struct", f"{package.rpartition('/')[2]}.{name}", key, struct=gocodec.codec(key))


def _ptr(t: GoType) -> GoType:
    return GoType("ptr", f"*{t.go}", elem=t)


def _slice(t: GoType) -> GoType:
    return GoType("slice", f"[]{t.go}", elem=t)


def _struct(name: str, fields: list[tuple[str, GoType]]) -> GoType:
    """A v2.3.0 patch struct; every field of these is ``omitempty`` (never written when empty)."""
    key = f"{_TRAINER}.{name}"
    struct = GoStruct(key, name, {n: GoField(n, t, always=False) for n, t in fields})
    return GoType("struct", f"v1alpha1.{name}", key, struct=struct)


_STRING = GoType("string", "string")
_OBJECT_META = _ptr(_known(f"{_META}.ObjectMeta"))

CONTAINER_PATCH = _struct(
    "ContainerPatch",
    [
        ("name", _STRING),
        ("env", _slice(_known(f"{_CORE}.EnvVar"))),
        ("volumeMounts", _slice(_known(f"{_CORE}.VolumeMount"))),
        ("securityContext", _ptr(_known(f"{_CORE}.SecurityContext"))),
    ],
)
POD_SPEC_PATCH = _struct(
    "PodSpecPatch",
    [
        ("serviceAccountName", _ptr(_STRING)),
        ("volumes", _slice(_known(f"{_CORE}.Volume"))),
        ("initContainers", _slice(CONTAINER_PATCH)),
        ("containers", _slice(CONTAINER_PATCH)),
        ("imagePullSecrets", _slice(_known(f"{_CORE}.LocalObjectReference"))),
        ("securityContext", _ptr(_known(f"{_CORE}.PodSecurityContext"))),
        ("nodeSelector", GoType("map", "map[string]string", elem=_STRING)),
        ("affinity", _ptr(_known(f"{_CORE}.Affinity"))),
        ("tolerations", _slice(_known(f"{_CORE}.Toleration"))),
        ("schedulingGates", _slice(_known(f"{_CORE}.PodSchedulingGate"))),
        ("terminationGracePeriodSeconds", _ptr(GoType("int64", "int64"))),
    ],
)
POD_TEMPLATE_PATCH = _struct("PodTemplatePatch", [("metadata", _OBJECT_META), ("spec", _ptr(POD_SPEC_PATCH))])
JOB_SPEC_PATCH = _struct("JobSpecPatch", [("template", _ptr(POD_TEMPLATE_PATCH))])
JOB_TEMPLATE_PATCH = _struct("JobTemplatePatch", [("metadata", _OBJECT_META), ("spec", _ptr(JOB_SPEC_PATCH))])
REPLICATED_JOB_PATCH = _struct(
    "ReplicatedJobPatch", [("name", _STRING), ("template", _ptr(JOB_TEMPLATE_PATCH))]
)
JOBSET_SPEC_PATCH = _struct("JobSetSpecPatch", [("replicatedJobs", _slice(REPLICATED_JOB_PATCH))])
"""trainer v2.3.0's ``JobSetSpecPatch``, down to the core/v1 types it embeds."""


def marshal_spec_patch(spec: dict[str, Any]) -> dict[str, Any]:
    """``json.Marshal`` of ``spec`` decoded into a ``JobSetSpecPatch``, read back as JSON."""
    document: dict[str, Any] = json.loads(gocodec.marshal(spec, JOBSET_SPEC_PATCH))
    return document
