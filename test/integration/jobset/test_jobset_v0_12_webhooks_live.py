"""The JobSet and Pod webhooks of level v2.3 (JobSet v0.12.0) behind a real kube-apiserver
(docs/behaviour/jobset-v0.12.md §2): what a user sees -- the 422 answer with its text, the
defaulted volume claim policy and the priority label in the stored objects.

The module's own control plane has JobSet v0.12.0's CRD (``config/overlays/v2.3/crd``); the
JobSet component runs at ``V0_12`` in this process with its webhooks registered through
``install_webhooks`` and waited for until the API server calls them.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from jsharness import scoped_webhook_manifest
from module_env import V2_3_JOBSET_CRD, module_control_plane

from manager import Manager, Options
from manager.cache.cache import CacheOptions
from manager.client.errors import ApiError, Conflict, NotFound
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.envtest.certs import TinyCA
from manager.scheme import GroupVersionKind
from manager.testing import eventually
from manager.webhook import WebhookServer
from trainer import features
from trainer.api import jobset_constants as c
from trainer.components import component
from trainer.conformance.webhook_probes import configurations, wait_webhooks_effective
from trainer.controllers import podcache
from trainer.jobset.levels.v0_12 import V0_12
from trainer.runtime.context import SetupContext

POD_GVK = GroupVersionKind("", "v1", "Pod")
JOBSET_GVK = GroupVersionKind("jobset.x-k8s.io", "v1alpha2", "JobSet")
Object = dict[str, Any]
DENIED = 'admission webhook "vjobset.kb.io" denied the request: '


class Live:
    """The API as the test's user sees it, in the test's namespace."""

    def __init__(self, api: Any, namespace: str) -> None:
        self.api = api
        self.namespace = namespace


@pytest.fixture(scope="module")
def env_v0_12(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    """etcd + kube-apiserver with JobSet v0.12.0's CRD, for this module only."""
    with module_control_plane(tmp_path_factory, "jobset-v0.12-webhooks", [V2_3_JOBSET_CRD]) as env:
        yield env


@pytest.fixture
async def live(env_v0_12: Environment, tmp_path: Path) -> AsyncIterator[Live]:
    """The JobSet component at JobSet v0.12.0 with its four webhooks, in a namespace of its own."""
    config = await load_kubeconfig(env_v0_12.kubeconfig)
    namespace = f"jsw12-{uuid.uuid4().hex[:8]}"
    namespace_obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    ca = TinyCA("jobset-v0.12-webhook-ca")
    ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        tmp_path / "tls.crt", tmp_path / "tls.key"
    )
    server = WebhookServer(host="127.0.0.1", port=0, cert_dir=tmp_path)
    options = CacheOptions(default_namespaces=[namespace])
    async with Cluster(config, field_owner="jobset-test", cache_options=options) as cluster:
        await cluster.api_reader.create(namespace_obj)
        mgr = Manager(cluster, Options(metrics_bind_address="0"))
        assert await podcache.configure(mgr, None, ["jobset"]) == "Minimal/label-selected"
        assert await component("jobset").setup(SetupContext(mgr, server, jobset_level=V0_12)) is True
        mgr.add_webhook_server(server)
        task = asyncio.create_task(mgr.run())
        names: list[str] = []
        try:
            await eventually(lambda: mgr.elected.is_set(), timeout=30, message="the manager leads")
            await eventually(
                lambda: server.bound_port is not None, timeout=10, message="the webhook server listens"
            )
            manifest = scoped_webhook_manifest(namespace, tmp_path / "webhooks.yaml")
            names = await env_v0_12.install_webhooks(
                [manifest], host="127.0.0.1", port=server.bound_port or 0, ca_bundle=ca.cert_pem
            )
            await wait_webhooks_effective(env_v0_12, configurations([manifest]), namespace)
            yield Live(cluster.api_reader, namespace)
        finally:
            for name in names:
                plural = (
                    "mutatingwebhookconfigurations"
                    if name.startswith("jobset-mutating")
                    else "validatingwebhookconfigurations"
                )
                await env_v0_12.request("DELETE", f"/apis/admissionregistration.k8s.io/v1/{plural}/{name}")
            mgr.stop()
            await asyncio.gather(task, return_exceptions=True)
            with contextlib.suppress(NotFound):
                await cluster.api_reader.delete(namespace_obj)


def rjob(name: str, *mounts: str) -> Object:
    container: Object = {"name": "c", "image": "busybox"}
    if mounts:
        container["volumeMounts"] = [{"name": m, "mountPath": f"/{m}"} for m in mounts]
    return {"name": name, "template": {"spec": {"template": {"spec": {"containers": [container]}}}}}


def js(namespace: str, name: str, *rjobs: Object, **spec: Any) -> Object:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicatedJobs": list(rjobs), **spec},
    }


def claim(name: str) -> Object:
    return {
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


async def test_claim_without_a_mount_is_refused_with_422(live: Live) -> None:
    body = js(live.namespace, "no-mount", rjob("a"), volumeClaimPolicies=[{"templates": [claim("cache")]}])
    with pytest.raises(ApiError) as refused:
        await live.api.create(body)
    err = refused.value
    assert (err.status_code, err.reason) == (422, "Invalid")
    assert err.message.startswith(
        DENIED
        + 'JobSet.jobset.x-k8s.io "no-mount" is invalid: spec.replicatedJobs: Invalid value: [{"name":"a",'
    )
    assert err.message.endswith(
        ": replicatedJob containers don't have a matching volumeMount: cache from VolumeClaimPolicies"
    )
    assert err.status["details"]["causes"][0]["field"] == "spec.replicatedJobs"
    with pytest.raises(NotFound):
        await live.api.get(JOBSET_GVK, "no-mount", namespace=live.namespace)


async def test_plain_errors_are_internal_errors_of_no_field(live: Live) -> None:
    first = rjob("a")
    first["dependsOn"] = [{"name": "b", "status": "Complete"}]
    with pytest.raises(ApiError) as refused:
        await live.api.create(js(live.namespace, "bad-depends-on", first, rjob("b")))
    assert refused.value.status_code == 422
    assert refused.value.message == DENIED + (
        'JobSet.jobset.x-k8s.io "bad-depends-on" is invalid: [<nil>: Internal error: DependsOn can\'t be set '
        "for the first ReplicatedJob, <nil>: Internal error: replicatedJob: a cannot depend on replicatedJob: b]"
    )


async def test_volume_claim_policy_stored_with_delete_retention(live: Live) -> None:
    created = await live.api.create(
        js(
            live.namespace,
            "with-cache",
            rjob("a", "cache"),
            volumeClaimPolicies=[{"templates": [claim("cache")]}],
        )
    )
    stored = await live.api.get(JOBSET_GVK, "with-cache", namespace=live.namespace)
    assert created["spec"]["volumeClaimPolicies"] == stored["spec"]["volumeClaimPolicies"]
    policy = stored["spec"]["volumeClaimPolicies"][0]
    assert policy["retentionPolicy"] == {"whenDeleted": "Delete"}
    assert policy["templates"][0]["metadata"]["name"] == "cache"


def pod(namespace: str, name: str, *, annotated: bool) -> Object:
    annotations = {c.JobSetNameKey: "js"} if annotated else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {c.JobSetNameKey: "js"},  # what the webhooks' objectSelector asks for
            "annotations": annotations,
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


async def test_every_jobset_pod_is_labelled_with_its_priority(live: Live) -> None:
    created = await live.api.create(pod(live.namespace, "jobset-pod", annotated=True))
    stored = await live.api.get(POD_GVK, "jobset-pod", namespace=live.namespace)
    assert stored["spec"]["priority"] == 0  # the API server's Priority admission
    assert stored["metadata"]["labels"] == {c.JobSetNameKey: "js", c.PriorityKey: "0"}
    assert created["metadata"]["labels"] == stored["metadata"]["labels"]
    # no jobset-name annotation: not a JobSet pod to v0.12.0, no label
    other = await live.api.create(pod(live.namespace, "labelled-only", annotated=False))
    assert other["metadata"]["labels"] == {c.JobSetNameKey: "js"}


# -- the feature gates (jobset-v0.12.md §2.7): the webhook reads them on each request ---------------


def indexed(name: str, n: int, **job_spec: Any) -> Object:
    job = rjob(name)
    job["template"]["spec"].update(completionMode="Indexed", parallelism=n, completions=n, **job_spec)
    return job


async def refusal(live: Live, body: Object) -> ApiError:
    with pytest.raises(ApiError) as refused:
        await live.api.create(body)
    assert refused.value.status_code == 422
    return refused.value


async def test_in_place_restart_is_admitted_only_with_its_gate_and_rules(live: Live) -> None:
    policy = {"maxRestarts": 2, "restartStrategy": "InPlaceRestart"}
    good = js(live.namespace, "in-place", indexed("w", 2, backoffLimit=2147483647, podReplacementPolicy="Failed"),
              failurePolicy=policy)  # fmt: skip
    err = await refusal(live, good)
    assert err.message == DENIED + (
        'JobSet.jobset.x-k8s.io "in-place" is invalid: <nil>: Internal error: InPlaceRestart restart strategy '
        "cannot be set when InPlaceRestart feature gate is disabled"
    )
    with features.override("InPlaceRestart", True):
        await live.api.create(good)
        err = await refusal(live, js(live.namespace, "in-place-bad", indexed("w", 2), failurePolicy=policy))
    assert err.message == DENIED + (
        'JobSet.jobset.x-k8s.io "in-place-bad" is invalid: [spec.replicatedJobs[0].template.spec.backoffLimit: '
        "Invalid value: null: replicatedJob w: must be set to 2147483647 (MaxInt32) when in-place restart is "
        "enabled, spec.replicatedJobs[0].template.spec.podReplacementPolicy: Invalid value: null: replicatedJob "
        "w: must be set to Failed when in-place restart is enabled]"
    )
    assert [c["field"] for c in err.status["details"]["causes"]] == [
        "spec.replicatedJobs[0].template.spec.backoffLimit",
        "spec.replicatedJobs[0].template.spec.podReplacementPolicy",
    ]


async def test_restart_job_actions_are_admitted_only_with_their_gate(live: Live) -> None:
    policy = {"maxRestarts": 2, "rules": [{"name": "perJob", "action": "RestartJob"}]}
    body = js(live.namespace, "per-job", rjob("a"), failurePolicy=policy)
    err = await refusal(live, body)
    assert err.message.endswith(
        "RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not allowed when RestartJob "
        "feature gate is disabled"
    )
    with features.override("RestartJob", True):
        created = await live.api.create(body)
    assert created["spec"]["failurePolicy"]["rules"][0]["action"] == "RestartJob"


async def test_a_running_jobset_scales_only_with_the_elastic_gate(live: Live) -> None:
    await live.api.create(js(live.namespace, "elastic", indexed("w", 2)))

    async def scale(n: int) -> Object:
        """A user's read-modify-write, read again when the controller's status write came between."""
        while True:
            stored = await live.api.get(JOBSET_GVK, "elastic", namespace=live.namespace)
            spec = stored["spec"]["replicatedJobs"][0]["template"]["spec"]
            spec["parallelism"] = spec["completions"] = n
            try:
                result: Object = await live.api.update(stored)
            except Conflict:
                continue
            return result

    with pytest.raises(ApiError) as refused:
        await scale(4)
    assert refused.value.status_code == 422 and refused.value.message.endswith(": field is immutable")
    with features.override("ElasticJobSet", True):
        scaled = await scale(4)
        with pytest.raises(ApiError) as refused:
            await scale(0)
    assert scaled["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 4
    assert refused.value.message == DENIED + (
        'JobSet.jobset.x-k8s.io "elastic" is invalid: [spec.replicatedJobs[0].template.spec.parallelism: '
        "Invalid value: 0: parallelism must be >= 1, spec.replicatedJobs[0].template.spec.completions: "
        "Invalid value: 0: completions must be >= 1]"
    )
