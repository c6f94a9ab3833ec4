"""``trainer.migrate.v2_3``: what each stored v2.1 object becomes at level v2.3 (docs/migration.md),
field by field, and the bridge CRDs of ``config/migration/v2.1-to-v2.3``.

Every translated TrainJob is also checked the way migrate checks it: the JobSet level v2.3's
customisation builds from the translation is the one level v2.1's built from the original."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager.meta.validation import is_domain_prefixed_path
from trainer.levels import V2_1 as LEVEL_V2_1
from trainer.levels import V2_3 as LEVEL_V2_3
from trainer.levels import of_trainjob_crd
from trainer.migrate import crds
from trainer.migrate.cli import diff, plan
from trainer.migrate.v2_3 import MANAGER, Translation, build_jobset, translate_runtime, translate_trainjob
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.levels.v2_3 import V2_3

Json = dict[str, Any]
NOW = "2026-12-03T08:00:00Z"
ROOT = Path(__file__).resolve().parents[3]


def runtime(
    *,
    torch: Json | None = None,
    mpi: Json | None = None,
    resources: Json | None = None,
    labels: Json | None = None,
) -> Json:
    node: Json = {"name": "node", "image": "busybox"}
    if resources is not None:
        node["resources"] = resources
    policy: Json = {"numNodes": 1}
    if torch is not None:
        policy["torch"] = torch
    if mpi is not None:
        policy["mpi"] = mpi
    template: Json = {
        "spec": {
            "replicatedJobs": [
                {
                    "name": "dataset-initializer",
                    "template": {
                        "metadata": {
                            "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "dataset-initializer"}
                        },
                        "spec": {
                            "template": {
                                "spec": {"containers": [{"name": "dataset-initializer", "image": "init"}]}
                            }
                        },
                    },
                },
                {
                    "name": "node",
                    "template": {
                        "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                        "spec": {
                            "template": {
                                "metadata": {"labels": {"from": "runtime"}},
                                "spec": {
                                    "initContainers": [{"name": "prepare", "image": "busybox"}],
                                    "containers": [node, {"name": "sidecar", "image": "busybox"}],
                                    "volumes": [{"name": "base", "emptyDir": {}}],
                                    "tolerations": [{"key": "base", "operator": "Exists"}],
                                },
                            }
                        },
                    },
                },
            ]
        }
    }
    if labels is not None:
        template["metadata"] = {"labels": labels, "annotations": {"runtime": "annotation"}}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "rt"},
        "spec": {"mlPolicy": policy, "template": template},
    }


def trainjob(**spec: Any) -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "ns"},
        "spec": {"runtimeRef": {"name": "rt"}, **spec},
    }


def translated(tj: Json, rt: Json | None) -> Translation:
    result = translate_trainjob(tj, rt, NOW)
    assert not result.refusals, [str(r) for r in result.refusals]
    return result


def patch_template(result: Translation) -> Json:
    [patch] = result.after["spec"]["runtimePatches"]
    assert patch["manager"] == MANAGER and patch["time"] == NOW
    template: Json = patch["trainingRuntimeSpec"]["template"]
    return template


def pod_patch(result: Translation, job: str = "node") -> Json:
    jobs = {j["name"]: j for j in patch_template(result)["spec"]["replicatedJobs"]}
    template: Json = jobs[job]["template"]["spec"]["template"]
    return template


def same_jobset(before: Json, result: Translation, rt: Json) -> None:
    assert build_jobset(V2_3, result.after, rt) == build_jobset(V2_1, before, rt)


def refusals(result: Translation) -> list[tuple[str, str]]:
    return [(r.field, r.reason) for r in result.refusals]


# -- labels, annotations, podTemplateOverrides ------------------------------------------------------


def test_the_manager_is_a_domain_prefixed_path_as_v2_3_requires() -> None:
    assert MANAGER == "trainer.kubeflow.org/migrate"
    assert is_domain_prefixed_path("spec.runtimePatches.manager", MANAGER) == []


def test_labels_and_annotations_become_the_patch_jobset_metadata_over_the_runtime_template() -> None:
    rt = runtime(torch={}, labels={"team": "runtime", "kept": "yes"})
    tj = trainjob(labels={"team": "job"}, annotations={"note": "x"})
    result = translated(tj, rt)
    assert "labels" not in result.after["spec"] and "annotations" not in result.after["spec"]
    assert patch_template(result) == {"metadata": {"labels": {"team": "job"}, "annotations": {"note": "x"}}}
    labels, annotations, _ = build_jobset(V2_3, result.after, rt)
    assert labels == {"team": "job", "kept": "yes"}
    assert annotations == {"runtime": "annotation", "note": "x"}
    same_jobset(tj, result, rt)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("serviceAccountName", "trainer-sa"),
        ("nodeSelector", {"pool": "gpu"}),
        (
            "affinity",
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "z", "operator": "In", "values": ["a"]}]}
                        ]
                    }
                }
            },
        ),
        ("tolerations", [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]),
        ("volumes", [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]),
        ("initContainers", [{"name": "prepare", "env": [{"name": "A", "value": "1"}]}]),
        ("initContainers", [{"name": "prepare", "volumeMounts": [{"name": "base", "mountPath": "/b"}]}]),
        ("containers", [{"name": "sidecar", "env": [{"name": "B", "value": "2"}]}]),
        ("containers", [{"name": "node", "volumeMounts": [{"name": "base", "mountPath": "/base"}]}]),
        ("schedulingGates", [{"name": "example.com/gate"}]),
        ("imagePullSecrets", [{"name": "registry"}]),
    ],
)
def test_each_override_spec_field_is_carried_into_the_node_jobs_pod_template_patch(
    field: str, value: Any
) -> None:
    rt = runtime(torch={})
    tj = trainjob(podTemplateOverrides=[{"targetJobs": [{"name": "node"}], "spec": {field: value}}])
    result = translated(tj, rt)
    assert "podTemplateOverrides" not in result.after["spec"]
    assert pod_patch(result) == {"spec": {field: value}}
    same_jobset(tj, result, rt)


def test_override_metadata_labels_and_annotations_are_carried_the_rest_dropped_with_a_note() -> None:
    rt = runtime(torch={})
    meta = {"labels": {"a": "1"}, "annotations": {"b": "2"}, "name": "ignored-by-v2.1"}
    tj = trainjob(podTemplateOverrides=[{"targetJobs": [{"name": "node"}], "metadata": meta}])
    result = translated(tj, rt)
    assert pod_patch(result) == {"metadata": {"labels": {"a": "1"}, "annotations": {"b": "2"}}}
    assert any("metadata: name dropped" in n for n in result.notes)
    same_jobset(tj, result, rt)


def test_overrides_of_one_job_fold_into_one_entry_in_order_and_targets_map_to_replicated_jobs() -> None:
    rt = runtime(torch={})
    overrides = [
        {
            "targetJobs": [{"name": "node"}, {"name": "dataset-initializer"}],
            "spec": {
                "tolerations": [{"key": "first", "operator": "Exists"}],
                "volumes": [{"name": "one", "emptyDir": {}}],
                "nodeSelector": {"pool": "a", "zone": "z"},
            },
        },
        {
            "targetJobs": [{"name": "node"}],
            "spec": {
                "tolerations": [{"key": "second", "operator": "Exists"}],  # replaces (atomic)
                "volumes": [{"name": "two", "emptyDir": {}}],  # merges by name
                "nodeSelector": {"pool": "b"},
            },
        },
    ]
    tj = trainjob(podTemplateOverrides=overrides)
    result = translated(tj, rt)
    jobs = patch_template(result)["spec"]["replicatedJobs"]
    assert [j["name"] for j in jobs] == ["dataset-initializer", "node"]  # the runtime's order
    node = pod_patch(result)["spec"]
    assert node["tolerations"] == [{"key": "second", "operator": "Exists"}]
    assert sorted(v["name"] for v in node["volumes"]) == ["one", "two"]
    assert node["nodeSelector"] == {"pool": "b", "zone": "z"}
    same_jobset(tj, result, rt)


def test_a_target_the_runtime_lacks_is_dropped_as_v2_1_skipped_it() -> None:
    rt = runtime(torch={})
    tj = trainjob(
        podTemplateOverrides=[
            {"targetJobs": [{"name": "gone"}, {"name": "node"}], "spec": {"nodeSelector": {"a": "b"}}}
        ]
    )
    result = translated(tj, rt)
    assert [j["name"] for j in patch_template(result)["spec"]["replicatedJobs"]] == ["node"]
    assert any("'gone' dropped" in n for n in result.notes)
    same_jobset(tj, result, rt)


def test_an_override_with_no_effect_leaves_no_patch() -> None:
    rt = runtime(torch={})
    tj = trainjob(podTemplateOverrides=[{"targetJobs": [{"name": "node"}]}])
    result = translated(tj, rt)
    assert result.after["spec"] == {"runtimeRef": {"name": "rt"}}


def test_a_container_the_runtimes_job_lacks_is_refused_naming_the_field() -> None:
    rt = runtime(torch={})
    tj = trainjob(
        podTemplateOverrides=[
            {"targetJobs": [{"name": "dataset-initializer"}], "spec": {"containers": [{"name": "node"}]}}
        ]
    )
    result = translate_trainjob(tj, rt, NOW)
    assert refusals(result) == [
        (
            "spec.podTemplateOverrides[0].spec.containers[0]",
            "the runtime's job dataset-initializer has no container 'node' (v2.3.0's webhook refuses a patch naming it)",
        )
    ]
    assert str(result.refusals[0]).startswith(
        "TrainJob ns/tj: spec.podTemplateOverrides[0].spec.containers[0]: "
    )


def test_env_of_the_node_container_is_refused() -> None:
    rt = runtime(torch={})
    tj = trainjob(
        podTemplateOverrides=[
            {
                "targetJobs": [{"name": "node"}],
                "spec": {"containers": [{"name": "node", "env": [{"name": "X"}]}]},
            }
        ]
    )
    assert [f for f, _ in refusals(translate_trainjob(tj, rt, NOW))] == [
        "spec.podTemplateOverrides[0].spec.containers[0].env"
    ]


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        (
            {"securityContext": {"runAsUser": 1}},
            "spec.podTemplateOverrides[0].spec.securityContext",
            "Trainer v2.1.0 did not apply it (not in PodTemplateSpecOverride), v2.3.0's PodSpecPatch would",
        ),
        (
            {"hostNetwork": True},
            "spec.podTemplateOverrides[0].spec.hostNetwork",
            "v2.3.0's PodSpecPatch cannot carry this field",
        ),
        (
            {"containers": [{"name": "sidecar", "image": "other"}]},
            "spec.podTemplateOverrides[0].spec.containers[0].image",
            "v2.3.0's ContainerPatch cannot carry this field",
        ),
    ],
)
def test_a_field_the_patch_types_cannot_carry_is_refused(spec: Json, field: str, reason: str) -> None:
    tj = trainjob(podTemplateOverrides=[{"targetJobs": [{"name": "node"}], "spec": spec}])
    result = translate_trainjob(tj, runtime(torch={}), NOW)
    assert refusals(result) == [(field, reason)]


def test_runtime_patches_next_to_v2_1_fields_are_refused() -> None:
    tj = trainjob(labels={"a": "b"}, runtimePatches=[{"manager": "kueue.x-k8s.io/manager"}])
    result = translate_trainjob(tj, runtime(torch={}), NOW)
    assert [f for f, _ in refusals(result)] == ["spec.runtimePatches"]
    assert "kueue.x-k8s.io/manager" in result.refusals[0].reason


def test_without_the_runtime_overrides_are_translated_unchecked_and_every_target_kept() -> None:
    tj = trainjob(
        podTemplateOverrides=[
            {"targetJobs": [{"name": "a"}, {"name": "b"}], "spec": {"nodeSelector": {"x": "y"}}}
        ]
    )
    result = translated(tj, None)
    assert [j["name"] for j in patch_template(result)["spec"]["replicatedJobs"]] == ["a", "b"]
    assert any("runtime is not found" in n for n in result.notes)


# -- numProcPerNode ---------------------------------------------------------------------------------


GPU_RESOURCES = {"limits": {"nvidia.com/gpu": 4, "cpu": "8"}}


@pytest.mark.parametrize(
    ("value", "resources", "runtime_resources", "want"),
    [
        (3, None, None, 3),
        ("auto", None, None, None),
        ("auto", None, GPU_RESOURCES, None),
        ("cpu", {"requests": {"cpu": "6"}}, GPU_RESOURCES, 6),  # the TrainJob's resources decide
        ("cpu", None, GPU_RESOURCES, 8),  # else the runtime's node container's
        ("cpu", {"limits": {"cpu": "1500m"}}, None, 2),  # rounded up
        ("cpu", None, None, 1),  # no CPUs: at least 1
        ("gpu", None, GPU_RESOURCES, 4),
        ("gpu", {"requests": {"example.com/gpu": 2}}, None, 2),
    ],
)
def test_torch_num_proc_per_node_becomes_the_number_v2_1_used(
    value: Any, resources: Json | None, runtime_resources: Json | None, want: int | None
) -> None:
    trainer: Json = {"numProcPerNode": value}
    if resources is not None:
        trainer["resourcesPerNode"] = resources
    rt = runtime(torch={"numProcPerNode": "auto"}, resources=runtime_resources)
    result = translated(trainjob(trainer=trainer), rt)
    assert result.after["spec"]["trainer"].get("numProcPerNode") == want


def test_gpu_without_gpus_cannot_be_decided_and_is_refused() -> None:
    result = translate_trainjob(trainjob(trainer={"numProcPerNode": "gpu"}), runtime(torch={}), NOW)
    assert refusals(result) == [
        (
            "spec.trainer.numProcPerNode",
            '"gpu" (from spec.trainer.numProcPerNode) cannot be decided statically: resourcesPerNode requests '
            "no GPU, and torchrun counts the CUDA devices the node shows; set a number",
        )
    ]


@pytest.mark.parametrize(("runtime_value", "want"), [(4, 4), ("cpu", 8), ("gpu", 4), ("auto", None)])
def test_a_trainjob_without_it_gets_the_runtimes_value_v2_3_no_longer_reads(
    runtime_value: Any, want: Any
) -> None:
    rt = runtime(torch={"numProcPerNode": runtime_value}, resources=GPU_RESOURCES)
    result = translated(trainjob(trainer={"numNodes": 2}), rt)
    assert result.after["spec"]["trainer"].get("numProcPerNode") == want
    assert result.changed == (want is not None)


def test_a_trainjob_without_spec_is_left_alone() -> None:
    tj = trainjob()
    del tj["spec"]
    assert not translated(tj, runtime(torch={"numProcPerNode": 4})).changed


def test_without_spec_trainer_nothing_is_set() -> None:
    rt = runtime(torch={"numProcPerNode": 4})
    assert not translated(trainjob(), rt).changed


def test_an_unknown_word_is_refused() -> None:
    result = translate_trainjob(trainjob(trainer={"numProcPerNode": "many"}), runtime(torch={}), NOW)
    assert refusals(result) == [
        ("spec.trainer.numProcPerNode", "'many': must have an int value or [auto cpu gpu]")
    ]


def test_mpi_keeps_integers_and_refuses_words() -> None:
    rt = runtime(mpi={"numProcPerNode": 2})
    assert not translated(trainjob(trainer={"numProcPerNode": 2}), rt).changed
    result = translate_trainjob(trainjob(trainer={"numProcPerNode": "auto"}), rt, NOW)
    assert refusals(result) == [
        ("spec.trainer.numProcPerNode", "'auto': must have an int value for MPI TrainJob")
    ]


def test_a_word_for_a_runtime_without_torch_or_mpi_is_dropped() -> None:
    result = translated(trainjob(trainer={"numProcPerNode": "cpu"}), runtime())
    assert result.after["spec"]["trainer"] == {}
    assert any("did not read it" in n for n in result.notes)


def test_without_the_runtime_auto_is_dropped_and_other_words_refused() -> None:
    assert translated(trainjob(trainer={"numProcPerNode": "auto"}), None).after["spec"]["trainer"] == {}
    result = translate_trainjob(trainjob(trainer={"numProcPerNode": "cpu"}), None, NOW)
    assert refusals(result) == [
        ("spec.trainer.numProcPerNode", "'cpu' cannot be decided: the TrainJob's runtime is not found")
    ]


def test_resources_the_runtime_keeps_at_v2_3_are_noted() -> None:
    rt = runtime(torch={}, resources={"requests": {"cpu": "1", "memory": "1Gi"}})
    tj = trainjob(trainer={"numProcPerNode": "cpu", "resourcesPerNode": {"requests": {"cpu": "2"}}})
    result = translated(tj, rt)
    assert any("resourcesPerNode.requests: the runtime's memory stay" in n for n in result.notes)


# -- runtimes -------------------------------------------------------------------------------------


def test_a_runtime_loses_torch_num_proc_per_node_and_elastic_policy_and_keeps_torch() -> None:
    rt = runtime(torch={"numProcPerNode": 4, "elasticPolicy": {"maxRestarts": 3, "minNodes": 1}})
    result = translate_runtime(rt)
    assert result.after["spec"]["mlPolicy"] == {"numNodes": 1, "torch": {}}
    assert result.after["spec"]["template"] == rt["spec"]["template"]
    assert len(result.notes) == 2
    assert translate_runtime(runtime(torch={"numProcPerNode": "auto"})).notes == []


def test_an_mpi_runtime_is_unchanged() -> None:
    assert not translate_runtime(runtime(mpi={"numProcPerNode": 2})).changed


def test_a_runtime_loses_v2_1_resource_in_use_finalizer_and_keeps_others() -> None:
    # v2.3.0's runtime controllers only remove it; left to them, a TrainJob's first snapshot
    # carries it or not depending on which controller runs first
    rt = runtime(mpi={"numProcPerNode": 2})
    rt["metadata"]["finalizers"] = ["trainer.kubeflow.org/resource-in-use", "example.com/keep"]
    result = translate_runtime(rt)
    assert result.changed
    assert result.after["metadata"]["finalizers"] == ["example.com/keep"]
    assert result.after["spec"] == rt["spec"]
    assert result.notes == [
        "metadata.finalizers: trainer.kubeflow.org/resource-in-use removed (Trainer v2.1.0's; v2.3.0 only removes it)"
    ]
    assert "-  - trainer.kubeflow.org/resource-in-use" in diff(result)
    only = runtime(torch={})
    only["metadata"]["finalizers"] = ["trainer.kubeflow.org/resource-in-use"]
    assert "finalizers" not in translate_runtime(only).after["metadata"]
    assert not translate_runtime(translate_runtime(only).after).changed  # a second run: nothing


# -- idempotence, the plan, the diff -------------------------------------------------------------


def test_a_second_translation_changes_nothing() -> None:
    rt = runtime(torch={"numProcPerNode": "cpu"}, resources=GPU_RESOURCES)
    tj = trainjob(
        labels={"a": "b"},
        trainer={"numNodes": 1},
        podTemplateOverrides=[{"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"x": "y"}}}],
    )
    first = plan([tj], [rt], NOW)
    assert [t.changed for t in first] == [True, True]
    second = plan([first[0].after], [first[1].after], "2027-01-01T00:00:00Z")
    assert [t.changed or bool(t.refusals) for t in second] == [False, False]


def test_the_plan_translates_trainjobs_from_the_runtimes_before_they_change() -> None:
    rt = runtime(torch={"numProcPerNode": 4})
    [tj, changed_rt] = plan([trainjob(trainer={})], [rt], NOW)
    assert tj.after["spec"]["trainer"] == {"numProcPerNode": 4}
    assert "numProcPerNode" not in changed_rt.after["spec"]["mlPolicy"]["torch"]


def test_the_diff_is_a_unified_yaml_diff_of_the_spec() -> None:
    [t] = plan([trainjob(labels={"a": "b"})], [], NOW)
    assert diff(t).splitlines() == [
        "--- TrainJob ns/tj (v2.1)",
        "+++ TrainJob ns/tj (v2.3)",
        "@@ -1,5 +1,11 @@",
        " spec:",
        "   runtimeRef:",
        "     name: rt",
        "-  labels:",
        "-    a: b",
        "+  runtimePatches:",
        "+  - manager: trainer.kubeflow.org/migrate",
        f"+    time: '{NOW}'",
        "+    trainingRuntimeSpec:",
        "+      template:",
        "+        metadata:",
        "+          labels:",
        "+            a: b",
    ]


# -- the bridge CRDs -----------------------------------------------------------------------------


def test_the_committed_bridge_crds_are_what_crds_py_makes() -> None:
    for name, want in crds.bridge_crds().items():
        committed = yaml.safe_load((crds.BRIDGE_DIR / name).read_text())
        assert committed == want, name
    kustomization = yaml.safe_load((crds.BRIDGE_DIR / "kustomization.yaml").read_text())
    assert kustomization["resources"] == list(crds.bridge_crds())


def test_the_bridge_trainjob_crd_has_both_forms_and_a_v2_1_manager_accepts_it() -> None:
    bridge = crds.bridge_crds()[crds.TRAINJOBS]
    assert crds.trainjob_crd_form(bridge) == "bridge"
    spec = bridge["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    v2_3 = yaml.safe_load((crds.V2_3_DIR / crds.TRAINJOBS).read_text())
    v2_3_spec = v2_3["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert spec["runtimePatches"] == v2_3_spec["runtimePatches"]
    assert spec["trainer"]["properties"]["numProcPerNode"].get("x-kubernetes-int-or-string") is True
    assert "x-kubernetes-validations" not in spec["trainer"]  # v2.3's immutability is not there
    # the start-up check: a v2.1 manager starts over it, a v2.3 one refuses
    assert of_trainjob_crd(bridge) is LEVEL_V2_1 is not LEVEL_V2_3
    assert bridge["metadata"]["annotations"][crds.BRIDGE_ANNOTATION] == "v2.1-to-v2.3"


def test_the_installed_trainjob_crd_forms() -> None:
    v2_1 = yaml.safe_load((crds.V2_1_DIR / crds.TRAINJOBS).read_text())
    v2_3 = yaml.safe_load((crds.V2_3_DIR / crds.TRAINJOBS).read_text())
    assert crds.trainjob_crd_form(v2_1) == "v2.1"
    assert crds.trainjob_crd_form(v2_3) == "v2.3"
    assert crds.trainjob_crd_form(None) == "missing"
    assert crds.trainjob_crd_form({"spec": {}}) == "unknown"


@pytest.mark.parametrize("name", crds.RUNTIMES)
def test_the_bridge_runtime_crds_no_longer_default_torch_num_proc_per_node(name: str) -> None:
    v2_1 = yaml.safe_load((crds.V2_1_DIR / name).read_text())
    assert crds.runtime_crd_defaults_torch_num_proc(v2_1)
    bridge = crds.bridge_crds()[name]
    assert not crds.runtime_crd_defaults_torch_num_proc(bridge)
    unmarked = copy.deepcopy(bridge)
    unmarked["metadata"]["annotations"].pop(crds.BRIDGE_ANNOTATION)
    torch = v2_1["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    torch["mlPolicy"]["properties"]["torch"]["properties"]["numProcPerNode"].pop("default")
    assert unmarked["spec"] == v2_1["spec"]  # nothing else differs


# -- the subcommand ----------------------------------------------------------------------------------


def test_the_entry_point_dispatches_migrate_and_knows_only_v2_3(capsys: pytest.CaptureFixture[str]) -> None:
    from trainer.__main__ import main

    with pytest.raises(SystemExit) as exit_info:
        main(["migrate", "--to", "v2.2"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "migrate: error: argument --to: invalid choice: 'v2.2'" in err and "v2.3" in err
