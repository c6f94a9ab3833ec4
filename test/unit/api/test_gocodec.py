"""The Go typed view of admission objects: the zero fields Go writes and encoding/json's decode errors.

Every expected text and patch here was checked against the Go originals (jobset v0.10.1's
webhook behind controller-runtime v0.22.1's admission decoder, fed the same AdmissionReview).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trainer.api import gocodec

JOBSET = gocodec.codec_for("jobset.x-k8s.io/v1alpha2", "JobSet")
POD = gocodec.codec_for("v1", "Pod")
TRAINJOB = gocodec.codec_for("trainer.kubeflow.org/v1alpha1", "TrainJob")


def jobset(spec: Any = None, **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js"},
    }
    if spec is not None:
        obj["spec"] = spec
    obj.update(extra)
    return obj


def with_pod_spec(pod_spec: Any, job_spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return jobset(
        {
            "replicatedJobs": [
                {"name": "r", "template": {"spec": {**(job_spec or {}), "template": {"spec": pod_spec}}}}
            ]
        }
    )


# -- the rule: which fields Go always writes, with which zero ------------------------------------


@pytest.mark.parametrize("key", gocodec.struct_keys())
def test_zero_struct_is_what_go_marshals(key: str) -> None:
    """The rule derived from the field tags gives, for every struct, json.Marshal of its zero value."""
    struct = gocodec.codec(key)
    assert gocodec._encode_struct({}, struct) == struct.go_zero


def test_rule_exceptions_to_the_crd_required_lists() -> None:
    """Where the schema's ``required`` would mislead: omitempty struct fields are written
    anyway, a non-omitempty pointer is written as null, an omitempty required field is not."""
    assert POD.zero()["status"] == {}  # PodStatus: a struct, omitempty is ignored
    container = gocodec.codec("k8s.io/api/core/v1.Container")
    assert gocodec._encode_struct({}, container) == {"name": "", "resources": {}}
    grpc = gocodec.codec("k8s.io/api/core/v1.GRPCAction")
    assert gocodec._encode_struct({}, grpc) == {"port": 0, "service": None}
    rule = gocodec.codec("k8s.io/api/core/v1.ContainerRestartRule")  # action is required, omitempty
    assert gocodec._encode_struct({}, rule) == {}
    assert JOBSET.zero() == {"metadata": {}, "spec": {}, "status": {"restarts": 0}}


def test_pod_failure_policy_condition_without_status_gets_an_empty_status() -> None:
    obj = with_pod_spec(
        {"containers": [{"name": "c", "image": "bash"}]},
        {
            "podFailurePolicy": {
                "rules": [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}]
            }
        },
    )
    out = JOBSET.encode(copy.deepcopy(obj))
    job_spec = out["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job_spec["podFailurePolicy"]["rules"][0]["onPodConditions"] == [
        {"type": "DisruptionTarget", "status": ""}
    ]
    assert job_spec["template"]["metadata"] == {}
    assert job_spec["template"]["spec"]["containers"] == [{"name": "c", "image": "bash", "resources": {}}]
    assert out["spec"]["replicatedJobs"][0]["template"]["metadata"] == {}
    assert out["status"] == {"restarts": 0}


def test_values_are_normalised_as_go_writes_them() -> None:
    obj = with_pod_spec(
        {
            "containers": [
                {"name": "c", "resources": {"limits": {"cpu": "1000m", "memory": 2, "gpu": None}}},
                None,
            ],
            "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1.5Gi"}}],
        }
    )
    obj["status"] = {"conditions": [{"type": "A", "lastTransitionTime": "2024-01-01T10:00:00.5+02:00"}]}
    out = JOBSET.encode(obj)
    pod_spec = out["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod_spec["containers"][0]["resources"]["limits"] == {"cpu": "1", "memory": "2", "gpu": "0"}
    assert pod_spec["containers"][1] == {"name": "", "resources": {}}  # null element: a zero struct
    assert pod_spec["volumes"][0]["emptyDir"]["sizeLimit"] == "1536Mi"
    assert out["status"]["conditions"][0] == {
        "type": "A",
        "lastTransitionTime": "2024-01-01T08:00:00Z",
        "status": "",
        "reason": "",
        "message": "",
    }


def test_nulls_follow_go() -> None:
    """null in a non-omitempty value field becomes its zero; in a pointer or omitempty one it stays."""
    obj = jobset({"replicatedJobs": [{"name": None, "template": None}], "network": None, "suspend": None})
    out = JOBSET.encode(obj)
    assert out["spec"]["network"] is None and out["spec"]["suspend"] is None
    rjob = out["spec"]["replicatedJobs"][0]
    assert rjob["name"] == ""
    assert rjob["template"] == {
        "metadata": {},
        "spec": {"template": {"metadata": {}, "spec": {"containers": None}}},
    }
    probe = {"name": "c", "image": None, "args": [], "livenessProbe": {"httpGet": {"port": None}}}
    pod = POD.encode({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [probe]}})
    assert pod["spec"]["containers"][0] == {
        "name": "c",
        "image": None,  # Go omits it: the removal is dropped, so the value stays
        "args": [],
        "livenessProbe": {"httpGet": {"port": 0}},  # IntOrString null decodes to the int 0
        "resources": {},
    }


def test_unknown_fields_are_left_alone() -> None:
    obj = jobset({"replicatedJobs": [], "futureField": {"x": 1}})
    assert JOBSET.encode(obj)["spec"]["futureField"] == {"x": 1}


def test_omitzero_fields_are_not_added() -> None:
    assert TRAINJOB.zero() == {"metadata": {}}
    assert "creationTimestamp" not in JOBSET.encode(jobset({}))["metadata"]


# -- decoding: encoding/json's UnmarshalTypeError, as controller-runtime answers it ---------------

CASES: list[tuple[str, Any, str]] = [
    (
        "spec is a string",
        jobset("x"),
        "json: cannot unmarshal string into Go struct field JobSet.spec of type v1alpha2.JobSetSpec",
    ),
    (
        "a list element's field",
        jobset({"replicatedJobs": [{"name": 5}]}),
        "json: cannot unmarshal number into Go struct field ReplicatedJob.spec.replicatedJobs.name of type string",
    ),
    (
        "a list element of the wrong kind",
        jobset({"replicatedJobs": ["x"]}),
        "json: cannot unmarshal string into Go struct field JobSetSpec.spec.replicatedJobs of type v1alpha2.ReplicatedJob",
    ),
    (
        "an object where a list is expected",
        jobset({"replicatedJobs": {"a": 1}}),
        "json: cannot unmarshal object into Go struct field JobSetSpec.spec.replicatedJobs of type []v1alpha2.ReplicatedJob",
    ),
    (
        "a pointer field",
        jobset({"network": "x"}),
        "json: cannot unmarshal string into Go struct field JobSetSpec.spec.network of type v1alpha2.Network",
    ),
    (
        "a pointer to bool",
        jobset({"suspend": 1, "replicatedJobs": [{"name": "a", "replicas": "x"}]}),
        "json: cannot unmarshal number into Go struct field JobSetSpec.spec.suspend of type bool",
    ),
    (
        "a fraction into int32",
        jobset({"replicatedJobs": [{"name": "a", "replicas": 1.5}]}),
        "json: cannot unmarshal number 1.5 into Go struct field ReplicatedJob.spec.replicatedJobs.replicas of type int32",
    ),
    (
        "an int32 overflow",
        jobset({"replicatedJobs": [{"name": "a", "replicas": 99999999999}]}),
        "json: cannot unmarshal number 99999999999 into Go struct field ReplicatedJob.spec.replicatedJobs.replicas"
        " of type int32",
    ),
    (
        "a named string type in a nested core type",
        with_pod_spec({"restartPolicy": 3}),
        "json: cannot unmarshal number into Go struct field PodSpec.spec.replicatedJobs.template.spec.template.spec"
        ".restartPolicy of type v1.RestartPolicy",
    ),
    (
        "a field of an embedded (inline) struct",
        with_pod_spec({"volumes": [{"name": "v", "emptyDir": {"medium": 1}}]}),
        "json: cannot unmarshal number into Go struct field EmptyDirVolumeSource.spec.replicatedJobs.template.spec"
        ".template.spec.volumes.emptyDir.medium of type v1.StorageMedium",
    ),
    (
        "a map value",
        jobset({}, metadata={"name": "a", "labels": {"a": 1}}),
        "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string",
    ),
    (
        "metadata is a string",
        jobset({}, metadata="m"),
        "json: cannot unmarshal string into Go struct field JobSet.metadata of type v1.ObjectMeta",
    ),
    (
        "the first error in document order wins",
        jobset({"suspend": "yes"}, metadata={"name": "a", "labels": {"a": 1}}),
        "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string",
    ),
    (
        "an IntOrString error stops decoding and wins over an earlier one",
        with_pod_spec(
            {
                "containers": [
                    {
                        "name": "c",
                        "ports": [{"containerPort": "80"}],
                        "livenessProbe": {"httpGet": {"port": True}},
                    }
                ]
            }
        ),
        "json: cannot unmarshal bool into Go struct field HTTPGetAction.spec.replicatedJobs.template.spec.template"
        ".spec.containers.livenessProbe.httpGet.port of type int32",
    ),
    (
        "a quantity",
        with_pod_spec({"containers": [{"name": "c", "resources": {"limits": {"cpu": True}}}]}),
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    ),
    (
        "a time that is not a string",
        jobset({}, status={"conditions": [{"type": "A", "lastTransitionTime": 5}]}),
        "json: cannot unmarshal number into Go struct field Condition.status.conditions.lastTransitionTime of type string",
    ),
    (
        "apiVersion is not a string",
        {"apiVersion": 5, "kind": "JobSet"},
        "couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .apiVersion"
        " of type string",
    ),
    (
        "the object is not an object",
        "str",
        "couldn't get version/kind; json parse error: json: cannot unmarshal string into Go value of type struct {"
        ' APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }',
    ),
    (
        "another kind",
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "Other"},
        'no kind "Other" is registered for version "jobset.x-k8s.io/v1alpha2" in scheme "pkg/runtime/scheme.go:110"',
    ),
    ("no object", None, "there is no content to decode"),
]


@pytest.mark.parametrize(("obj", "message"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_decode_errors_are_go_words(obj: Any, message: str) -> None:
    with pytest.raises(gocodec.GoDecodeError) as raised:
        JOBSET.check(obj)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    "obj",
    [
        jobset({"replicatedJobs": None, "network": None, "suspend": None}),  # null is zero for Go
        jobset({"replicatedJobs": [None]}),
        {"kind": "JobSet", "spec": {}},  # apiVersion defaults to the handler's type
        jobset(
            {}, status={"conditions": [{"type": "A", "lastTransitionTime": "2024-01-01T10:00:00.5+02:00"}]}
        ),
        with_pod_spec(
            {"containers": [{"name": "c", "resources": {"requests": {"cpu": 1.5}}}], "Containers": 5}
        ),
        jobset({"futureField": 5}),
    ],
)
def test_what_go_decodes_passes(obj: Any) -> None:
    JOBSET.check(obj)


def test_trainjob_and_pod_messages_name_their_structs() -> None:
    with pytest.raises(
        gocodec.GoDecodeError,
        match=r"Go struct field TrainJobSpec\.spec\.runtimeRef of type v1alpha1\.RuntimeRef$",
    ):
        TRAINJOB.check(
            {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "spec": {"runtimeRef": 1}}
        )
    with pytest.raises(
        gocodec.GoDecodeError, match=r"Go struct field Container\.spec\.containers\.name of type string$"
    ):
        POD.check({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": 1}]}})


# -- the models and the Go types describe the same objects --------------------------------------

# Fields the models keep out on purpose: apiVersion/kind are class attributes, selfLink is
# deprecated, and templates keep only the part of ObjectMeta a CRD preserves.
_MODEL_GAPS = {
    "ObjectMeta": {"selfLink"},
    "EmbeddedObjectMeta": {
        "generateName", "selfLink", "uid", "resourceVersion", "generation", "creationTimestamp",
        "deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences", "managedFields",
    },
}  # fmt: skip


def _models_in(annotation: Any) -> list[type]:
    from trainer.api.base import Model

    found = [m for arg in getattr(annotation, "__args__", ()) for m in _models_in(arg)]
    if isinstance(annotation, type) and issubclass(annotation, Model):
        found.append(annotation)
    return found


def _compare(model: type, struct: gocodec.GoStruct, seen: set[type], problems: list[str]) -> None:
    if model in seen:
        return
    seen.add(model)
    fields = {f.alias or name: f for name, f in model.model_fields.items()}  # type: ignore[attr-defined]
    # Model names may differ (VolcanoNetworkTopology is Go's NetworkTopologySpec): messages take
    # the Go names from go-types.json, so only the JSON fields must agree.
    gaps = _MODEL_GAPS.get(model.__name__, set()) | {"apiVersion", "kind"}
    problems += [f"{model.__name__}.{k} is not in {struct.name}" for k in fields if k not in struct.fields]
    problems += [
        f"{struct.name}.{k} is not in {model.__name__}"
        for k in struct.fields
        if k not in fields and k not in gaps
    ]
    for key, info in fields.items():
        if key not in struct.fields:
            continue
        t = struct.fields[key].type
        while t.elem is not None:
            t = t.elem
        for nested in _models_in(info.annotation):
            if t.struct is not None:
                _compare(nested, t.struct, seen, problems)


def test_models_and_go_types_agree() -> None:
    """A field added to a model but not to go-types.json (or the reverse) would decode unchecked."""
    from trainer.api import jobset_v1alpha2, trainer_v1alpha1

    problems: list[str] = []
    _compare(jobset_v1alpha2.JobSet, JOBSET.struct, set(), problems)
    for kind in ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime"):
        root = gocodec.codec_for("trainer.kubeflow.org/v1alpha1", kind).struct
        _compare(getattr(trainer_v1alpha1, kind), root, set(), problems)
    assert problems == []


# -- objects of another kind: the Go manager's scheme decides (go-schemes.json) -----------------------

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
V2_3_TRAINJOB = gocodec.codec_for(TRAINER_API, "TrainJob", gocodec.TRAINER_V2_3_TYPES_FILE)
V2_1_TRAINJOB = gocodec.codec_for(TRAINER_API, "TrainJob")
V0_12_POD = gocodec.codec_for("v1", "Pod", gocodec.JOBSET_V0_12_TYPES_FILE)


@pytest.mark.parametrize(
    ("codec", "obj", "message"),
    [
        # a kind the binary's scheme knows is decoded into its own type, then refused
        (
            V2_3_TRAINJOB,
            {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet"},
            "unable to decode jobset.x-k8s.io/v1alpha2, Kind=JobSet into *v1alpha1.TrainJob",
        ),
        (
            V0_12_POD,
            {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "spec": {"replicatedJobs": {}}},
            "json: cannot unmarshal object into Go struct field JobSetSpec.spec.replicatedJobs of type "
            "[]v1alpha2.ReplicatedJob",
        ),
        (
            V2_1_TRAINJOB,
            {"apiVersion": "apps/v1", "kind": "Deployment"},
            "unable to decode apps/v1, Kind=Deployment into *v1alpha1.TrainJob",
        ),
        # one it does not know (the JobSet binary has no trainer kinds), named as apimachinery
        # v0.36 names its scheme (v0.34: line 110), the strings quoted as %q quotes them
        (
            V0_12_POD,
            {"apiVersion": TRAINER_API, "kind": "TrainJob"},
            'no kind "TrainJob" is registered for version "trainer.kubeflow.org/v1alpha1" in scheme '
            '"pkg/runtime/scheme.go:111"',
        ),
        (
            V2_3_TRAINJOB,
            {"apiVersion": "v\x11\u0088ñ", "kind": 'a"b'},
            'no kind "a\\"b" is registered for version "v\\x11\\u0088ñ" in scheme "pkg/runtime/scheme.go:111"',
        ),
        (
            V2_1_TRAINJOB,
            {"apiVersion": "a/__internal", "kind": "X"},
            'no kind "X" is registered for the internal version of group "a" in scheme "pkg/runtime/scheme.go:110"',
        ),
        # Interpret reads the kind with encoding/json (case-insensitive keys), then parses it
        (V2_3_TRAINJOB, {"apiVersion": "a/b/c"}, "unexpected GroupVersion string: a/b/c"),
        (
            V2_3_TRAINJOB,
            {"KIND": "JobSet", "apiVersion": "jobset.x-k8s.io/v1alpha2"},
            "unable to decode jobset.x-k8s.io/v1alpha2, Kind=JobSet into *v1alpha1.TrainJob",
        ),
        (
            V2_3_TRAINJOB,
            {"apiVersion": "other.io/", "kind": "TrainJob"},
            """Object 'apiVersion' is missing in '{"apiVersion":"other.io/","kind":"TrainJob"}'""",
        ),
    ],
)
def test_another_kind_is_refused_as_the_go_managers_scheme_refuses_it(
    codec: gocodec.Codec, obj: Any, message: str
) -> None:
    with pytest.raises(gocodec.GoDecodeError) as raised:
        codec.check(obj)
    assert str(raised.value) == message


def test_an_empty_or_partial_kind_is_the_structs_own() -> None:
    V2_3_TRAINJOB.check({"apiVersion": "", "kind": ""})
    V2_3_TRAINJOB.check({"apiVersion": "trainer.kubeflow.org/"})  # the group's own version
    V2_3_TRAINJOB.check({"apiVersion": "/", "Kind": "TrainJob"})
