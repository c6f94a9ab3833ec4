"""Exclusive placement: pod reconciler (6.L), pod webhook helpers (6.P), pod webhooks, utils and metrics (6.R)."""

from __future__ import annotations

from typing import Any

import pytest
from jsfixtures import NOW, RecordingClient, ts
from prometheus_client import CollectorRegistry

from manager import ReconcileError, Request
from manager.client.errors import InternalError
from manager.controller.event import CreateEvent, UpdateEvent
from manager.meta.gvk import NODE as NODE_GVK
from manager.meta.gvk import POD as POD_GVK
from manager.webhook import Denied
from trainer.api import jobset_constants as c
from trainer.controllers.jobset import NODE_CACHE
from trainer.controllers.jobset.metrics import JobSetMetrics
from trainer.controllers.jobset.pod_reconciler import (
    PodReconciler,
    delete_follower_pods,
    leader_pod_predicate,
    validate_pod_placements,
)
from trainer.controllers.jobset.util import merge_maps, merge_slices
from trainer.jobset.placement import (
    PLACEMENT_POD_CACHE,
    POD_JOB_KEY,
    POD_NAME_KEY,
    PlacementError,
    gen_leader_pod_name,
    leader_pod_for_follower,
    pod_job_key_index,
    pod_name_index,
    validate_same_owner,
)
from webhooks.pod import PodDefaulter, PodValidator

Object = dict[str, Any]
TOPOLOGY = "test-node-topologyKey"
LEADER = "test-jobset-replicated-job-1-test-job-0-0"
FOLLOWER = "test-jobset-replicated-job-1-test-job-0-1"


def pod(
    name: str,
    index: str | None,
    *,
    node: str = "",
    selector: dict[str, str] | None = None,
    owner_uid: str | None = "job-uid-1",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    deleting: bool = False,
    conditions: list[Object] | None = None,
) -> Object:
    ann = {c.ExclusiveKey: TOPOLOGY, c.JobSetNameKey: "js"}
    if index is not None:
        ann[c.JobCompletionIndexAnnotation] = index
    ann.update(annotations or {})
    meta: Object = {
        "name": name,
        "namespace": "default",
        "labels": {
            c.JobKey: "key1",
            c.JobSetNameKey: "js",
            c.ReplicatedJobNameKey: "rjob",
            c.JobIndexKey: "0",
            **(labels or {}),
        },
        "annotations": ann,
    }
    if owner_uid is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": owner_uid, "controller": True}
        ]
    if deleting:
        meta["deletionTimestamp"] = ts(NOW)
        meta["finalizers"] = ["x"]
    spec: Object = {"containers": [{"name": "c", "image": "i"}]}
    if node:
        spec["nodeName"] = node
    if selector is not None:
        spec["nodeSelector"] = selector
    out: Object = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if conditions is not None:
        out["status"] = {"conditions": conditions}
    return out


def node(name: str, labels: dict[str, str] | None = None) -> Object:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}}}


class Client(RecordingClient):
    def __init__(self, *objects: Any) -> None:
        super().__init__(*objects)
        self._cluster_scoped.add(NODE_GVK)
        self.add_index(POD_GVK, POD_JOB_KEY, pod_job_key_index)
        self.add_index(POD_GVK, POD_NAME_KEY, pod_name_index)


# -- 6.L ------------------------------------------------------------------------------------------


async def placements(*objects: Object, follower: Object) -> bool:
    client = Client(*objects)
    return await validate_pod_placements(
        client, pod(LEADER, "0", node="test-node"), [pod(LEADER, "0", node="test-node"), follower]
    )


async def test_node_without_topology_label() -> None:  # spec: jobset 6.L.1
    with pytest.raises(PlacementError, match=rf"node does not have topology label: {TOPOLOGY}"):
        await placements(
            node("test-node"), follower=pod(FOLLOWER, "1", selector={TOPOLOGY: "topologyDomain"})
        )


async def test_matching_follower_is_valid() -> None:  # spec: jobset 6.L.2
    assert await placements(
        node("test-node", {TOPOLOGY: "topologyDomain"}),
        follower=pod(FOLLOWER, "1", selector={TOPOLOGY: "topologyDomain"}),
    )


async def test_the_node_cache_keeps_what_placement_reads() -> None:
    """The Node cache keeps a Node's name and labels (NODE_CACHE, J-17): placement reads nothing
    else, so a projected Node gives the same verdicts as a whole one."""
    whole = node("test-node", {TOPOLOGY: "topologyDomain", "kubernetes.io/os": "linux"})
    whole["metadata"] |= {"uid": "u-1", "resourceVersion": "7", "annotations": {"kwok.x-k8s.io/node": "fake"}}
    whole["status"] = {
        "capacity": {"cpu": "32"},
        "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-12-05T02:36:03Z"}],
        "images": [{"names": ["registry.example/trainer:v2.3.0"], "sizeBytes": 123}],
    }
    assert NODE_CACHE.transform is not None
    cached = NODE_CACHE.transform(whole)
    assert cached == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "test-node",
            "uid": "u-1",
            "resourceVersion": "7",
            "labels": whole["metadata"]["labels"],
        },
    }
    assert await placements(cached, follower=pod(FOLLOWER, "1", selector={TOPOLOGY: "topologyDomain"}))
    with pytest.raises(PlacementError, match="follower topology"):
        await placements(cached, follower=pod(FOLLOWER, "1", selector={TOPOLOGY: "elsewhere"}))


async def test_follower_selector_problems() -> None:
    labelled = node("test-node", {TOPOLOGY: "topologyDomain"})
    with pytest.raises(PlacementError, match=rf"^pod {FOLLOWER} nodeSelector is nil$"):  # spec: jobset 6.L.3
        await placements(labelled, follower=pod(FOLLOWER, "1"))
    with pytest.raises(
        PlacementError, match=rf"^pod {FOLLOWER} nodeSelector is missing key: {TOPOLOGY}$"
    ):  # spec: jobset 6.L.4
        await placements(labelled, follower=pod(FOLLOWER, "1", selector={}))
    with pytest.raises(PlacementError) as info:  # spec: jobset 6.L.5
        await placements(labelled, follower=pod(FOLLOWER, "1", selector={TOPOLOGY: "topologyDomain1"}))
    assert str(info.value) == 'follower topology "topologyDomain1" != leader topology "topologyDomain"'


async def test_node_get_error() -> None:  # spec: jobset 6.L.6
    client = Client()
    client.inject_error("get", InternalError("example error", code=500))
    with pytest.raises(InternalError, match=r"example error"):
        await validate_pod_placements(client, pod(LEADER, "0", node="test-node"), [])


async def test_missing_node_means_empty_topology() -> None:
    client = Client()
    assert await validate_pod_placements(
        client, pod(LEADER, "0", node="gone"), [pod(FOLLOWER, "1", selector={TOPOLOGY: ""})]
    )


async def test_delete_follower_pods_deletes_only_followers() -> None:  # spec: jobset 6.L.7
    leader, follower = pod(LEADER, "0"), pod(FOLLOWER, "1")
    client = Client(leader, follower)
    await delete_follower_pods(client, [leader, follower])
    assert client.deletes == [("Pod", FOLLOWER, "Background")]
    assert client.requests["status.update"] == 1


async def test_delete_follower_updates_false_condition() -> None:  # spec: jobset 6.L.8
    follower = pod(FOLLOWER, "1", conditions=[{"type": "DisruptionTarget", "status": "False"}])
    client = Client(follower)
    updates: list[Object] = []
    original = client.status.update

    async def spy(obj: Any, **kw: Any) -> Any:
        updates.append(obj)
        return await original(obj, **kw)

    client.status.update = spy  # type: ignore[method-assign]
    await delete_follower_pods(client, [follower])
    assert updates[0]["status"]["conditions"] == [
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "ExclusivePlacementViolation",
            "message": "Pod violated JobSet exclusive placement policy",
        }
    ]
    assert len(client.deletes) == 1


async def test_delete_follower_status_error() -> None:  # spec: jobset 6.L.9
    client = Client(pod(FOLLOWER, "1"))
    client.inject_error("status.update", InternalError("example error", code=500))
    with pytest.raises(InternalError, match=r"example error"):
        await delete_follower_pods(client, [pod(FOLLOWER, "1")])


async def test_delete_follower_delete_error_without_status_write() -> None:  # spec: jobset 6.L.10
    follower = pod(FOLLOWER, "1", conditions=[{"type": "DisruptionTarget", "status": "True"}])
    client = Client(follower)
    client.inject_error("delete", InternalError("example error", code=500))
    with pytest.raises(InternalError, match=r"example error"):
        await delete_follower_pods(client, [follower])
    assert client.requests["status.update"] == 0


async def test_pod_reconciler_never_deletes_and_reports_errors() -> None:
    leader = pod(LEADER, "0", node="test-node")
    bad = pod(FOLLOWER, "1", selector={TOPOLOGY: "other"})
    client = Client(leader, bad, node("test-node", {TOPOLOGY: "topologyDomain"}))
    with pytest.raises(
        ReconcileError, match=r'follower topology "other" != leader topology "topologyDomain"'
    ):
        await PodReconciler(client).reconcile(Request("default", LEADER))
    assert client.writes == 0
    no_key = pod("x-a-0-0-abc", "0", node="test-node")
    del no_key["metadata"]["labels"][c.JobKey]
    client2 = Client(no_key)
    with pytest.raises(ReconcileError, match=r'job key label not found on leader pod: "x-a-0-0-abc"'):
        await PodReconciler(client2).reconcile(Request("default", "x-a-0-0-abc"))
    assert await PodReconciler(Client()).reconcile(Request("default", "gone")) is None


def test_leader_predicate() -> None:
    predicate = leader_pod_predicate()
    assert predicate.create(CreateEvent(pod(LEADER, "0", node="n")))
    assert not predicate.create(CreateEvent(pod(LEADER, "0")))
    assert not predicate.create(CreateEvent(pod(FOLLOWER, "1", node="n")))
    assert not predicate.create(CreateEvent(pod(LEADER, "0", node="n", deleting=True)))
    plain = pod(LEADER, "0", node="n")
    del plain["metadata"]["annotations"][c.ExclusiveKey]
    assert not predicate.update(UpdateEvent(pod(LEADER, "0", node="n"), plain))


def test_indexes() -> None:
    assert pod_job_key_index(pod("js-rjob-0-0-xyz", "0")) == ["key1"]
    assert pod_name_index(pod("js-rjob-0-0-xyz", "0")) == ["js-rjob-0-0"]
    assert pod_name_index(pod("a-b-c-d", "0")) == []
    plain = pod("js-rjob-0-0-xyz", "0")
    del plain["metadata"]["annotations"][c.ExclusiveKey]
    assert pod_name_index(plain) == [] and pod_job_key_index(plain) == []


# -- 6.P ------------------------------------------------------------------------------------------


def test_leader_name_and_owner_helpers() -> None:
    assert (
        gen_leader_pod_name(pod("f", "1", labels={c.JobSetNameKey: "js", c.ReplicatedJobNameKey: "rjob"}))
        == "js-rjob-0-0"
    )  # spec: jobset 6.P.1
    missing = pod("f", "1")
    del missing["metadata"]["labels"][c.JobIndexKey]
    with pytest.raises(
        PlacementError, match=r"pod missing label: jobset.sigs.k8s.io/job-index"
    ):  # spec: jobset 6.P.2
        gen_leader_pod_name(missing)
    validate_same_owner(pod("f", "1"), pod("l", "0"))  # spec: jobset 6.P.3
    with pytest.raises(
        PlacementError, match=r"^follower pod owner UID \(job-uid-2\) != leader pod owner UID \(job-uid-1\)$"
    ):  # spec: jobset 6.P.4
        validate_same_owner(pod("f", "1", owner_uid="job-uid-2"), pod("l", "0"))
    with pytest.raises(PlacementError, match=r"^follower pod has no owner reference$"):  # spec: jobset 6.P.5
        validate_same_owner(pod("f", "1", owner_uid=None), pod("l", "0"))
    with pytest.raises(
        PlacementError, match=r'^leader pod "leader-pod" has no owner reference$'
    ):  # spec: jobset 6.P.6
        validate_same_owner(pod("f", "1"), pod("leader-pod", "0", owner_uid=None))


async def test_leader_pod_for_follower() -> None:
    follower = pod("js-rjob-0-1-abc", "1")
    leader = pod("js-rjob-0-0-xyz", "0")
    assert (await leader_pod_for_follower(Client(leader), follower, "default"))["metadata"][
        "name"
    ] == "js-rjob-0-0-xyz"  # spec: jobset 6.P.7
    no_index = pod("js-rjob-0-1-abc", "1")
    del no_index["metadata"]["labels"][c.JobIndexKey]
    with pytest.raises(
        PlacementError, match=r"^pod missing label: jobset.sigs.k8s.io/job-index$"
    ):  # spec: jobset 6.P.8
        await leader_pod_for_follower(Client(leader), no_index, "default")
    with pytest.raises(
        PlacementError, match=r"expected 1 leader pod \(js-rjob-0-0\), but got 0"
    ):  # spec: jobset 6.P.9
        await leader_pod_for_follower(Client(), follower, "default")
    with pytest.raises(
        PlacementError, match=r"expected 1 leader pod \(js-rjob-0-0\), but got 2"
    ):  # spec: jobset 6.P.10
        await leader_pod_for_follower(Client(leader, pod("js-rjob-0-0-uvw", "0")), follower, "default")
    with pytest.raises(
        PlacementError, match=r"expected 1 leader pod \(js-rjob-0-0\), but got 0"
    ):  # spec: jobset 6.P.11
        await leader_pod_for_follower(Client(pod("js-rjob-0-0-xyz", "0", deleting=True)), follower, "default")
    with pytest.raises(
        PlacementError, match=r"follower pod owner UID \(job-uid-1\) != leader pod owner UID \(job-uid-2\)"
    ):  # spec: jobset 6.P.12
        await leader_pod_for_follower(
            Client(pod("js-rjob-0-0-xyz", "0", owner_uid="job-uid-2")), follower, "default"
        )


# -- pod webhooks ----------------------------------------------------------------------------------


async def test_mutating_webhook_leader_affinities_and_priority() -> None:
    leader = pod("js-rjob-0-0-xyz", "0")
    leader["spec"]["priority"] = 100
    await PodDefaulter(Client()).default(leader)
    assert leader["metadata"]["labels"][c.PriorityKey] == "100"
    assert leader["spec"]["affinity"] == {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [{"key": c.JobKey, "operator": "In", "values": ["key1"]}]
                    },
                    "topologyKey": TOPOLOGY,
                    "namespaceSelector": {},
                }
            ]
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": c.JobKey, "operator": "Exists"},
                            {"key": c.JobKey, "operator": "NotIn", "values": ["key1"]},
                            {"key": c.PriorityKey, "operator": "In", "values": ["100"]},
                        ]
                    },
                    "topologyKey": TOPOLOGY,
                    "namespaceSelector": {},
                }
            ]
        },
    }


async def test_mutating_webhook_follower_node_selector() -> None:
    leader = pod("js-rjob-0-0-xyz", "0", node="n1")
    client = Client(leader, node("n1", {TOPOLOGY: "pool-a"}))
    follower = pod("js-rjob-0-1-abc", "1")
    await PodDefaulter(client).default(follower)
    assert follower["spec"]["nodeSelector"] == {TOPOLOGY: "pool-a"}
    # leader not scheduled / absent: no mutation, no error
    for objects in ((pod("js-rjob-0-0-xyz", "0"),), ()):
        untouched = pod("js-rjob-0-1-abc", "1")
        await PodDefaulter(Client(*objects)).default(untouched)
        assert "nodeSelector" not in untouched["spec"]
    # node without the label: denied
    with pytest.raises(Denied, match=rf"node does not have topology label: {TOPOLOGY}"):
        await PodDefaulter(Client(leader, node("n1"))).default(pod("js-rjob-0-1-abc", "1"))
    # the node-selector strategy: untouched
    strategy = pod("js-rjob-0-1-abc", "1", annotations={c.NodeSelectorStrategyKey: "true"})
    await PodDefaulter(client).default(strategy)
    assert "nodeSelector" not in strategy["spec"]


async def test_validating_webhook() -> None:
    leader = pod("js-rjob-0-0-xyz", "0", node="n1")
    validator = PodValidator(Client(leader))
    assert await validator.validate_create(pod("js-rjob-0-0-xyz", "0")) is None
    with pytest.raises(Denied, match=r"^follower pod node selector not set$"):
        await validator.validate_create(pod("js-rjob-0-1-abc", "1"))
    with pytest.raises(
        Denied,
        match=rf"^follower pod node selector for topology domain not found. missing selector: {TOPOLOGY}$",
    ):
        await validator.validate_create(pod("js-rjob-0-1-abc", "1", selector={}))
    assert await validator.validate_create(pod("js-rjob-0-1-abc", "1", selector={TOPOLOGY: "x"})) is None
    unscheduled = PodValidator(Client(pod("js-rjob-0-0-xyz", "0")))
    with pytest.raises(
        Denied,
        match=r"leader pod not yet scheduled, not creating follower pod. this is an expected, transient error",
    ):
        await unscheduled.validate_create(pod("js-rjob-0-1-abc", "1", selector={TOPOLOGY: "x"}))
    with pytest.raises(Denied, match=r"expected 1 leader pod"):
        await PodValidator(Client()).validate_create(pod("js-rjob-0-1-abc", "1", selector={TOPOLOGY: "x"}))
    foreign = pod("x-1", "1")
    del foreign["metadata"]["annotations"][c.JobSetNameKey]
    assert await validator.validate_create(foreign) is None
    assert await validator.validate_update(foreign, foreign) is None


# -- 6.R ------------------------------------------------------------------------------------------


def test_merge_maps() -> None:
    assert merge_maps({"a": 1, "b": 2}, {"c": 3, "d": 4}) == {
        "a": 1,
        "b": 2,
        "c": 3,
        "d": 4,
    }  # spec: jobset 6.R.1
    assert merge_maps({"a": 1, "b": 2}, {"b": 3, "c": 4}) == {"a": 1, "b": 3, "c": 4}  # spec: jobset 6.R.2
    assert merge_maps({}, {}) == {}  # spec: jobset 6.R.3
    assert merge_maps({}, {"a": 1}) == {"a": 1}  # spec: jobset 6.R.4


def test_merge_slices() -> None:
    assert sorted(merge_slices([1, 2, 3], [3, 4, 5])) == [1, 2, 3, 4, 5]  # spec: jobset 6.R.5
    assert merge_slices([], []) == []  # spec: jobset 6.R.6
    assert merge_slices([1, 2], []) == [1, 2]  # spec: jobset 6.R.7
    assert merge_slices([{"key": "a"}], [{"key": "a"}, {"key": "b"}]) == [{"key": "a"}, {"key": "b"}]


def test_counters() -> None:
    registry = CollectorRegistry()
    metrics = JobSetMetrics(registry)
    for name in ("test1", "test2", "test1"):  # spec: jobset 6.R.8
        metrics.jobset_failed(name, "default")
    for name in ("test1", "test2", "test1"):  # spec: jobset 6.R.9
        metrics.jobset_completed(name, "default")
    for metric in ("jobset_failed_total", "jobset_completed_total"):
        assert registry.get_sample_value(metric, {"jobset_name": "test1", "namespace": "default"}) == 2
        assert registry.get_sample_value(metric, {"jobset_name": "test2", "namespace": "default"}) == 1
    help_lines = [m.documentation for m in registry.collect()]
    assert (
        "The total number of failed JobSets" in help_lines
        and "The total number of completed JobSets" in help_lines
    )


async def test_counters_on_manager_registry() -> None:
    from manager.metrics.registry import REGISTRY
    from trainer.controllers.jobset.metrics import default_metrics

    default_metrics().jobset_failed("registered", "ns")
    assert (
        REGISTRY.get_sample_value("jobset_failed_total", {"jobset_name": "registered", "namespace": "ns"})
        == 1
    )


async def test_the_webhook_process_pod_cache_keeps_what_the_pod_webhooks_read() -> None:
    """PLACEMENT_POD_CACHE (the webhook process's Pods, J-17): a leader cut to its name, labels,
    annotations, owner and node gives the Pod webhooks the verdicts the whole Pod gives."""
    assert PLACEMENT_POD_CACHE.transform is not None
    whole = pod("js-rjob-0-0-xyz", "0", node="n1", conditions=[{"type": "Ready", "status": "True"}])
    whole["spec"]["containers"] = [
        {"name": "node", "image": "trainer:v2.3.0", "env": [{"name": "A", "value": "1"}]}
    ]
    cached = PLACEMENT_POD_CACHE.transform(whole)
    assert "status" not in cached
    assert cached["spec"] == {"nodeName": "n1"}
    assert cached["metadata"]["ownerReferences"] == whole["metadata"]["ownerReferences"]
    assert PLACEMENT_POD_CACHE.label_selectors == [c.JobSetNameKey]
    topology = node("n1", {TOPOLOGY: "pool-a"})
    follower = pod("js-rjob-0-1-abc", "1")
    await PodDefaulter(Client(cached, topology)).default(follower)
    assert follower["spec"]["nodeSelector"] == {TOPOLOGY: "pool-a"}
    validator = PodValidator(Client(cached))
    assert await validator.validate_create(pod("js-rjob-0-1-abc", "1", selector={TOPOLOGY: "pool-a"})) is None
    stranger = pod("js-rjob-0-1-abc", "1", selector={TOPOLOGY: "pool-a"}, owner_uid="another-job")
    with pytest.raises(Denied):
        await validator.validate_create(stranger)
