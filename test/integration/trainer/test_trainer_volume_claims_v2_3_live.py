"""A torchtune TrainJob's JobSet applied again at level v2.3 (docs/behaviour/trainer.md §12.16,
docs/divergences.md T-16), on a kube-apiserver with the v2.3 CRDs and our JobSet v0.12.0
webhooks: what ``v2.3/shipped-torchtune-cache`` found in some conformance runs, made
deterministic.

JobSet v0.12.0's defaulting webhook (CREATE only) adds ``retentionPolicy: {whenDeleted: Delete}``
to each volume claim policy; the list is atomic and the CRD makes it immutable. Trainer v2.3.0's
apply document has no retention policy, so every apply after the create is refused. Two passes
apply the JobSet again:

* a pass that reads the cache before the JobSet informer has delivered the JobSet the previous
  pass created (the race of the conformance runs): here the TrainJob reconciler runs in this
  process with a client whose reads do not have the JobSet yet, as a lagging cache answers;
* the resume of a suspended TrainJob (deterministic upstream: the JobSet never resumes).

Ours sends the stored policies (``RuntimeBuild.volume_claim_policies``): neither pass fails, no
``TrainJobResourcesCreationFailed`` event. Without that step both tests fail with the event.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cache_lag import LaggingReads, Passes
from module_env import V2_3_CRDS, module_control_plane

from manager import Manager, Options
from manager.cache.cache import CacheOptions
from manager.client import Client
from manager.client.errors import ApiError, NotFound
from manager.client.patch import Patch
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.envtest.certs import TinyCA
from manager.testing import eventually
from manager.webhook import WebhookServer
from trainer.components import component
from trainer.conformance.webhook_probes import configurations, wait_webhooks_effective
from trainer.controllers import podcache
from trainer.controllers.trainjob import RECORDER_NAME, TrainJobReconciler
from trainer.jobset.levels.v0_12 import V0_12
from trainer.runtime.context import SetupContext
from trainer.runtime.levels.v2_3 import V2_3
from trainer.runtime.objects import JOBSET_GVK, TRAINJOB_GVK
from trainer.runtime.registry import new_runtimes

ROOT = Path(__file__).resolve().parents[3]
JOBSET_WEBHOOKS = ROOT / "config" / "webhook" / "jobset.yaml"
QWEN = ROOT / "config" / "overlays" / "v2.3" / "runtimes" / "torchtune-qwen2.5-1.5b.yaml"
IMMUTABLE = "spec.volumeClaimPolicies: Invalid value: Value is immutable"
Json = dict[str, Any]


@pytest.fixture(scope="module")
def env_v2_3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    with module_control_plane(tmp_path_factory, "volume-claims-v2.3", V2_3_CRDS) as env:
        yield env


def scoped_jobset_webhooks(namespace: str, target: Path) -> Path:
    """Our JobSet webhook configurations (CREATE-only defaulting, as JobSet v0.12.0's), renamed
    for this test and limited to its namespace."""
    docs = list(yaml.safe_load_all(JOBSET_WEBHOOKS.read_text()))
    for doc in docs:
        doc["metadata"]["name"] = f"{doc['metadata']['name']}-{namespace}"
        for hook in doc["webhooks"]:
            hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    target.write_text(yaml.safe_dump_all(docs))
    return target


@pytest.fixture
async def live(env_v2_3: Environment, tmp_path: Path) -> AsyncIterator[Passes]:
    """JobSet v0.12.0's component with its webhooks in this process, and a v2.3 TrainJob
    reconciler whose reads, its runtime's included, go through ``LaggingReads`` (JobSets)."""
    config = await load_kubeconfig(env_v2_3.kubeconfig)
    namespace = f"vcp-{uuid.uuid4().hex[:8]}"
    namespace_obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    ca = TinyCA("volume-claims-webhook-ca")
    ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        tmp_path / "tls.crt", tmp_path / "tls.key"
    )
    server = WebhookServer(host="127.0.0.1", port=0, cert_dir=tmp_path)
    options = CacheOptions(default_namespaces=[namespace])
    async with Cluster(
        config, field_owner="trainer", cache_options=options, event_source="trainer-controller-manager"
    ) as cluster:
        api = Client(cluster.transport, cluster.mapper, field_owner="test")
        await api.create(namespace_obj)
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
            manifest = scoped_jobset_webhooks(namespace, tmp_path / "webhooks.yaml")
            names = await env_v2_3.install_webhooks(
                [manifest], host="127.0.0.1", port=server.bound_port or 0, ca_bundle=ca.cert_pem
            )
            await wait_webhooks_effective(env_v2_3, configurations([manifest]), namespace)
            client = LaggingReads(
                Client(cluster.transport, cluster.mapper, field_owner="trainer"), JOBSET_GVK
            )
            runtimes = await new_runtimes(client, None, level=V2_3, writer=client)
            recorder = V2_3.trainjob_event_recorder(cluster, RECORDER_NAME)
            reconciler = TrainJobReconciler(client, runtimes, recorder, level=V2_3)
            yield Passes(api, namespace, client, reconciler, cluster)
        finally:
            for name in names:
                plural = (
                    "mutatingwebhookconfigurations"
                    if name.startswith("jobset-mutating")
                    else "validatingwebhookconfigurations"
                )
                await env_v2_3.request("DELETE", f"/apis/admissionregistration.k8s.io/v1/{plural}/{name}")
            mgr.stop()
            await asyncio.gather(task, return_exceptions=True)
            with contextlib.suppress(NotFound):
                await api.delete(namespace_obj)


def qwen_runtime(namespace: str) -> Json:
    """Trainer v2.3.0's shipped ``torchtune-qwen2.5-1.5b``, as a TrainingRuntime of the namespace."""
    runtime: Json = yaml.safe_load(QWEN.read_text())
    runtime["kind"] = "TrainingRuntime"
    runtime["metadata"] = {"name": "qwen", "namespace": namespace}
    return runtime


def tune_job(namespace: str, name: str, **spec: Any) -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runtimeRef": {"name": "qwen", "kind": "TrainingRuntime"},
            "trainer": {"numNodes": 1, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "1"}}},
            **spec,
        },
    }


async def jobset(live: Passes, name: str) -> Json:
    found: Json = await live.api.get(JOBSET_GVK, name, live.namespace)
    return found


async def test_a_pass_before_the_cache_has_the_new_jobset_applies_it_again_without_a_failure(
    live: Passes,
) -> None:
    await live.api.create(qwen_runtime(live.namespace))
    await live.api.create(tune_job(live.namespace, "tune"))
    live.reads.lagging = True  # the JobSet informer is behind for both passes

    await live.reconcile("tune")  # creates the snapshot and the JobSet (defaulted by the webhook)
    created = await jobset(live, "tune")
    (policy,) = created["spec"]["volumeClaimPolicies"]
    assert policy["retentionPolicy"] == {"whenDeleted": "Delete"}
    assert policy["templates"][0]["status"] == {}

    # the cause, at the API server: the document upstream applies (no retention policy) is
    # refused once the JobSet exists
    upstream = {
        "apiVersion": created["apiVersion"],
        "kind": "JobSet",
        "metadata": {"name": "tune", "namespace": live.namespace},
        "spec": {"volumeClaimPolicies": [{"templates": policy["templates"]}]},
    }
    with pytest.raises(ApiError) as refused:
        await live.api.apply(upstream, field_owner="trainer", force=True, dry_run=True)
    assert refused.value.status_code == 422 and IMMUTABLE in refused.value.message

    # the next pass still misses the JobSet in the cache, builds it and applies it again
    await live.reconcile("tune")  # raises ReconcileError when the apply is refused
    assert await live.warnings("tune") == []
    again = await jobset(live, "tune")
    assert again["metadata"]["generation"] == 1
    assert again["spec"]["volumeClaimPolicies"] == created["spec"]["volumeClaimPolicies"]


async def test_a_suspended_torchtune_trainjob_resumes(live: Passes) -> None:
    await live.api.create(qwen_runtime(live.namespace))
    await live.api.create(tune_job(live.namespace, "held", suspend=True))

    await live.reconcile("held")
    assert (await jobset(live, "held"))["spec"]["suspend"] is True
    await live.reconcile("held")  # a suspended TrainJob's JobSet is built on every pass

    tj = await live.api.get(TRAINJOB_GVK, "held", live.namespace)
    await live.api.patch(tj, Patch.merge({"spec": {"suspend": False}}))
    await live.reconcile("held")
    resumed = await jobset(live, "held")
    assert resumed["spec"]["suspend"] is False
    assert resumed["spec"]["volumeClaimPolicies"][0]["retentionPolicy"] == {"whenDeleted": "Delete"}
    assert await live.warnings("held") == []
