"""Child Job classification, construction and index helpers (jobset.md 6.A, 6.B, 6.F)."""

from __future__ import annotations

from typing import Any

import pytest
from jsfixtures import NS, cond, job, jobset, rjob, sha1

from trainer.api import jobset_constants as c
from trainer.controllers.jobset import jobs as J

Object = dict[str, Any]


# -- 6.A ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([cond("Complete")], (True, "Complete")),  # spec: jobset 6.A.1
        ([cond("Failed")], (True, "Failed")),  # spec: jobset 6.A.2
        ([cond("")], (False, "")),  # spec: jobset 6.A.3
        ([cond("Suspended")], (False, "")),  # spec: jobset 6.A.4
        ([cond("FailureTarget")], (False, "")),  # spec: jobset 6.A.5
    ],
)
def test_job_finished(conditions: list[Object], expected: tuple[bool, str]) -> None:
    assert J.job_finished(job("j", "r", conditions=conditions)) == expected


def test_classify_by_restart_attempt_and_condition() -> None:
    owned = J.classify_jobs(
        [
            job("old", "r", restarts=0),
            job("run", "r", restarts=1),
            job("ok", "r", restarts=1, conditions=[cond("Complete")]),
            job("bad", "r", restarts=2, conditions=[cond("Failed")]),
        ],
        restarts=1,
    )
    assert [J.name_of(j) for j in owned.previous] == ["old"]
    assert [J.name_of(j) for j in owned.active] == ["run"]
    assert [J.name_of(j) for j in owned.successful] == ["ok"]
    assert [J.name_of(j) for j in owned.failed] == ["bad"]


def test_unparsable_restart_attempt_aborts() -> None:
    bad = job("x", "r")
    del bad["metadata"]["labels"][c.RestartsKey]
    with pytest.raises(J.RestartAttemptError):
        J.classify_jobs([bad], 0)


# -- 6.B ------------------------------------------------------------------------------------------


def std(
    js_name: str, rjob_name: str, idx: int, replicas: int, gidx: int, greplicas: int, **extra: str
) -> dict[str, str]:
    """The standard keys upstream puts on a child Job in the unit tests (uid "")."""
    job_name = f"{js_name}-{rjob_name}-{idx}"
    keys = {
        c.JobSetNameKey: js_name,
        c.JobSetUIDKey: "",
        c.ReplicatedJobNameKey: rjob_name,
        c.GroupNameKey: "default",
        c.ReplicatedJobReplicas: str(replicas),
        c.JobIndexKey: str(idx),
        c.RestartsKey: "0",
        c.JobKey: sha1(f"{NS}/{job_name}"),
        c.JobGlobalIndexKey: str(gidx),
        c.GlobalReplicasKey: str(greplicas),
        c.JobGroupIndexKey: str(gidx),
        c.GroupReplicasKey: str(greplicas),
    }
    keys.update(extra)
    return keys


OWNER = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "name": "test-jobset",
    "uid": "",
    "controller": True,
    "blockOwnerDeletion": True,
}
CONTAINERS = [{"name": "c", "image": "busybox"}]


def build(js: Object, owned: J.ChildJobs | None = None) -> list[Object]:
    owned = owned or J.ChildJobs()
    out: list[Object] = []
    for r in J.replicated_jobs(js):
        out += J.jobs_to_create(js, r, owned)
    return out


def test_active_job_is_not_recreated() -> None:  # spec: jobset 6.B.1
    js = jobset(rjob("replicated-job", 1))
    assert build(js, J.ChildJobs(active=[job("test-jobset-replicated-job-0", "replicated-job")])) == []


def test_two_replicas_literal_jobs() -> None:  # spec: jobset 6.B.2
    js = jobset(rjob("replicated-job", 2))
    expected = []
    for i in range(2):
        keys = std("test-jobset", "replicated-job", i, 2, i, 2)
        expected.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": f"test-jobset-replicated-job-{i}",
                    "namespace": "default",
                    "labels": keys,
                    "annotations": keys,
                    "ownerReferences": [OWNER],
                },
                "spec": {
                    "suspend": False,
                    "template": {
                        "metadata": {"labels": keys, "annotations": keys},
                        "spec": {"containers": CONTAINERS},
                    },
                },
            }
        )
    assert build(js) == expected


def test_template_labels_and_annotations_kept_in_place() -> None:  # spec: jobset 6.B.3
    js = jobset(
        rjob(
            "replicated-job",
            1,
            job_labels={"job-label-key1": "v1"},
            job_annotations={"job-annotation-key1": "v2"},
            pod_labels={"pod-label-key1": "v3"},
            pod_annotations={"pod-annotation-key1": "v4"},
        )
    )
    (built,) = build(js)
    keys = std("test-jobset", "replicated-job", 0, 1, 0, 1)
    assert built["metadata"]["labels"] == {"job-label-key1": "v1", **keys}
    assert built["metadata"]["annotations"] == {"job-annotation-key1": "v2", **keys}
    assert built["spec"]["template"]["metadata"] == {
        "labels": {"pod-label-key1": "v3", **keys},
        "annotations": {"pod-annotation-key1": "v4", **keys},
    }


@pytest.mark.parametrize(
    "owned",
    [
        J.ChildJobs(active=[job("test-jobset-replicated-job-0", "replicated-job")]),  # spec: jobset 6.B.4
        J.ChildJobs(successful=[job("test-jobset-replicated-job-0", "replicated-job")]),  # spec: jobset 6.B.5
        J.ChildJobs(failed=[job("test-jobset-replicated-job-0", "replicated-job")]),  # spec: jobset 6.B.6
        J.ChildJobs(previous=[job("test-jobset-replicated-job-0", "replicated-job")]),  # spec: jobset 6.B.7
    ],
)
def test_only_missing_names_are_created(owned: J.ChildJobs) -> None:
    assert [J.name_of(j) for j in build(jobset(rjob("replicated-job", 2)), owned)] == [
        "test-jobset-replicated-job-1"
    ]


def test_blocking_recreate_waits_for_previous() -> None:  # spec: jobset 6.B.8
    js = jobset(rjob("replicated-job", 2), failurePolicy={"restartStrategy": "BlockingRecreate"})
    assert build(js, J.ChildJobs(previous=[job("test-jobset-replicated-job-0", "replicated-job")])) == []


def test_global_indexes_across_rjobs() -> None:  # spec: jobset 6.B.9
    js = jobset(rjob("replicated-job-A", 1), rjob("replicated-job-B", 2))
    built = build(js, J.ChildJobs(active=[job("test-jobset-replicated-job-B-0", "replicated-job-B")]))
    assert [J.name_of(j) for j in built] == [
        "test-jobset-replicated-job-A-0",
        "test-jobset-replicated-job-B-1",
    ]
    assert built[0]["metadata"]["labels"] == std("test-jobset", "replicated-job-A", 0, 1, 0, 3)
    assert built[1]["metadata"]["labels"] == std("test-jobset", "replicated-job-B", 1, 2, 2, 3)


EXCL = {c.ExclusiveKey: "test-topology-domain"}
NODESEL = {c.ExclusiveKey: "test-topology-domain", c.NodeSelectorStrategyKey: "true"}
TOLERATION = {"key": c.NoScheduleTaintKey, "operator": "Exists", "effect": "NoSchedule"}


def test_rjob_exclusive_annotation_only_on_its_jobs() -> None:  # spec: jobset 6.B.10
    js = jobset(rjob("replicated-job-A", 1, job_annotations=EXCL), rjob("replicated-job-B", 1))
    a, b = build(js)
    assert a["metadata"]["annotations"][c.ExclusiveKey] == "test-topology-domain"
    assert a["spec"]["template"]["metadata"]["annotations"][c.ExclusiveKey] == "test-topology-domain"
    assert c.ExclusiveKey not in a["metadata"]["labels"]
    assert c.ExclusiveKey not in b["metadata"]["annotations"]
    assert "nodeSelector" not in a["spec"]["template"]["spec"]
    assert "nodeSelector" not in b["spec"]["template"]["spec"]


def test_rjob_node_selector_strategy() -> None:  # spec: jobset 6.B.11
    js = jobset(rjob("replicated-job-A", 1, job_annotations=NODESEL), rjob("replicated-job-B", 1))
    a, b = build(js)
    assert {k: a["metadata"]["annotations"][k] for k in NODESEL} == NODESEL
    assert a["spec"]["template"]["spec"]["nodeSelector"] == {
        c.NamespacedJobKey: "default_test-jobset-replicated-job-A-0"
    }
    assert a["spec"]["template"]["spec"]["tolerations"] == [TOLERATION]
    assert "nodeSelector" not in b["spec"]["template"]["spec"]
    assert "tolerations" not in b["spec"]["template"]["spec"]


def test_jobset_exclusive_annotation_on_all_jobs() -> None:  # spec: jobset 6.B.12
    js = jobset(rjob("replicated-job-A", 1), rjob("replicated-job-B", 1))
    js["metadata"]["annotations"] = dict(EXCL)
    for built in build(js):
        assert built["metadata"]["annotations"][c.ExclusiveKey] == "test-topology-domain"
        assert built["spec"]["template"]["metadata"]["annotations"][c.ExclusiveKey] == "test-topology-domain"
        assert "nodeSelector" not in built["spec"]["template"]["spec"]


def test_jobset_node_selector_strategy_on_all_jobs() -> None:  # spec: jobset 6.B.13
    js = jobset(rjob("replicated-job-A", 1), rjob("replicated-job-B", 1))
    js["metadata"]["annotations"] = dict(NODESEL)
    for built, rname in zip(build(js), ("replicated-job-A", "replicated-job-B"), strict=True):
        assert {k: built["metadata"]["annotations"][k] for k in NODESEL} == NODESEL
        assert built["spec"]["template"]["spec"]["nodeSelector"] == {
            c.NamespacedJobKey: f"default_test-jobset-{rname}-0"
        }
        assert built["spec"]["template"]["spec"]["tolerations"] == [TOLERATION]


def test_subdomain_when_dns_enabled() -> None:  # spec: jobset 6.B.14
    js = jobset(rjob("replicated-job", 1), network={"enableDNSHostnames": True, "subdomain": "test-jobset"})
    assert build(js)[0]["spec"]["template"]["spec"]["subdomain"] == "test-jobset"


@pytest.mark.parametrize(
    "suspend",
    [True, False],  # spec: jobset 6.B.15 / spec: jobset 6.B.16
)
def test_suspend_copied_to_jobs(suspend: bool) -> None:
    assert build(jobset(rjob("replicated-job", 1), suspend=suspend))[0]["spec"]["suspend"] is suspend


def test_all_placement_features_together() -> None:  # spec: jobset 6.B.17
    js = jobset(rjob("replicated-job", 1, job_annotations=NODESEL), network={"enableDNSHostnames": True})
    pod_spec = build(js)[0]["spec"]["template"]["spec"]
    assert pod_spec == {
        "containers": CONTAINERS,
        "subdomain": "test-jobset",
        "nodeSelector": {c.NamespacedJobKey: "default_test-jobset-replicated-job-0"},
        "tolerations": [TOLERATION],
    }


def test_coordinator_label_and_annotation() -> None:  # spec: jobset 6.B.18
    js = jobset(
        rjob("replicated-job", 1),
        network={"enableDNSHostnames": True},
        coordinator={"replicatedJob": "replicated-job", "jobIndex": 0, "podIndex": 0},
    )
    built = build(js)[0]
    for target in (built["metadata"], built["spec"]["template"]["metadata"]):
        assert target["labels"][c.CoordinatorKey] == "test-jobset-replicated-job-0-0.test-jobset"
        assert target["annotations"][c.CoordinatorKey] == "test-jobset-replicated-job-0-0.test-jobset"


def test_coordinator_label_even_without_dns() -> None:
    js = jobset(rjob("r", 1), coordinator={"replicatedJob": "r", "jobIndex": 0, "podIndex": 1})
    assert build(js)[0]["metadata"]["labels"][c.CoordinatorKey] == "test-jobset-r-0-1.test-jobset"


def test_in_order_startup_does_not_change_construction() -> None:  # spec: jobset 6.B.19
    plain = build(jobset(rjob("replicated-job", 1)))
    ordered = build(jobset(rjob("replicated-job", 1), startupPolicy={"startupPolicyOrder": "InOrder"}))
    assert plain == ordered


def test_restart_attempt_label_follows_status() -> None:
    js = jobset(rjob("r", 1))
    js["status"] = {"restarts": 3}
    assert build(js)[0]["metadata"]["labels"][c.RestartsKey] == "3"


def test_spec_job_key_example() -> None:
    """The sha1 example of jobset.md 2.9, checked against the literal the spec prints."""
    assert J.job_hash_key("default", "my-js-workers-1") == "33d4f6e098125ae9854348a4878f7f03b8964661"


# -- 6.F ------------------------------------------------------------------------------------------


def _js(*pairs: tuple[str, int, str]) -> Object:
    return jobset(*(rjob(n, r, group=g) for n, r, g in pairs))


def test_index_helpers() -> None:
    assert J.global_job_index(_js(("rjob", 3, "default")), "rjob", 1) == "1"  # spec: jobset 6.F.1
    three = _js(("rjob1", 2, "default"), ("rjob2", 4, "default"), ("rjob3", 1, "default"))
    assert J.global_job_index(three, "rjob2", 3) == "5"  # spec: jobset 6.F.2
    assert J.global_job_index(three, "nope", 0) == ""  # spec: jobset 6.F.3
    assert J.global_replicas(jobset()) == "0"  # spec: jobset 6.F.4
    assert J.global_replicas(_js(("r", 3, "default"))) == "3"  # spec: jobset 6.F.5
    assert J.global_replicas(_js(("a", 2, "default"), ("b", 5, "default"))) == "7"  # spec: jobset 6.F.6
    assert J.group_job_index(_js(("rjob1", 3, "groupA")), "groupA", "rjob1", 1) == "1"  # spec: jobset 6.F.7
    mixed = _js(("rjob1", 1, "groupA"), ("rjob2", 2, "groupB"), ("rjob3", 3, "groupA"))
    assert J.group_job_index(mixed, "groupA", "rjob3", 1) == "2"  # spec: jobset 6.F.8
    assert J.group_job_index(mixed, "groupA", "rjob2", 0) == ""  # spec: jobset 6.F.9
    assert J.group_job_index(mixed, "groupA", "nope", 0) == ""  # spec: jobset 6.F.10
    assert J.group_job_index(mixed, "groupZ", "rjob1", 0) == ""  # spec: jobset 6.F.11
    assert J.group_replicas(jobset(), "groupA") == "0"  # spec: jobset 6.F.12
    assert J.group_replicas(_js(("a", 1, "groupA")), "groupA") == "1"  # spec: jobset 6.F.13
    assert (
        J.group_replicas(_js(("a", 1, "groupA"), ("b", 2, "groupA")), "groupA") == "3"
    )  # spec: jobset 6.F.14
    assert (
        J.group_replicas(_js(("a", 1, "groupA"), ("b", 2, "groupB")), "groupB") == "2"
    )  # spec: jobset 6.F.15
    assert (
        J.group_replicas(_js(("a", 1, "groupA"), ("b", 2, "groupB")), "groupC") == "0"
    )  # spec: jobset 6.F.16
