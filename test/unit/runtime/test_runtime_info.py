"""The runtime ``Info`` and ``newRuntimeInfo`` (docs/behaviour/trainer.md §10 G, §2.3, §2.4)."""

from __future__ import annotations

from typing import Any

from runtime_fixtures import rjob, tj_model

from manager.meta.quantity import Quantity
from trainer.api.trainer_v1alpha1 import JobSetTemplateSpec, MLPolicy
from trainer.runtime.info import ContainerInfo, Info, PodSet, Scheduler, TemplateSpec
from trainer.runtime.resources import pod_requests
from trainer.runtime.runtime_info import new_runtime_info

Json = dict[str, Any]


def cpu(value: str) -> Json:
    return {"requests": {"cpu": value}}


def initializer_job(name: str) -> Json:
    return rjob(
        name,
        name,
        [{"name": name, "resources": cpu("10")}],
        init_containers=[{"name": "setup-initializer", "restartPolicy": "Always", "resources": cpu("5")}],
    )


NODE_CONTAINER = {
    "name": "node",
    "resources": cpu("15"),
    "env": [{"name": "TEST", "value": "TEST"}],
    "ports": [{"name": "http", "protocol": "TCP", "containerPort": 8080}],
    "volumeMounts": [{"name": "TEST", "mountPath": "/var", "readOnly": True}],
}


def test_g1_new_info_from_runtime_template() -> None:
    # spec: trainer G1
    node = rjob(
        "node",
        "trainer",
        [NODE_CONTAINER],
        init_containers=[{"name": "preparation", "restartPolicy": "Always", "resources": cpu("25")}],
    )
    template = JobSetTemplateSpec.from_dict(
        {
            "metadata": {
                "labels": {"labelKey": "labelValue"},
                "annotations": {"annotationKey": "annotationValue"},
            },
            "spec": {
                "replicatedJobs": [
                    initializer_job("dataset-initializer"),
                    initializer_job("model-initializer"),
                    node,
                ]
            },
        }
    )
    info = new_runtime_info(tj_model(), template, MLPolicy.from_dict({"numNodes": 10}), None)
    assert info.labels == {"labelKey": "labelValue"}
    assert info.annotations == {"annotationKey": "annotationValue"}
    assert info.scheduler == Scheduler(pod_labels={}, pod_annotations=None)
    expected_spec = template.spec.to_dict()  # type: ignore[union-attr]
    for item in expected_spec["replicatedJobs"]:  # typed round trip: empty pod template metadata appears
        item["template"]["spec"]["template"] = {"metadata": {}, **item["template"]["spec"]["template"]}
    assert info.template_spec.obj_apply == expected_spec
    assert info.template_spec.pod_sets == [
        PodSet(
            name="dataset-initializer",
            ancestor="dataset-initializer",
            count=1,
            init_containers=[ContainerInfo(name="setup-initializer")],
            containers=[ContainerInfo(name="dataset-initializer")],
            single_pod_requests={"cpu": Quantity("15")},
        ),
        PodSet(
            name="model-initializer",
            ancestor="model-initializer",
            count=1,
            init_containers=[ContainerInfo(name="setup-initializer")],
            containers=[ContainerInfo(name="model-initializer")],
            single_pod_requests={"cpu": Quantity("15")},
        ),
        PodSet(
            name="node",
            ancestor="trainer",
            count=10,
            init_containers=[ContainerInfo(name="preparation")],
            containers=[
                ContainerInfo(
                    name="node",
                    env=[{"name": "TEST", "value": "TEST"}],
                    ports=[{"name": "http", "protocol": "TCP", "containerPort": 8080}],
                    volume_mounts=[{"name": "TEST", "mountPath": "/var", "readOnly": True}],
                )
            ],
            single_pod_requests={"cpu": Quantity("40")},
        ),
    ]


def test_g2_info_without_options() -> None:
    # spec: trainer G2
    info = Info()
    assert info.labels == {} and info.annotations == {}
    assert info.scheduler == Scheduler(pod_labels={}, pod_annotations=None)
    assert info.template_spec == TemplateSpec(obj_apply=None, pod_sets=[])


def lookup_info() -> Info:
    return Info(
        template_spec=TemplateSpec(
            pod_sets=[
                PodSet(
                    name="alpha",
                    ancestor="alpha",
                    containers=[ContainerInfo(name="one")],
                    init_containers=[ContainerInfo(name="two")],
                )
            ]
        )
    )


def test_g3_g4_g5_container_by_ancestor_and_name() -> None:
    # spec: trainer G3 G4 G5
    info = lookup_info()
    assert info.find_container_by_pod_set_ancestor_container_name("alpha", "one") == ContainerInfo(name="one")
    assert (
        info.find_container_by_pod_set_ancestor_container_name("alpha", "two") is None
    )  # init containers excluded
    assert info.find_container_by_pod_set_ancestor_container_name("beta", "one") is None


def test_g6_g7_pod_set_by_name() -> None:
    # spec: trainer G6 G7
    info = lookup_info()
    assert info.find_pod_set_by_name("alpha") is info.template_spec.pod_sets[0]
    assert info.find_pod_set_by_name("beta") is None


def test_g8_g9_pod_set_by_ancestor() -> None:
    # spec: trainer G8 G9
    info = lookup_info()
    assert info.find_pod_set_by_ancestor("alpha") is info.template_spec.pod_sets[0]
    assert info.find_pod_set_by_ancestor("beta") is None


def test_count_from_parallelism_and_ml_policy() -> None:
    """§2.4 step 4: parallelism counts unless the job is the trainer of a runtime with an ML policy."""
    spec = JobSetTemplateSpec.from_dict(
        {
            "spec": {
                "replicatedJobs": [
                    rjob("a", None, [], parallelism=3),
                    rjob("b", "unknown", [], parallelism=0),
                    rjob("node", "trainer", [], parallelism=7),
                ]
            }
        }
    )
    assert [ps.count for ps in new_runtime_info(tj_model(), spec, None, None).template_spec.pod_sets] == [
        3,
        1,
        7,
    ]
    with_policy = new_runtime_info(tj_model(), spec, MLPolicy(), None)
    assert [ps.count for ps in with_policy.template_spec.pod_sets] == [3, 1, 1]
    assert [ps.ancestor for ps in with_policy.template_spec.pod_sets] == [None, "unknown", "trainer"]


def test_pod_requests_rules() -> None:
    """Kubernetes PodRequests: init peak, sidecars, pod-level requests, overhead; limits ignored."""
    spec = {
        "containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "8"}}}],
        "initContainers": [
            {"resources": {"requests": {"cpu": "3"}}},
            {"restartPolicy": "Always", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
            {"resources": {"requests": {"cpu": "2500m"}}},
        ],
        "overhead": {"cpu": "100m"},
    }
    # regular 1 + sidecar 0.5 = 1.5; init peaks: 3, 0.5, 2.5+0.5=3 -> max(1.5, 3) = 3, + overhead 0.1.
    assert pod_requests(spec) == {"cpu": Quantity("3100m"), "memory": Quantity("2Gi")}
    spec["resources"] = {"requests": {"memory": "8Gi", "example.com/gpu": "1"}}
    assert pod_requests(spec) == {"cpu": Quantity("3100m"), "memory": Quantity("8Gi")}


def test_typed_round_trip_of_the_apply_document() -> None:
    """§2.4 step 3: empty structs appear, null creationTimestamp goes, quantities print canonically."""
    template = JobSetTemplateSpec.from_dict(
        {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "a",
                        "template": {
                            "metadata": {"creationTimestamp": None},
                            "spec": {
                                "template": {
                                    "spec": {
                                        "initContainers": [{"name": "i"}],
                                        "containers": [
                                            {"name": "c", "resources": {"limits": {"cpu": "1000m", "gpu": 2}}}
                                        ],
                                        "overhead": {"memory": "1024Mi"},
                                    }
                                }
                            },
                        },
                    }
                ]
            }
        }
    )
    info = new_runtime_info(tj_model(), template, None, None)
    assert info.template_spec.obj_apply == {
        "replicatedJobs": [
            {
                "name": "a",
                "template": {
                    "metadata": {},
                    "spec": {
                        "template": {
                            "metadata": {},
                            "spec": {
                                "initContainers": [{"name": "i", "resources": {}}],
                                "containers": [
                                    {"name": "c", "resources": {"limits": {"cpu": "1", "gpu": "2"}}}
                                ],
                                "overhead": {"memory": "1Gi"},
                            },
                        }
                    },
                },
            }
        ]
    }


def test_labels_and_annotations_trainjob_wins() -> None:
    template = JobSetTemplateSpec.from_dict(
        {
            "metadata": {"labels": {"a": "runtime", "b": "runtime"}, "annotations": {"x": "runtime"}},
            "spec": {},
        }
    )
    tj = tj_model(labels={"b": "trainjob", "c": "trainjob"}, annotations={"y": "trainjob"})
    info = new_runtime_info(tj, template, None, None)
    assert info.labels == {"a": "runtime", "b": "trainjob", "c": "trainjob"}
    assert info.annotations == {"x": "runtime", "y": "trainjob"}
