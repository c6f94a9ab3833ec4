"""JobSet v0.12.0's webhooks (level v2.3, docs/behaviour/jobset-v0.12.md §2) next to v0.10.1's.

Each step is shown through the handler a user's request reaches: the answer's code, message and
patch. The v0.10.1 side of each pair shows level v2.1 unchanged.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from jsfixtures import JS_NAME, NS, jobset, rjob
from test_jobset_placement import TOPOLOGY, Client, node, pod

from manager.client.errors import InternalError
from manager.webhook import Handler, jsonpatch
from manager.webhook.admission import AdmissionRequest, AdmissionResponse, encode_review
from trainer.api import jobset_constants as c
from trainer.jobset.levels import v0_10_admission, v0_12_admission
from trainer.jobset.levels.admission import AdmissionSteps
from webhooks import jobset as jobset_webhooks
from webhooks import pod as pod_webhooks

Object = dict[str, Any]
V0_10: AdmissionSteps = v0_10_admission.STEPS
V0_12: AdmissionSteps = v0_12_admission.STEPS
PVC_GVK = v0_12_admission.PVC
INVALID = f'JobSet.jobset.x-k8s.io "{JS_NAME}" is invalid: '
NO_MOUNT = "replicatedJob containers don't have a matching volumeMount: {} from VolumeClaimPolicies"


def request(obj: Object, operation: str = "CREATE", old: Object | None = None) -> AdmissionRequest:
    return AdmissionRequest(uid="u", kind={}, resource={}, operation=operation, object=obj, old_object=old)


async def create(steps: AdmissionSteps, js: Object, reader: Any = None) -> AdmissionResponse:
    return await jobset_webhooks.validation_handler(steps, reader or Client())(request(js))


async def update(steps: AdmissionSteps, old: Object, new: Object) -> AdmissionResponse:
    return await jobset_webhooks.validation_handler(steps, Client())(request(new, "UPDATE", old))


async def mutate(handler: Handler, obj: Object) -> Object:
    """The object as the API server stores it after the defaulter's patch."""
    answer = await handler(request(obj))
    assert answer.allowed, answer.message
    stored = jsonpatch.apply(copy.deepcopy(obj), answer.patches)
    assert isinstance(stored, dict)
    return stored


def mounting(name: str, *mounts: str, volumes: tuple[str, ...] = ()) -> Object:
    job = rjob(name)
    pod_spec = job["template"]["spec"]["template"]["spec"]
    pod_spec["containers"][0]["volumeMounts"] = [{"name": m, "mountPath": f"/{m}"} for m in mounts]
    if volumes:
        pod_spec["volumes"] = [{"name": v, "emptyDir": {}} for v in volumes]
    return job


def claim(name: str, storage: str = "1Gi") -> Object:
    return {
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}},
    }


# -- the answer to a refused JobSet ---------------------------------------------------------------


async def test_refused_create_is_422_invalid_with_plain_errors_as_internal() -> None:
    js = jobset(rjob("a"), successPolicy={"operator": "All", "targetReplicatedJobs": ["nope"]})
    js["spec"]["replicatedJobs"][0]["dependsOn"] = []

    old = await create(V0_10, js)
    assert (old.code, old.reason) == (403, "Forbidden")
    assert old.message == (
        "DependsOn can't be set for the first ReplicatedJob\n"
        "invalid replicatedJob name 'nope' does not appear in .spec.ReplicatedJobs"
    )

    new = await create(V0_12, js)
    assert (new.allowed, new.code, new.reason) == (False, 422, "Invalid")
    assert new.message == INVALID + (
        "[<nil>: Internal error: DependsOn can't be set for the first ReplicatedJob, "
        "<nil>: Internal error: invalid replicatedJob name 'nope' does not appear in .spec.ReplicatedJobs]"
    )
    status = json.loads(encode_review("admission.k8s.io/v1", "u", new))["response"]["status"]
    assert status == {
        "code": 422,
        "message": new.message,
        "reason": "Invalid",
        "status": "Failure",
        "details": {
            "name": JS_NAME,
            "group": "jobset.x-k8s.io",
            "kind": "JobSet",
            "causes": [
                {
                    "reason": "InternalError",
                    "message": "Internal error: DependsOn can't be set for the first ReplicatedJob",
                    "field": "<nil>",
                },
                {
                    "reason": "InternalError",
                    "message": "Internal error: invalid replicatedJob name 'nope' does not appear in "
                    ".spec.ReplicatedJobs",
                    "field": "<nil>",
                },
            ],
        },
    }


async def test_field_errors_keep_their_field_one_error_bare() -> None:
    js = jobset(rjob("a"), network={"subdomain": "Not.A_Subdomain"})
    answer = await create(V0_12, js)
    assert answer.code == 422
    assert answer.message.startswith(INVALID + '[spec.network.subdomain: Invalid value: "Not.A_Subdomain": ')
    one = await create(V0_12, jobset(rjob("a"), managedBy="foo.bar/" + "a" * 63))
    assert one.message == INVALID + "spec.managedBy: Too long: may not be more than 63 bytes"
    assert one.causes == [] and one.details is not None
    assert one.details["causes"] == [
        {
            "reason": "FieldValueTooLong",
            "message": "Too long: may not be more than 63 bytes",
            "field": "spec.managedBy",
        }
    ]


async def test_refused_update_is_422_invalid() -> None:
    old = jobset(rjob("a"), managedBy="example.com/old")
    new = jobset(rjob("a"), managedBy="example.com/new")
    v10 = await update(V0_10, old, new)
    assert (v10.code, v10.message) == (
        403,
        'spec.managedBy: Invalid value: "example.com/new": field is immutable',
    )
    v12 = await update(V0_12, old, new)
    assert (v12.code, v12.reason) == (422, "Invalid")
    assert v12.message == INVALID + 'spec.managedBy: Invalid value: "example.com/new": field is immutable'


async def test_valid_jobset_is_allowed_at_both() -> None:
    for steps in (V0_10, V0_12):
        assert (await create(steps, jobset(rjob("a")))).allowed


# -- gate-off refusals and the coordinator label value --------------------------------------------


async def test_in_place_restart_refused_first() -> None:
    js = jobset(rjob("a"), failurePolicy={"restartStrategy": "InPlaceRestart"})
    js["spec"]["replicatedJobs"][0]["dependsOn"] = []
    answer = await create(V0_12, js)
    assert answer.message == INVALID + (
        "[<nil>: Internal error: InPlaceRestart restart strategy cannot be set when InPlaceRestart feature "
        "gate is disabled, <nil>: Internal error: DependsOn can't be set for the first ReplicatedJob]"
    )
    assert "InPlaceRestart" not in (await create(V0_10, js)).message


async def test_restart_job_action_refused_and_ends_the_rule_checks() -> None:
    rules = [{"name": "1bad", "action": "RestartJob"}, {"name": "ok", "action": "FailJobSet"}]
    js = jobset(rjob("a"), failurePolicy={"rules": rules})
    answer = await create(V0_12, js)
    assert answer.message == INVALID + (
        "<nil>: Internal error: RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not "
        "allowed when RestartJob feature gate is disabled"
    )
    # v0.10.1 knows no such gate: the rule's own checks run
    assert "invalid failure policy rule name '1bad'" in (await create(V0_10, js)).message


async def test_coordinator_endpoint_must_be_a_label_value() -> None:
    name, subdomain = "js", "s" * 60
    js = jobset(
        rjob("rjob", completions=1, completion_mode="Indexed"),
        name=name,
        network={"subdomain": subdomain},
        coordinator={"replicatedJob": "rjob", "jobIndex": 0, "podIndex": 0},
    )
    endpoint = f"{name}-rjob-0-0.{subdomain}"
    answer = await jobset_webhooks.validation_handler(V0_12, Client())(request(js))
    assert answer.message == (
        f'JobSet.jobset.x-k8s.io "{name}" is invalid: <nil>: Internal error: spec will lead to invalid label '
        f'value "{endpoint}" for coordinator label "jobset.sigs.k8s.io/coordinator" (long JobSet / '
        "ReplicatedJob / SubDomain name?): must be no more than 63 characters"
    )
    assert (await jobset_webhooks.validation_handler(V0_10, Client())(request(js))).allowed


# -- volumeClaimPolicies --------------------------------------------------------------------------


async def test_volume_claim_policies_defaulted_with_delete_retention() -> None:
    js = jobset(
        mounting("a", "cache"),
        volumeClaimPolicies=[
            {"templates": [claim("cache")]},
            {"templates": [], "retentionPolicy": {"whenDeleted": "Retain"}},
        ],
    )
    stored = await mutate(jobset_webhooks.mutating_handler(V0_12), js)
    policies = stored["spec"]["volumeClaimPolicies"]
    assert policies[0]["retentionPolicy"] == {"whenDeleted": "Delete"}
    assert policies[1]["retentionPolicy"] == {"whenDeleted": "Retain"}
    # the jobset v0.12.0 struct's round trip: a PVC template has metadata, spec.resources and status
    assert policies[0]["templates"][0]["status"] == {}
    # v0.10.1's struct has no such field: left as sent
    assert (
        "retentionPolicy"
        not in (await mutate(jobset_webhooks.mutating_handler(V0_10), js))["spec"]["volumeClaimPolicies"][0]
    )


async def test_claim_without_a_mount_is_refused() -> None:
    js = jobset(rjob("a"), volumeClaimPolicies=[{"templates": [claim("cache")]}])
    answer = await create(V0_12, js)
    assert answer.code == 422
    assert answer.message.startswith(INVALID + 'spec.replicatedJobs: Invalid value: [{"name":"a",')
    assert answer.message.endswith(": " + NO_MOUNT.format("cache"))
    assert (await create(V0_10, js)).allowed


async def test_claim_mounted_by_an_init_container_of_any_rjob_is_enough() -> None:
    second = rjob("b")
    second["template"]["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "init", "image": "i", "volumeMounts": [{"name": "cache", "mountPath": "/c"}]}
    ]
    js = jobset(rjob("a"), second, volumeClaimPolicies=[{"templates": [claim("cache")]}])
    assert (await create(V0_12, js)).allowed


async def test_claim_names_unique_dns_short_and_no_clashing_volume() -> None:
    js = jobset(
        mounting("a", "cache", "Bad_Name", volumes=("cache",)),
        volumeClaimPolicies=[
            {"templates": [claim("cache"), claim("Bad_Name")]},
            {"templates": [claim("cache")]},
        ],
    )
    answer = await create(V0_12, js)
    assert answer.details is not None
    assert [(c["field"], c["message"]) for c in answer.details["causes"]] == [
        (
            "spec.replicatedJobs[0].template.spec.template.spec.volumes[0].name",
            'Invalid value: "cache": volume name conflicts with VolumeClaimPolicy template name: cache',
        ),
        (
            "spec.volumeClaimPolicies[0].template[1].name",
            'Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
            "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
            "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
        (
            "spec.volumeClaimPolicies[1].template[0].name",
            'Invalid value: "cache": names must be unique for VolumeClaimPolicies template',
        ),
        (
            "spec.replicatedJobs[0].template.spec.template.spec.volumes[0].name",
            'Invalid value: "cache": volume name conflicts with VolumeClaimPolicy template name: cache',
        ),
    ]
    # the aggregate shows a repeated message once
    assert answer.message.count("volume name conflicts") == 1
    long_name = "c" * 60
    too_long = jobset(mounting("a", long_name), volumeClaimPolicies=[{"templates": [claim(long_name)]}])
    assert (await create(V0_12, too_long)).message == INVALID + (
        f'spec.volumeClaimPolicies[0].template[0].name: Invalid value: "{long_name}": '
        "VolumeClaimPolicies template name is too long"
    )


def existing_pvc(storage: str) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": f"cache-{JS_NAME}", "namespace": NS},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}},
    }


async def test_existing_pvc_must_match_and_be_retained() -> None:
    js = jobset(mounting("a", "cache"), volumeClaimPolicies=[{"templates": [claim("cache")]}])
    stored = await mutate(jobset_webhooks.mutating_handler(V0_12), js)  # retentionPolicy: Delete
    same = await create(V0_12, stored, Client(existing_pvc("1024Mi")))
    assert same.message == INVALID + (
        'spec.volumeClaimPolicies[0].retentionPolicy.whenDeleted: Invalid value: "Delete": '
        "retentionPolicy must be retain when PVC exists"
    )
    stored["spec"]["volumeClaimPolicies"][0]["retentionPolicy"] = {"whenDeleted": "Retain"}
    assert (await create(V0_12, stored, Client(existing_pvc("1Gi")))).allowed
    other = await create(V0_12, stored, Client(existing_pvc("2Gi")))
    assert other.message == INVALID + (
        'spec.volumeClaimPolicies[0].template[0].spec: Invalid value: {"accessModes":["ReadWriteOnce"],'
        '"resources":{"requests":{"storage":"1Gi"}}}: spec does not match existing PVC '
        f"cache-{JS_NAME} in namespace {NS}"
    )


async def test_pvc_read_error_is_an_internal_field_error() -> None:
    class Failing(Client):
        async def _get_object(self, gvk: Any, name: str, namespace: str) -> Any:
            if gvk == PVC_GVK:
                raise InternalError("etcd is down", code=500)
            return await super()._get_object(gvk, name, namespace)

    js = jobset(mounting("a", "cache"), volumeClaimPolicies=[{"templates": [claim("cache")]}])
    answer = await create(V0_12, js, Failing())
    assert answer.message == INVALID + (
        f"spec.volumeClaimPolicies[0].template[0]: Internal error: failed to check for existing PVC "
        f"cache-{JS_NAME}: etcd is down"
    )


# -- update: Kueue fields by name ----------------------------------------------------------------


async def test_suspended_update_with_an_added_rjob_compares_by_name() -> None:
    old = jobset(rjob("a"), suspend=True)
    new = jobset(rjob("a", pod_labels={"kueue": "x"}), rjob("b"), suspend=True)
    for steps, code in ((V0_10, 403), (V0_12, 422)):
        answer = await update(steps, old, new)
        assert answer.code == code
        assert "spec.replicatedJobs: Invalid value: " in answer.message
        assert answer.message.endswith("field is immutable")
    # same rjobs, new pod label while suspended: allowed at both
    same = jobset(rjob("a", pod_labels={"kueue": "x"}), suspend=True)
    for steps in (V0_10, V0_12):
        assert (await update(steps, old, same)).allowed


# -- defaulting: an untouched object gets no patch -------------------------------------------------


async def test_fully_defaulted_jobset_gets_no_patch_at_v0_12_only() -> None:
    js = jobset(rjob("a"))
    jobset_webhooks.default_jobset(js)  # every default present, not yet through Go's struct
    again = await jobset_webhooks.mutating_handler(V0_12)(request(js))
    assert again.allowed and again.patches == []
    round_trip = await jobset_webhooks.mutating_handler(V0_10)(request(js))
    # v0.10.1's controller-runtime patches the typed round trip anyway
    assert {"op": "add", "path": "/status", "value": {"restarts": 0}} in round_trip.patches


# -- the pod webhook -------------------------------------------------------------------------------


def jobset_pod(priority: int | None = 0, annotations: dict[str, str] | None = None) -> Object:
    out = pod("js-rjob-0-1-abc", "1")
    out["metadata"]["annotations"] = {c.JobSetNameKey: "js", **(annotations or {})}
    if priority is not None:
        out["spec"]["priority"] = priority
    return out


async def test_every_jobset_pod_gets_the_priority_label_at_v0_12() -> None:
    stored = await mutate(pod_webhooks.mutating_handler(Client(), V0_12), jobset_pod())
    assert stored["metadata"]["labels"][c.PriorityKey] == "0"
    v10 = await pod_webhooks.mutating_handler(Client(), V0_10)(request(jobset_pod()))
    v10_stored = jsonpatch.apply(jobset_pod(), v10.patches)
    assert isinstance(v10_stored, dict) and c.PriorityKey not in v10_stored["metadata"]["labels"]


async def test_no_priority_label_without_priority_or_with_node_selector_strategy() -> None:
    for obj in (jobset_pod(priority=None), jobset_pod(annotations={c.NodeSelectorStrategyKey: "true"})):
        answer = await pod_webhooks.mutating_handler(Client(), V0_12)(request(obj))
        assert answer.allowed and answer.patches == []


async def test_pod_without_jobset_annotation_gets_no_patch_at_v0_12() -> None:
    plain: Object = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }
    answer = await pod_webhooks.mutating_handler(Client(), V0_12)(request(plain))
    assert answer.allowed and answer.patches == []
    v10 = await pod_webhooks.mutating_handler(Client(), V0_10)(request(plain))
    assert {p["path"] for p in v10.patches} >= {"/status", "/spec/containers/0/resources"}


async def test_labelled_pod_patch_carries_the_typed_round_trip() -> None:
    answer = await pod_webhooks.mutating_handler(Client(), V0_12)(request(jobset_pod()))
    paths = {p["path"] for p in answer.patches}
    assert f"/metadata/labels/{c.PriorityKey.replace('/', '~1')}" in paths and "/status" in paths


async def test_leader_on_a_gone_node_refuses_the_follower_at_v0_12() -> None:
    leader = pod("js-rjob-0-0-xyz", "0", node="gone")
    follower = pod("js-rjob-0-1-abc", "1")
    v10 = await mutate(pod_webhooks.mutating_handler(Client(leader), V0_10), follower)
    assert v10["spec"]["nodeSelector"] == {TOPOLOGY: ""}
    answer = await pod_webhooks.mutating_handler(Client(leader), V0_12)(request(follower))
    assert (answer.allowed, answer.code, answer.reason) == (False, 404, "NotFound")
    assert answer.message == 'nodes "gone" not found'  # the reader's NotFound, as Go passes its Status on
    pinned = await mutate(
        pod_webhooks.mutating_handler(Client(leader, node("gone", {TOPOLOGY: "pool-a"})), V0_12), follower
    )
    assert pinned["spec"]["nodeSelector"] == {TOPOLOGY: "pool-a"}


@pytest.mark.parametrize("steps", [V0_10, V0_12], ids=["v0.10.1", "v0.12.0"])
async def test_follower_validation_is_the_same_at_both(steps: AdmissionSteps) -> None:
    follower = pod("js-rjob-0-1-abc", "1")
    answer = await pod_webhooks.validation_handler(Client(), steps)(request(follower))
    assert (answer.code, answer.message) == (403, "follower pod node selector not set")
