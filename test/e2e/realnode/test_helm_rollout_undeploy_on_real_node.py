"""Helm, a rolling update and ``make undeploy`` of the project's image on a real node, at the
default API level (v2.3) as a new user gets it.

One local cluster with a real kubelet node (docs/realnode.md), the session's image build
(``test/image_build.py``) imported into its containerd, three tests in order:

* ``make helm-install`` of charts/kubeflow-trainer with the node's nodeSelector and toleration
  for the manager and the runtimes' hook (``HELM_ARGS=-f helm-values.yaml``): the Deployment
  rolls out on the real node and holds everything ``realnode_e2e.check_deployment`` checks (UID
  65532, a read-only root, the Secret the manager filled mounted by the kubelet, the probes,
  every webhook, the defaulter too, through the Service's ClusterIP, the metrics scraped there
  with a bearer token, ``kubeflow-trainer-public``); a TrainJob on ``torch-distributed`` completes
  on KWOK; then a plain ``helm uninstall`` while that TrainJob still names the runtime: the
  chart's pre-delete hook Job runs on the real node and deletes the release's runtimes while the
  manager still runs (as upstream v2.3.0's chart does), then Helm removes the rest; no runtime is
  left, the TrainJob stays with the kept CRDs.
* The rolling update: ``make deploy`` with two replicas, then ``kubectl set image`` to a second
  tag of the same image while a client keeps creating TrainJobs (through the defaulting and
  validating webhooks, ``failurePolicy: Fail``) and reading the Lease: time without a leader,
  webhook calls failed (0), every TrainJob converged (JobSet created, Complete).
* ``make undeploy`` while those TrainJobs still name ``torch-distributed``: it returns, the CRDs,
  the runtimes and the manager are gone, nothing leaks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from image_build import ImageBuild
from realnode_e2e import (
    CRDS,
    FINALIZER,
    HERE,
    NAME,
    NODE,
    NS,
    TAG,
    TRAINER,
    V2_3,
    check_deployment,
    conditions,
    exists,
    get,
    gone,
    helm,
    kubectl,
    make,
    manager_log_is_clean,
    manager_pods,
    namespace,
    node_cluster,
    runtime_finalizers,
    stamp,
    trainjob,
    trainjob_completes_on_kwok,
)

from manager.envtest import Environment, realnode
from manager.testing import eventually

pytestmark = pytest.mark.realnode

TAG2 = "localhost/trainer-controller-manager-py:realnode-e2e-2"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/trainer.kubeflow.org"
HOOK_PODS = f"/api/v1/namespaces/{NS}/pods?labelSelector=app.kubernetes.io%2Fcomponent%3Druntimes-installer"
Json = dict[str, Any]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, controller_image: ImageBuild) -> Iterator[Environment]:
    with node_cluster(tmp_path_factory.mktemp("helm-realnode") / "env") as environment:
        environment.import_image(controller_image.archive(TAG))
        assert environment.node is not None
        environment.node.ctr("images", "tag", TAG, TAG2)  # the second tag of the rolling update
        yield environment


async def test_helm_install_runs_the_manager_on_the_real_node_and_helm_uninstall_runs_the_hook(
    env: Environment,
) -> None:
    started = time.monotonic()
    await asyncio.to_thread(
        make, env, "helm-install", f"IMG={TAG}", f"HELM_ARGS=-f {HERE / 'helm-values.yaml'} --timeout 8m"
    )
    print(f"\nmake helm-install (rollout on the real node, runtimes): {time.monotonic() - started:.1f} s")

    pod, ns = await check_deployment(env, V2_3)
    took = await trainjob_completes_on_kwok(env, V2_3, ns)
    print(f"TrainJob created to Complete: {took:.1f} s")
    await manager_log_is_clean(env, pod)

    # A plain `helm uninstall` while the TrainJob names torch-distributed: the pre-delete hook
    # deletes the runtimes first, while the manager still runs; Helm then removes the rest.
    assert (FINALIZER in await runtime_finalizers(env)) is V2_3.runtime_finalizer
    seen: dict[str, Any] = {"hook pods": {}}

    async def watch() -> None:
        while True:
            for p in (await get(env, HOOK_PODS))["items"]:
                seen["hook pods"][p["metadata"]["name"]] = (
                    p["spec"].get("nodeName"),
                    p["status"].get("phase"),
                )
            if "runtime gone" not in seen and not await exists(
                env, f"{TRAINER}/clustertrainingruntimes/torch-distributed"
            ):
                seen["runtime gone"] = time.monotonic()
                seen["deployment then"] = await exists(
                    env, f"/apis/apps/v1/namespaces/{NS}/deployments/{NAME}"
                )
            await asyncio.sleep(0.2)

    watcher = asyncio.create_task(watch())
    started = time.monotonic()
    try:
        out = await asyncio.to_thread(helm, env, "uninstall", "kubeflow-trainer", "-n", NS, "--wait")
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    print(f"helm uninstall (the hook on the real node, then the release): {time.monotonic() - started:.1f} s; "
          f"hook pods {seen['hook pods']}")  # fmt: skip
    assert "uninstalled" in out, out
    assert seen["hook pods"] and all(node == NODE for node, _ in seen["hook pods"].values()), seen
    assert seen.get("deployment then") is True, f"the runtimes were not deleted before the manager: {seen}"
    assert (await get(env, f"{TRAINER}/clustertrainingruntimes"))["items"] == []
    await gone(env, f"/apis/apps/v1/namespaces/{NS}/deployments/{NAME}")
    await gone(env, f"/apis/batch/v1/namespaces/{NS}/jobs/kubeflow-trainer-runtimes-installer-cleanup")
    # The chart keeps its CRDs (helm.sh/resource-policy: keep), and so the TrainJob.
    assert conditions(await get(env, f"{TRAINER}/namespaces/{ns}/trainjobs/mnist")).get("Complete") == "True"

    # The next test deploys with kustomize: remove what is left, as a user switching installers would.
    code, body = await env.request("DELETE", f"/api/v1/namespaces/{ns}")
    assert code in (200, 202), body
    await gone(env, f"/api/v1/namespaces/{ns}")
    for crd in CRDS:
        await env.request("DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
    for crd in CRDS:
        await gone(env, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")


async def test_rolling_update_keeps_a_leader_and_every_webhook_call(env: Environment) -> None:
    await asyncio.to_thread(
        make,
        env,
        "deploy",
        f"IMG={TAG}",
        f"DEPLOY_PATCH={HERE / 'rollout-patch.yaml'}",
        "DEPLOY_TIMEOUT=300s",
    )

    async def two_ready() -> list[Json]:
        pods = await manager_pods(env)
        assert len(pods) == 2 and all(
            p["status"].get("containerStatuses", [{}])[0].get("ready") for p in pods
        ), [p["status"].get("containerStatuses") for p in pods]
        return pods

    old = {
        p["metadata"]["name"]
        for p in await eventually(two_ready, timeout=180, message="two replicas never Ready")
    }

    async def led() -> None:
        holder = (await get(env, LEASE))["spec"].get("holderIdentity") or ""
        assert any(holder.startswith(name) for name in old), (holder, old)

    # A Lease left by the Helm release's Pod (not released on exit, as upstream) expires first.
    await eventually(led, timeout=90, message="no replica took the Lease")

    ns = await namespace(env)
    base = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs"
    stop = asyncio.Event()
    names: list[str] = []
    failures: list[tuple[int, Any]] = []
    observed: list[tuple[str, float, float]] = []  # holder, acquireTime, renewTime

    async def create() -> None:
        while not stop.is_set():
            name = f"roll-{len(names) + len(failures)}"
            code, body = await env.request("POST", base, trainjob(ns, name, nodes=1))
            if code == 201:
                names.append(name)
            else:
                failures.append((code, body))
            await asyncio.sleep(0.2)

    async def watch() -> None:
        while not stop.is_set():
            spec = (await get(env, LEASE))["spec"]
            holder = spec.get("holderIdentity") or ""
            if holder and spec.get("renewTime"):
                observed.append(
                    (holder, stamp(spec.get("acquireTime") or spec["renewTime"]), stamp(spec["renewTime"]))
                )
            else:
                observed.append(("", 0.0, 0.0))
            await asyncio.sleep(0.2)

    tasks = [asyncio.create_task(create()), asyncio.create_task(watch())]
    await asyncio.sleep(3)  # some TrainJobs before the update
    started = time.monotonic()
    await asyncio.to_thread(kubectl, env, "-n", NS, "set", "image", f"deployment/{NAME}", f"manager={TAG2}")
    await asyncio.to_thread(
        kubectl, env, "-n", NS, "rollout", "status", f"deployment/{NAME}", "--timeout=300s"
    )
    rolled = time.monotonic() - started
    new = {
        p["metadata"]["name"]
        for p in await eventually(two_ready, timeout=120, message="two new replicas never Ready")
    }
    assert not new & old, (new, old)

    async def new_leader() -> None:
        holder = (await get(env, LEASE))["spec"].get("holderIdentity") or ""
        assert any(holder.startswith(name) for name in new), (holder, new)

    await eventually(new_leader, timeout=90, message="no new replica took the Lease")
    await asyncio.sleep(3)  # some TrainJobs after the update
    stop.set()
    await asyncio.gather(*tasks)

    # Time without a leader: from the last renewal seen of a holder to the next holder's acquisition.
    gaps: list[float] = []
    last: tuple[str, float] | None = None
    for holder, acquired, renewed in observed:
        if not holder:
            continue
        if last is not None and holder != last[0]:
            gaps.append(max(0.0, acquired - last[1]))
        last = (holder, renewed)
    assert gaps, f"leadership never moved: {observed[:3]} ... {observed[-3:]}"

    created = time.monotonic()

    async def converged() -> None:
        jobs = {j["metadata"]["name"]: j for j in (await get(env, base))["items"]}
        jobsets = {
            j["metadata"]["name"]
            for j in (await get(env, f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets"))["items"]
        }
        missing = [n for n in names if n not in jobsets]
        pending = [n for n in names if conditions(jobs.get(n, {})).get("Complete") != "True"]
        assert not missing and not pending, (
            f"{len(missing)} without a JobSet, {len(pending)} not Complete: {pending[:5]}"
        )

    await eventually(converged, timeout=300, interval=1, message="not every TrainJob converged")
    print(
        f"\nrolling update (2 replicas, {TAG} -> {TAG2}): rollout {rolled:.1f} s; leader changes {len(gaps)}, "
        f"time without a leader {' + '.join(f'{g:.1f}' for g in gaps)} s (max {max(gaps):.1f} s); "
        f"TrainJobs created {len(names)}, webhook calls failed {len(failures)}, converged {len(names)} "
        f"(JobSet + Complete, {time.monotonic() - created:.1f} s after the last)"
    )
    assert failures == [], [
        (code, body.get("message") if isinstance(body, dict) else body) for code, body in failures
    ]
    assert max(gaps) < 30, gaps  # leaseDuration 15 s + retryPeriod 2 s, with room for the load
    status, _ = await env.request("GET", f"/api/v1/namespaces/{ns}")
    assert status == 200


async def test_make_undeploy_returns_while_trainjobs_use_a_runtime(env: Environment) -> None:
    # v2.3.0 puts no in-use finalizer on a runtime (test_deploy_on_real_node.py has v2.1's)
    assert (FINALIZER in await runtime_finalizers(env)) is V2_3.runtime_finalizer
    jobs = await get(env, f"{TRAINER}/trainjobs")
    assert any(j["spec"]["runtimeRef"]["name"] == "torch-distributed" for j in jobs["items"]), (
        "no TrainJob to hold it"
    )

    started = time.monotonic()
    await asyncio.to_thread(make, env, "undeploy", "DEPLOY_TIMEOUT=240s", timeout=400)
    print(
        f"\nmake undeploy with {len(jobs['items'])} TrainJobs naming torch-distributed: {time.monotonic() - started:.1f} s"
    )
    for crd in CRDS:
        await gone(env, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}", timeout=5)
    await gone(env, f"/apis/apps/v1/namespaces/{NS}/deployments/{NAME}")
    await gone(env, f"/api/v1/namespaces/{NS}")

    assert env.node is not None
    state = env.node.state
    await env.stop()
    assert realnode.leaks(state) == []
