"""CoScheduling and Volcano plugins (docs/behaviour/trainer.md §10 F80-F99): pod metadata, PodGroups, validation."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from runtime_fixtures import FakeReader, owner_ref, rjob, tj_model

from manager.client.errors import InternalError
from manager.meta.field import FieldError
from manager.meta.quantity import Quantity
from trainer.api.trainer_v1alpha1 import PodGroupPolicy, TrainJob
from trainer.runtime.errors import RuntimeFailure
from trainer.runtime.info import Info, PodSet, RuntimePolicy, TemplateSpec
from trainer.runtime.plugins.base import PluginContext
from trainer.runtime.plugins.coscheduling import CoScheduling
from trainer.runtime.plugins.volcano import Volcano

Json = dict[str, Any]


def requests(**values: str) -> dict[str, Quantity]:
    return {k: Quantity(v) for k, v in values.items()}


def gang_info(policy: Json | None, pod_sets: list[PodSet] | None = None, **info: Any) -> Info:
    pgp = PodGroupPolicy.from_dict(policy) if policy is not None else None
    return Info(
        runtime_policy=RuntimePolicy(pod_group_policy=pgp),
        template_spec=TemplateSpec(pod_sets=pod_sets or []),
        **info,
    )


async def cosched(info: Info | None, tj: TrainJob | None, reader: FakeReader | None = None) -> list[Json]:
    plugin = CoScheduling(PluginContext(reader or FakeReader()))
    plugin.enforce_pod_group_policy(info, tj)
    return await plugin.build(info, tj)


def pod_group(name: str, min_member: int, min_resources: Json, timeout: int, uid: str = "uid") -> Json:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "ownerReferences": [owner_ref(name, uid)]},
        "spec": {"minMember": min_member, "minResources": min_resources, "scheduleTimeoutSeconds": timeout},
    }


async def test_f80_nil_info() -> None:
    # spec: trainer F80  # spec: scheduling 36
    assert await cosched(None, tj_model()) == []


@pytest.mark.parametrize(
    "policy",
    [
        None,  # spec: trainer F81  # spec: scheduling 37
        {"volcano": {}},  # spec: trainer F82  # spec: scheduling 38
    ],
)
async def test_f81_f82_without_coscheduling(policy: Json | None) -> None:
    info = gang_info(policy, [PodSet(name="node", count=1)])
    before = copy.deepcopy(info)
    plugin = CoScheduling(PluginContext(FakeReader()))
    plugin.enforce_pod_group_policy(info, tj_model())
    assert await plugin.build(info, tj_model()) == []
    assert info == before


async def test_f83_nil_trainjob() -> None:
    # spec: trainer F83  # spec: scheduling 39
    info = gang_info({"coscheduling": {}}, [PodSet(name="node", count=1)])
    before = copy.deepcopy(info)
    assert await cosched(info, None) == []
    assert info == before


async def test_f84_pod_label_and_pod_group() -> None:
    # spec: trainer F84
    info = gang_info({"coscheduling": {"scheduleTimeoutSeconds": 30}}, [PodSet(name="node", count=1)])
    objects = await cosched(info, tj_model(name="trainJob"))
    assert info.scheduler.pod_labels == {"scheduling.x-k8s.io/pod-group": "trainJob"}
    assert objects == [pod_group("trainJob", 1, {}, 30)]


async def test_f85_exact_quantity_sums() -> None:
    # spec: trainer F85
    info = gang_info(
        {"coscheduling": {}},
        [
            PodSet(name="node", count=2, single_pod_requests=requests(cpu="500m", memory="1Gi")),
            PodSet(
                name="dataset-initializer", count=1, single_pod_requests=requests(cpu="250m", memory="512Mi")
            ),
        ],
    )
    objects = await cosched(info, tj_model(name="trainJob"))
    assert objects == [pod_group("trainJob", 3, {"cpu": "1250m", "memory": "2560Mi"}, 60)]
    resources = objects[0]["spec"]["minResources"]
    assert Quantity(resources["cpu"]) == Quantity("1.25") and Quantity(resources["memory"]) == Quantity(
        "2.5Gi"
    )


async def test_f86_single_pod_set() -> None:
    # spec: trainer F86
    info = gang_info(
        {"coscheduling": {}},
        [PodSet(name="node", count=2, single_pod_requests=requests(cpu="500m", memory="1Gi"))],
    )
    assert await cosched(info, tj_model(name="trainJob")) == [
        pod_group("trainJob", 2, {"cpu": "1", "memory": "2Gi"}, 60)
    ]


async def test_f87_read_error_is_returned() -> None:
    # spec: trainer F87  # spec: scheduling 43
    info = gang_info({"coscheduling": {}}, [PodSet(name="node", count=1)])
    with pytest.raises(InternalError):
        await cosched(info, tj_model(name="trainJob"), FakeReader(errors={"PodGroup": InternalError("boom")}))
    assert info.scheduler.pod_labels == {"scheduling.x-k8s.io/pod-group": "trainJob"}


@pytest.mark.parametrize(
    "name",
    [
        "trainJob",  # spec: trainer F88  # spec: scheduling 44
        "existingTrainJob",  # spec: trainer F89  # spec: scheduling 45
    ],
)
async def test_f88_f89_existing_pod_group_of_running_trainjob(name: str) -> None:
    existing = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
    }
    info = gang_info({"coscheduling": {}}, [PodSet(name="node", count=1)])
    assert await cosched(info, tj_model(name=name, suspend=False), FakeReader([existing])) == []


# -- Volcano --------------------------------------------------------------------------------------


async def volcano(info: Info | None, tj: TrainJob, reader: FakeReader | None = None) -> list[Json]:
    plugin = Volcano(PluginContext(reader or FakeReader()))
    plugin.enforce_pod_group_policy(info, tj)
    return await plugin.build(info, tj)


def volcano_trainjob(name: str, **spec: Any) -> TrainJob:
    tj = tj_model(name=name, **spec)
    assert tj.metadata is not None
    tj.metadata.namespace = None
    tj.metadata.uid = None
    return tj


async def test_f90_nil_info() -> None:
    # spec: trainer F90
    assert await volcano(None, tj_model()) == []


async def test_f91_annotation_and_empty_pod_group() -> None:
    # spec: trainer F91
    info = gang_info({"volcano": {}})
    objects = await volcano(info, volcano_trainjob("test-trainjob"))
    assert info.scheduler.pod_annotations == {"scheduling.k8s.io/group-name": "test-trainjob"}
    assert objects == [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {
                "name": "test-trainjob",
                "namespace": "",
                "ownerReferences": [owner_ref("test-trainjob", "")],
            },
            "spec": {"minMember": 0, "minResources": {}},
        }
    ]


def existing_volcano(name: str, namespace: str = "default") -> Json:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
    }


async def test_f92_existing_pod_group_of_running_trainjob() -> None:
    # spec: trainer F92
    info = gang_info({"volcano": {}})
    assert await volcano(info, tj_model(suspend=False), FakeReader([existing_volcano("test-job")])) == []


async def test_f93_suspended_trainjob_rebuilds_pod_group() -> None:
    # spec: trainer F93
    template = {
        "replicatedJobs": [rjob("launcher", None, [], pod_extra={"priorityClassName": "high-priority"})]
    }
    info = gang_info(
        {"volcano": {"networkTopology": {"mode": "hard", "highestTierAllowed": 1}}},
        [
            PodSet(name="launcher", count=1, single_pod_requests=requests(cpu="300m", memory="1Gi")),
            PodSet(name="worker", count=4, single_pod_requests=requests(cpu="500m", memory="0.5Gi")),
        ],
        annotations={"scheduling.volcano.sh/queue-name": "q1"},
    )
    info.template_spec.obj_apply = template
    tj = tj_model(name="job-update", namespace="test-ns", uid="2", suspend=True)
    objects = await volcano(info, tj, FakeReader([existing_volcano("job-update", "test-ns")]))
    assert objects == [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {
                "name": "job-update",
                "namespace": "test-ns",
                "ownerReferences": [owner_ref("job-update", "2")],
            },
            "spec": {
                "minMember": 5,
                "minResources": {"cpu": "2300m", "memory": "3Gi"},
                "queue": "q1",
                "priorityClassName": "high-priority",
                "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
            },
        }
    ]


async def test_f94_read_error() -> None:
    # spec: trainer F94
    info = gang_info({"volcano": {}})
    with pytest.raises(RuntimeFailure, match=r"^boom$"):
        await volcano(info, tj_model(), FakeReader(errors={"PodGroup": InternalError("boom")}))
    assert info.scheduler.pod_annotations == {"scheduling.k8s.io/group-name": "test-job"}


async def volcano_validate(info: Info | None, reader: FakeReader | None = None) -> list[FieldError]:
    warnings, errors = await Volcano(PluginContext(reader or FakeReader())).validate(info, None, tj_model())
    assert warnings == []
    return errors


async def test_f95_validate_nil_info() -> None:
    # spec: trainer F95
    assert await volcano_validate(None) == []


async def test_f96_validate_without_volcano() -> None:
    # spec: trainer F96
    assert (
        await volcano_validate(
            gang_info({"coscheduling": {}}, annotations={"scheduling.volcano.sh/queue-name": ""})
        )
        == []
    )


async def test_f97_empty_queue_name() -> None:
    # spec: trainer F97
    errors = await volcano_validate(
        gang_info({"volcano": {}}, annotations={"scheduling.volcano.sh/queue-name": ""})
    )
    assert errors == [
        FieldError.invalid(
            "spec.annotations[scheduling.volcano.sh/queue-name]", "", "Volcano queue name must not be empty"
        )
    ]
    assert str(errors[0]) == (
        'spec.annotations[scheduling.volcano.sh/queue-name]: Invalid value: "": Volcano queue name must not be empty'
    )


def priority_info(name: str) -> Info:
    info = gang_info({"volcano": {}})
    info.template_spec.obj_apply = {
        "replicatedJobs": [rjob("node", None, [], pod_extra={"priorityClassName": name})]
    }
    return info


async def test_f98_missing_priority_class() -> None:
    # spec: trainer F98
    errors = await volcano_validate(priority_info("non-existent"))
    assert [str(e) for e in errors] == [
        'spec.templateSpec.priorityClassName: Invalid value: "non-existent": PriorityClass "non-existent" '
        'doesn\'t exist: PriorityClass.scheduling.k8s.io "non-existent" not found'
    ]


async def test_f99_existing_priority_class() -> None:
    # spec: trainer F99
    priority = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "existing-priority"},
    }
    assert await volcano_validate(priority_info("existing-priority"), FakeReader([priority])) == []


async def test_system_priority_class_stops_validation() -> None:
    """docs/behaviour/trainer.md §9 quirk 16: validation stops at the first system-* priority class."""
    info = gang_info({"volcano": {}})
    info.template_spec.obj_apply = {
        "replicatedJobs": [
            rjob("a", None, [], pod_extra={"priorityClassName": "system-node-critical"}),
            rjob("b", None, [], pod_extra={"priorityClassName": "non-existent"}),
        ]
    }
    assert await volcano_validate(info) == []
