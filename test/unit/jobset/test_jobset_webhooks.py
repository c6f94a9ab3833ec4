"""JobSet defaulting and validation webhooks (jobset.md 6.M, 6.N, 6.O)."""

from __future__ import annotations

import copy
import sys
import time
from typing import Any

import pytest
from jsfixtures import jobset, rjob

from manager.webhook import defaulting_handler, validating_handler
from manager.webhook.admission import AdmissionRequest
from webhooks.jobset import JobSetDefaulter, JobSetValidator, default_jobset, validate_create, validate_update

Object = dict[str, Any]
DNS1035 = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation "
    "is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)


def defaulted(js: Object) -> Object:
    out = copy.deepcopy(js)
    default_jobset(out)
    return out


# -- 6.M -----------------------------------------------------------------------------------------


def test_defaults_full_literal() -> None:  # spec: jobset 6.M.1
    js = jobset(rjob("rj", 1))
    assert defaulted(js)["spec"] == {
        "replicatedJobs": [
            {
                "name": "rj",
                "groupName": "default",
                "replicas": 1,
                "template": {
                    "spec": {
                        "completionMode": "Indexed",
                        "template": {
                            "spec": {
                                "containers": [{"name": "c", "image": "busybox"}],
                                "restartPolicy": "OnFailure",
                            }
                        },
                    }
                },
            }
        ],
        "successPolicy": {"operator": "All"},
        "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
    }


def test_non_indexed_kept() -> None:  # spec: jobset 6.M.2
    out = defaulted(jobset(rjob("rj", 1, completion_mode="NonIndexed")))
    assert out["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] == "NonIndexed"
    assert out["spec"]["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}


@pytest.mark.parametrize(
    ("network", "expected"),
    [
        (None, {"enableDNSHostnames": True, "publishNotReadyAddresses": True}),  # spec: jobset 6.M.3
        (
            {"enableDNSHostnames": False},
            {"enableDNSHostnames": False, "publishNotReadyAddresses": True},
        ),  # spec: jobset 6.M.4
        (
            {"publishNotReadyAddresses": False},
            {"enableDNSHostnames": True, "publishNotReadyAddresses": False},
        ),  # spec: jobset 6.M.5
        (
            {"enableDNSHostnames": False, "publishNotReadyAddresses": True},
            {"enableDNSHostnames": False, "publishNotReadyAddresses": True},
        ),  # spec: jobset 6.M.6
    ],
)
def test_network_defaults(network: Object | None, expected: Object) -> None:
    js = jobset(rjob("rj", 1)) if network is None else jobset(rjob("rj", 1), network=network)
    assert defaulted(js)["spec"]["network"] == expected


def test_restart_policy() -> None:
    out = defaulted(jobset(rjob("rj", 1)))  # spec: jobset 6.M.7
    assert (
        out["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["restartPolicy"]
        == "OnFailure"
    )
    js = jobset(rjob("rj", 1))
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    out = defaulted(js)  # spec: jobset 6.M.8
    assert (
        out["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["restartPolicy"] == "Always"
    )


def test_policies_and_managed_by() -> None:
    assert defaulted(jobset())["spec"]["successPolicy"] == {"operator": "All"}  # spec: jobset 6.M.9
    any_ = defaulted(jobset(successPolicy={"operator": "Any"}))  # spec: jobset 6.M.10
    assert any_["spec"]["successPolicy"] == {"operator": "Any"}
    for _ in range(2):  # spec: jobset 6.M.11
        ordered = defaulted(jobset(startupPolicy={"startupPolicyOrder": "InOrder"}))
        assert ordered["spec"]["startupPolicy"] == {"startupPolicyOrder": "InOrder"}
    plain = defaulted(jobset())  # spec: jobset 6.M.12
    assert "managedBy" not in plain["spec"] and plain["spec"]["network"]["enableDNSHostnames"] is True
    assert (
        defaulted(jobset(managedBy="other-controller"))["spec"]["managedBy"] == "other-controller"
    )  # spec: jobset 6.M.13


def test_rule_names() -> None:
    one = defaulted(jobset(failurePolicy={"rules": [{"action": "FailJobSet"}]}))  # spec: jobset 6.M.14
    assert one["spec"]["failurePolicy"]["rules"][0]["name"] == "failurePolicyRule0"
    two = defaulted(  # spec: jobset 6.M.15
        jobset(
            failurePolicy={
                "rules": [{"name": "ruleWithAName", "action": "FailJobSet"}, {"action": "FailJobSet"}]
            }
        )
    )
    assert [r["name"] for r in two["spec"]["failurePolicy"]["rules"]] == [
        "ruleWithAName",
        "failurePolicyRule1",
    ]


async def test_defaulting_handler_answers_json_patch() -> None:
    handler = defaulting_handler(JobSetDefaulter())
    req = AdmissionRequest(uid="u", kind={}, resource={}, operation="CREATE", object=jobset())
    response = await handler(req)
    assert response.allowed
    ops = {(p["op"], p["path"]) for p in response.patches}
    assert ("add", "/spec/successPolicy") in ops and ("add", "/spec/network") in ops


# -- 6.N -----------------------------------------------------------------------------------------


def errs(js: Object) -> str:
    return "\n".join(validate_create(js))


def test_replicas_times_parallelism() -> None:
    js = jobset(
        rjob("a", 2147483647, parallelism=2147483647), rjob("b", -2147483648, parallelism=-2147483648)
    )
    text = errs(js)  # spec: jobset 6.N.1
    assert "the product of replicas and parallelism must not exceed 2147483647 for replicatedJob 'a'" in text
    assert "the product of replicas and parallelism must not exceed 2147483647 for replicatedJob 'b'" in text
    assert errs(defaulted(jobset(rjob("a", 1)))) == ""  # spec: jobset 6.N.2


def test_success_policy_targets() -> None:  # spec: jobset 6.N.3
    js = defaulted(
        jobset(rjob("a", 1), successPolicy={"operator": "All", "targetReplicatedJobs": ["does not exist"]})
    )
    assert errs(js) == "invalid replicatedJob name 'does not exist' does not appear in .spec.ReplicatedJobs"


def test_names() -> None:
    sub = jobset(rjob("a", 1), network={"enableDNSHostnames": True, "subdomain": "a" * 64})
    assert (
        f'spec.network.subdomain: Invalid value: "{"a" * 64}": .spec.network.subdomain is too long, must be less than 63 characters'
        in errs(sub)
    )  # spec: jobset 6.N.4
    dotted = errs(jobset(rjob("username.llama65b", 1)))  # spec: jobset 6.N.5
    assert (
        dotted == f'spec.replicatedJobs[0].name: Invalid value: "test-jobset-username.llama65b-0": {DNS1035}'
    )
    group = errs(jobset(rjob("a", 1, group="a" * 64)))  # spec: jobset 6.N.6
    assert ".spec.replicatedJob[].groupName is too long, must be less than 63 characters" in group
    long_js = errs(jobset(rjob("rj", 101), name="a" * 62))  # spec: jobset 6.N.7
    assert "JobSet name is too long, job names generated for this JobSet will exceed 63 characters" in long_js
    pods = errs(
        jobset(rjob("rj", 1, completion_mode="Indexed", completions=1), name="a" * 56)
    )  # spec: jobset 6.N.8
    assert pods == (
        f'spec.replicatedJobs[0].name: Invalid value: "{"a" * 56}-rj-0": '
        "JobSet name is too long, pod names generated for this JobSet will exceed 63 characters"
    )


def test_managed_by() -> None:
    bad = errs(jobset(managedBy="notDomainPrefixedPathControllerName"))  # spec: jobset 6.N.9
    assert bad == (
        'spec.managedBy: Invalid value: "notDomainPrefixedPathControllerName": '
        'must be a domain-prefixed path (such as "acme.io/foo")'
    )
    assert (
        errs(jobset(managedBy="foo.bar/" + "a" * 63))
        == "spec.managedBy: Too long: may not be more than 63 bytes"
    )  # spec: jobset 6.N.10
    assert errs(jobset(managedBy="jobset.sigs.k8s.io/jobset-controller")) == ""  # spec: jobset 6.N.11
    assert errs(jobset()) == ""  # spec: jobset 6.N.12
    assert errs(jobset(managedBy="")) == "spec.managedBy: Required value"
    assert errs(jobset(managedBy="Foo.io/x y")) == "\n".join(
        [
            'spec.managedBy: Invalid value: "Foo.io": a lowercase RFC 1123 subdomain must consist of lower case '
            "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
            "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            'spec.managedBy: Invalid value: "x y": Invalid path (regex used for validation is '
            "'[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')",
        ]
    )


def fp(*rules: Object) -> Object:
    return jobset(rjob("rj", 1), failurePolicy={"rules": list(rules)})


def test_failure_policy_rules() -> None:
    assert (
        errs(fp({"name": "superAwesomeFailurePolicyRule", "action": "FailJobSet"})) == ""
    )  # spec: jobset 6.N.13
    reason = errs(
        fp({"name": "r", "action": "FailJobSet", "onJobFailureReasons": ["fakeReason"]})
    )  # spec: jobset 6.N.14
    assert (
        reason
        == "invalid job failure reason 'fakeReason' in failure policy is not a recognized job failure reason"
    )
    target = errs(
        fp({"name": "r", "action": "FailJobSet", "targetReplicatedJobs": ["fakeReplicatedJob"]})
    )  # spec: jobset 6.N.15
    assert (
        target
        == "invalid replicatedJob name 'fakeReplicatedJob' in failure policy does not appear in .spec.ReplicatedJobs"
    )
    empty = errs(fp({"name": "", "action": "FailJobSet"}))  # spec: jobset 6.N.16
    assert (
        "invalid failure policy rule name of length 0, the rule name must be at least 1 characters long and at most "
        "128 characters long" in empty
    )
    assert "invalid failure policy rule name of length 129" in errs(
        fp({"name": "a" * 129, "action": "FailJobSet"})
    )  # spec: jobset 6.N.17
    dup = errs(
        fp(
            {"name": "repeatedRuleName", "action": "FailJobSet"},
            {"name": "repeatedRuleName", "action": "FailJobSet"},
        )
    )  # spec: jobset 6.N.18
    assert (
        dup == "rule names are not unique, rules with indices [0 1] all have the same name 'repeatedRuleName'"
    )
    suffix = (
        "a failure policy rule name must start with an alphabetic character, optionally followed by a string of "
        "alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'"
    )
    assert (
        errs(fp({"name": "1ruleToRuleThemAll", "action": "FailJobSet"}))
        == f"invalid failure policy rule name '1ruleToRuleThemAll', {suffix}"
    )  # spec: jobset 6.N.19
    assert (
        errs(fp({"name": "ruleToRuleThemAll,", "action": "FailJobSet"}))
        == f"invalid failure policy rule name 'ruleToRuleThemAll,', {suffix}"
    )  # spec: jobset 6.N.20


def coord_js(coordinator: Object, completions: int | None = 2, replicas: int = 2) -> Object:
    return jobset(
        rjob("replicatedjob-a", replicas, completion_mode="Indexed", completions=completions),
        coordinator=coordinator,
    )


def test_coordinator() -> None:
    assert (
        errs(coord_js({"replicatedJob": "fake-rjob"})) == "coordinator replicatedJob fake-rjob does not exist"
    )  # spec: jobset 6.N.21
    assert errs(coord_js({"replicatedJob": "replicatedjob-a"}, completions=None)) == (  # spec: jobset 6.N.22
        "job for coordinator pod must be indexed completion mode, and completions number must be set"
    )
    assert errs(coord_js({"replicatedJob": "replicatedjob-a", "jobIndex": 2})) == (  # spec: jobset 6.N.23
        "coordinator job index 2 is invalid for replicatedJob replicatedjob-a"
    )
    assert errs(coord_js({"replicatedJob": "replicatedjob-a", "podIndex": 2})) == (  # spec: jobset 6.N.24
        "coordinator pod index 2 is invalid for replicatedJob replicatedjob-a job index 0"
    )
    assert errs(coord_js({"replicatedJob": "replicatedjob-a", "jobIndex": 1, "podIndex": 1})) == ""


def dep(name: str, *on: str) -> Object:
    return rjob(name, 1, depends_on=[{"name": d, "status": "Ready"} for d in on])


def test_depends_on() -> None:
    assert (
        errs(jobset(rjob("job-1"), dep("job-2", "job-1"), dep("job-3", "job-1"))) == ""
    )  # spec: jobset 6.N.25
    assert (
        errs(jobset(rjob("job-1"), dep("job-2", "job-1"), dep("job-3", "job-2"))) == ""
    )  # spec: jobset 6.N.26
    assert (
        errs(jobset(rjob("job-1"), rjob("job-2"), dep("job-3", "job-1", "job-2"))) == ""
    )  # spec: jobset 6.N.27
    forward = errs(jobset(rjob("job-1"), dep("job-2", "job-3"), rjob("job-3")))  # spec: jobset 6.N.28
    assert forward == "replicatedJob: job-2 cannot depend on replicatedJob: job-3"
    two = errs(jobset(rjob("job-1"), dep("job-2", "job-1", "job-3"), rjob("job-3")))  # spec: jobset 6.N.29
    assert two == "replicatedJob: job-2 cannot depend on replicatedJob: job-3"
    assert (
        errs(jobset(rjob("job-1"), dep("job-2", "invalid")))
        == "replicatedJob: job-2 cannot depend on replicatedJob: invalid"
    )  # spec: jobset 6.N.30
    assert errs(jobset()) == ""  # spec: jobset 6.N.31
    assert errs(jobset(dep("job-1", "job-0"))) == "\n".join(  # spec: jobset 6.N.32
        [
            "DependsOn can't be set for the first ReplicatedJob",
            "replicatedJob: job-1 cannot depend on replicatedJob: job-0",
        ]
    )
    assert errs(jobset(dep("job-1", "job-1"))).startswith(
        "DependsOn can't be set"
    )  # self-reference passes the seen-set check
    assert errs(jobset(rjob("job-0"), dep("job-1", "job-1"))) == ""


async def test_validating_handler_denies_with_joined_message() -> None:
    handler = validating_handler(JobSetValidator())
    js = jobset(rjob("a", 1), successPolicy={"operator": "All", "targetReplicatedJobs": ["x", "y"]})
    response = await handler(AdmissionRequest(uid="u", kind={}, resource={}, operation="CREATE", object=js))
    assert not response.allowed and response.code == 403
    assert response.message == (
        "invalid replicatedJob name 'x' does not appear in .spec.ReplicatedJobs\n"
        "invalid replicatedJob name 'y' does not appear in .spec.ReplicatedJobs"
    )
    delete = await handler(AdmissionRequest(uid="u", kind={}, resource={}, operation="DELETE", old_object=js))
    assert delete.allowed


# -- 6.O -----------------------------------------------------------------------------------------


def upd(old: Object, new: Object) -> list[str]:
    return validate_update(old, new)


def with_suspend(js: Object, value: bool | None) -> Object:
    out = copy.deepcopy(js)
    if value is None:
        out["spec"].pop("suspend", None)
    else:
        out["spec"]["suspend"] = value
    return out


def pod_tpl(js: Object) -> Object:
    result: Object = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    return result


BASE = defaulted(jobset(rjob("rj", 2)))
IMMUTABLE = "spec.replicatedJobs: Invalid value: "


def test_update_rules() -> None:
    assert upd(with_suspend(BASE, True), with_suspend(BASE, None)) == []  # spec: jobset 6.O.1
    labelled = copy.deepcopy(BASE)
    labelled["metadata"]["labels"] = {"x": "y"}
    assert upd(BASE, labelled) == []  # spec: jobset 6.O.2
    old_mb, new_mb = copy.deepcopy(BASE), copy.deepcopy(BASE)
    old_mb["spec"]["managedBy"], new_mb["spec"]["managedBy"] = "example.com/old", "example.com/new"
    assert upd(old_mb, new_mb) == [
        'spec.managedBy: Invalid value: "example.com/new": field is immutable'
    ]  # spec: jobset 6.O.3

    def annotated(js: Object) -> Object:
        out = copy.deepcopy(js)
        pod_tpl(out).setdefault("metadata", {})["annotations"] = {"kueue": "yes"}
        return out

    assert upd(with_suspend(BASE, True), annotated(with_suspend(BASE, False))) == []  # spec: jobset 6.O.4
    assert upd(with_suspend(BASE, False), annotated(with_suspend(BASE, True))) == []  # spec: jobset 6.O.5
    (err,) = upd(with_suspend(BASE, False), annotated(with_suspend(BASE, False)))  # spec: jobset 6.O.6
    assert err.startswith(IMMUTABLE) and err.endswith(": field is immutable")

    def gated(js: Object) -> Object:
        out = copy.deepcopy(js)
        pod_tpl(out)["spec"]["schedulingGates"] = [{"name": "example.com/gate"}]
        return out

    assert upd(with_suspend(BASE, True), gated(with_suspend(BASE, True))) == []  # spec: jobset 6.O.7
    (err,) = upd(with_suspend(BASE, False), gated(with_suspend(BASE, False)))  # spec: jobset 6.O.8
    assert err.startswith(IMMUTABLE)
    renamed = with_suspend(BASE, True)
    renamed["spec"]["replicatedJobs"][0]["name"] = "other"
    (err,) = upd(with_suspend(BASE, True), renamed)  # spec: jobset 6.O.9
    assert err.startswith(IMMUTABLE)


def test_update_edge_cases() -> None:
    grown = with_suspend(BASE, True)
    grown["spec"]["replicatedJobs"].append(
        copy.deepcopy(grown["spec"]["replicatedJobs"][0]) | {"name": "extra"}
    )
    (err,) = upd(with_suspend(BASE, True), grown)  # Go panics here; we answer "immutable"
    assert err.startswith(IMMUTABLE)
    nil_to_value = copy.deepcopy(BASE)
    nil_to_value["spec"]["managedBy"] = "new-manager"
    assert upd(BASE, nil_to_value) == ['spec.managedBy: Invalid value: "new-manager": field is immutable']
    both = copy.deepcopy(nil_to_value)
    both["spec"]["replicatedJobs"][0]["replicas"] = 3
    errors = upd(BASE, both)
    assert len(errors) == 2
    empty_vs_absent = copy.deepcopy(BASE)
    pod_tpl(empty_vs_absent)["spec"]["nodeSelector"] = {}
    assert upd(BASE, empty_vs_absent) == []


def test_update_with_a_deeply_nested_value_is_linear() -> None:
    """Found by the admission fuzzer: an UPDATE whose old JobSet held a 500-level
    nested value under a replicated job kept the webhook busy for minutes (the semantic
    comparison normalised every value twice per level: 2^depth calls), blocking the server."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))  # as the webhook server runs (manager/webhook/server.py)
    try:
        check_nested_update_time()
    finally:
        sys.setrecursionlimit(limit)


def check_nested_update_time() -> None:
    for depth in (24, 500):  # 24 levels: 16 million calls before the fix, seconds; 500: forever
        nest: Any = "leaf"
        for _ in range(depth):
            nest = {"a": nest}
        old = copy.deepcopy(BASE)
        old["spec"]["replicatedJobs"][0]["a"] = nest
        started = time.monotonic()
        (err,) = upd(old, BASE)
        assert err.startswith(IMMUTABLE) and err.endswith(": field is immutable")
        assert upd(old, copy.deepcopy(old)) == []
        assert time.monotonic() - started < 2.0, depth


async def test_update_denial_aggregates() -> None:
    handler = validating_handler(JobSetValidator())
    new = copy.deepcopy(BASE)
    new["spec"]["managedBy"] = "a.io/b"
    new["spec"]["replicatedJobs"][0]["replicas"] = 3
    response = await handler(
        AdmissionRequest(uid="u", kind={}, resource={}, operation="UPDATE", object=new, old_object=BASE)
    )
    assert not response.allowed
    assert response.message.startswith("[spec.replicatedJobs: Invalid value: ")
    assert response.message.endswith(', spec.managedBy: Invalid value: "a.io/b": field is immutable]')


def test_defaulting_tolerates_null_template_parts() -> None:
    js = jobset({"name": "rj", "template": {"spec": None}})
    out = defaulted(js)
    assert out["spec"]["replicatedJobs"][0]["template"]["spec"] == {
        "completionMode": "Indexed",
        "template": {"spec": {"restartPolicy": "OnFailure"}},
    }


def test_immutable_replicated_jobs_value_is_written_as_go_marshals_the_typed_slice() -> None:
    # field.Invalid embeds json.Marshal of []ReplicatedJob: struct field order (name, template,
    # replicas), Go's zero fields (metadata: {}, resources: {}), map keys sorted, quantities canonical.
    old = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "default"},
        "spec": {
            "replicatedJobs": [
                {
                    "replicas": 1,
                    "name": "a",
                    "template": {
                        "spec": {
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [
                                        {
                                            "image": "busybox",
                                            "name": "c",
                                            "resources": {"limits": {"memory": "1024Mi", "cpu": "1000m"}},
                                        }
                                    ],
                                }
                            }
                        }
                    },
                }
            ]
        },
    }
    new = copy.deepcopy(old)
    new["spec"]["replicatedJobs"][0]["replicas"] = 2
    assert validate_update(old, new) == [
        'spec.replicatedJobs: Invalid value: [{"name":"a","template":{"metadata":{},"spec":{"template":'
        '{"metadata":{},"spec":{"containers":[{"name":"c","image":"busybox","resources":{"limits":'
        '{"cpu":"1","memory":"1Gi"}}}],"restartPolicy":"Never"}}}},"replicas":2}]: field is immutable'
    ]


def test_the_immutability_error_prints_the_replicated_jobs_as_compared() -> None:
    """Go prints the munged copy it compared: a suspended JobSet whose Kueue fields change
    together with an immutable one shows the old node selector, not the one sent."""
    old = with_suspend(BASE, True)
    new = with_suspend(BASE, True)
    pod_tpl(new)["spec"]["nodeSelector"] = {"pool": "a"}
    new["spec"]["replicatedJobs"][0]["replicas"] = 3
    (err,) = upd(old, new)
    assert err.startswith(IMMUTABLE) and err.endswith(": field is immutable"), err
    assert '"replicas":3' in err and "pool" not in err, err
