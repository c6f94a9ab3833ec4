"""Level v2.3: ``spec.runtimePatches`` customise the runtime (Trainer v2.3.0 ``newRuntimeInfo``)."""

from __future__ import annotations

from typing import Any

from runtime_fixtures import rjob, tj_model

from trainer.api.trainer_v1alpha1 import JobSetTemplateSpec
from trainer.runtime.levels.v2_3 import V2_3
from trainer.runtime.runtime_info import new_runtime_info

Json = dict[str, Any]


def template() -> JobSetTemplateSpec:
    return JobSetTemplateSpec.from_dict(
        {
            "metadata": {"labels": {"team": "runtime", "keep": "yes"}, "annotations": {"a": "runtime"}},
            "spec": {
                "replicatedJobs": [
                    rjob("dataset-initializer", "dataset-initializer", [{"name": "dataset-initializer"}]),
                    rjob(
                        "node",
                        "trainer",
                        [{"name": "node", "image": "runtime", "env": [{"name": "A", "value": "1"}]}],
                        pod_extra={"nodeSelector": {"pool": "default", "zone": "a"}},
                    ),
                ]
            },
        }
    )


def patch(manager: str, *, jobset_meta: Json | None = None, **node: Any) -> Json:
    pod_template: Json = {}
    if "pod_meta" in node:
        pod_template["metadata"] = node.pop("pod_meta")
    if node:
        pod_template["spec"] = node
    return {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {
                **({"metadata": jobset_meta} if jobset_meta else {}),
                "spec": {
                    "replicatedJobs": [{"name": "node", "template": {"spec": {"template": pod_template}}}]
                },
            }
        },
    }


def node_pod(info: Any) -> Json:
    jobs = info.template_spec.obj_apply["replicatedJobs"]
    node = next(j for j in jobs if j["name"] == "node")
    pod: Json = node["template"]["spec"]["template"]
    return pod


def test_patches_apply_in_list_order_onto_the_runtimes_pod_template() -> None:
    job = tj_model(
        runtimePatches=[
            patch("kueue.x-k8s.io/manager", nodeSelector={"pool": "a100"}, tolerations=[{"key": "gpu"}]),
            patch(
                "user",
                nodeSelector={"zone": "b"},
                containers=[{"name": "node", "env": [{"name": "B", "value": "2"}]}],
            ),
        ]
    )
    info = new_runtime_info(job, template(), None, None, V2_3)
    pod = node_pod(info)
    # maps merge key by key, a later patch winning; lists of core types merge by their keys
    assert pod["spec"]["nodeSelector"] == {"pool": "a100", "zone": "b"}
    assert pod["spec"]["tolerations"] == [{"key": "gpu"}]
    node = pod["spec"]["containers"][0]
    assert node["image"] == "runtime"
    # apimachinery's mergeSortedSlice puts a new item (no index in the original) first
    assert node["env"] == [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]
    # the runtime's order of the replicated jobs is kept
    assert [j["name"] for j in info.template_spec.obj_apply["replicatedJobs"]] == [
        "dataset-initializer",
        "node",
    ]
    # the other replicated job is untouched
    initializer = info.template_spec.obj_apply["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert "nodeSelector" not in initializer


def test_jobset_metadata_of_the_patches_goes_onto_the_jobset_over_the_runtimes() -> None:
    job = tj_model(
        runtimePatches=[
            patch("one", jobset_meta={"labels": {"team": "one", "x": "1"}, "annotations": {"a": "one"}}),
            patch("two", jobset_meta={"labels": {"team": "two"}}, pod_meta={"labels": {"pod": "label"}}),
        ]
    )
    info = new_runtime_info(job, template(), None, None, V2_3)
    assert info.labels == {"team": "two", "keep": "yes", "x": "1"}
    assert info.annotations == {"a": "one"}
    assert node_pod(info)["metadata"]["labels"] == {"pod": "label"}


def test_no_patches_leave_the_runtime_as_it_is() -> None:
    plain = new_runtime_info(tj_model(), template(), None, None, V2_3)
    empty = new_runtime_info(tj_model(runtimePatches=[{"manager": "m"}]), template(), None, None, V2_3)
    assert plain.template_spec.obj_apply == empty.template_spec.obj_apply
    assert plain.labels == {"team": "runtime", "keep": "yes"}
    assert node_pod(plain)["spec"]["nodeSelector"] == {"pool": "default", "zone": "a"}


def test_v2_1_fields_do_nothing_at_v2_3() -> None:
    job = tj_model(
        labels={"ignored": "yes"},
        podTemplateOverrides=[{"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"pool": "x"}}}],
    )
    info = new_runtime_info(job, template(), None, None, V2_3)
    assert "ignored" not in info.labels
    assert node_pod(info)["spec"]["nodeSelector"] == {"pool": "default", "zone": "a"}


# -- the patch as Go encodes it (json.Marshal of the typed JobSetSpecPatch) ------------------
# Each case below was a difference against the Go trainer v2.3.0 in `make conformance
# LEVEL=v2.3` (scenario v2.3/patches-go-encoding).


def encoded_template() -> JobSetTemplateSpec:
    sidecar = {
        "name": "sidecar",
        "image": "busybox",
        "env": [{"name": "EMPTIED", "value": "from-runtime"}],
        "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": True}],
    }
    return JobSetTemplateSpec.from_dict(
        {
            "spec": {
                "replicatedJobs": [
                    rjob(
                        "node",
                        "trainer",
                        [{"name": "node", "image": "busybox"}, sidecar],
                        volumes=[{"name": "data", "emptyDir": {"sizeLimit": "1Gi"}}],
                    )
                ]
            }
        }
    )


def test_an_empty_env_value_and_a_false_read_only_leave_the_runtimes_values() -> None:
    # omitempty: `value: ""` and `readOnly: false` are not in Go's patch, so the merge keeps them
    job = tj_model(
        runtimePatches=[
            patch(
                "m",
                containers=[
                    {
                        "name": "sidecar",
                        "env": [{"name": "EMPTIED", "value": ""}, {"name": "ADDED", "value": ""}],
                        "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": False}],
                    }
                ],
            )
        ]
    )
    sidecar = node_pod(new_runtime_info(job, encoded_template(), None, None, V2_3))["spec"]["containers"][1]
    assert sidecar["env"] == [{"name": "EMPTIED", "value": "from-runtime"}, {"name": "ADDED"}]
    assert sidecar["volumeMounts"] == [{"name": "data", "mountPath": "/data", "readOnly": True}]


def test_an_empty_dir_volume_keeps_its_source_and_quantities_are_canonical() -> None:
    # a pointer to an empty struct is written ({}), an empty string (subPath) is not
    job = tj_model(
        runtimePatches=[
            patch(
                "m",
                volumes=[
                    {"name": "scratch", "emptyDir": {}},
                    {"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "1024Mi"}},
                ],
                containers=[
                    {"name": "node", "volumeMounts": [{"name": "cache", "mountPath": "/c", "subPath": ""}]}
                ],
            )
        ]
    )
    spec = node_pod(new_runtime_info(job, encoded_template(), None, None, V2_3))["spec"]
    assert spec["volumes"] == [
        {"name": "scratch", "emptyDir": {}},
        {"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
        {"name": "data", "emptyDir": {"sizeLimit": "1Gi"}},
    ]
    assert spec["containers"][0]["volumeMounts"] == [{"name": "cache", "mountPath": "/c"}]


def test_job_template_metadata_merges_as_the_whole_object_meta() -> None:
    # JobTemplatePatch.metadata is a metav1.ObjectMeta: finalizers (which the CRD lets through)
    # reach the JobSet's job template with the labels
    node_patch = {
        "name": "node",
        "template": {"metadata": {"labels": {"job-level": "1"}, "finalizers": ["example.com/f"]}},
    }
    job = tj_model(
        runtimePatches=[
            {"manager": "m", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [node_patch]}}}}
        ]
    )
    info = new_runtime_info(job, encoded_template(), None, None, V2_3)
    node = info.template_spec.obj_apply["replicatedJobs"][0]
    assert node["template"]["metadata"]["finalizers"] == ["example.com/f"]
    assert node["template"]["metadata"]["labels"]["job-level"] == "1"
