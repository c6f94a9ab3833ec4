"""The Kueue stack, once for the package: a full local cluster of its own, this manager
(``python -m trainer``, every component, webhooks on), Kueue v0.15.0 in front of it.

Its own cluster, not the session's ``full_cluster``: Kueue's webhooks intercept every Pod, Job
and JobSet of the cluster (``failurePolicy: Fail``) and its CRDs convert through it, which the
other e2e tests should not depend on. Two KWOK nodes form the pool Kueue's flavor leads to
(labelled and tainted, see ``kueuee2e.POOL_LABEL``), one untainted node takes everything else.
Pods of Jobs run ``ENVTEST_POD_RUN_SECONDS`` (default here 600 s: long enough to watch them
run, be preempted and resume) before they succeed.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml
from kueuee2e import GO_MANAGERS, PODS_READY_TIMEOUT, POOL, POOL_LABEL, ROOT, Api, Stack

from manager.envtest import Environment
from manager.envtest.certs import TinyCA
from manager.envtest.environment import POD_RUN_SECONDS_ENV, kwok_node
from manager.envtest.process import Process, free_port, wait_http
from trainer.conformance import harness, originals
from trainer.conformance import kueue as kq
from trainer.conformance.webhook_probes import configurations, wait_webhooks_effective

POD_RUN_SECONDS = 600.0
WAIT_FOR_PODS_READY = {
    "timeout": f"{PODS_READY_TIMEOUT:.0f}s",
    "blockAdmission": False,
    "requeuingStrategy": {"timestamp": "Eviction", "backoffLimitCount": 1, "backoffBaseSeconds": 1},
}
"""Kueue tracks PodsReady on every Workload (the tests assert it). A Workload whose pods are not
all ready ``PODS_READY_TIMEOUT`` seconds after admission is evicted, requeued once after a
backoff of about a second, and deactivated at its second timeout
(``test_pods_never_ready_evicted_requeued_then_deactivated``); every other test's pods are
ready within seconds of admission, so for them the timeout never fires."""


def _manager(base: Path, kubeconfig: Path) -> tuple[Process, int, int, bytes]:
    """``python -m trainer`` with every component, JSON logs, webhooks on a loopback port."""
    ca = TinyCA("kueue-e2e-trainer-ca")
    certs = base / "certs"
    certs.mkdir(parents=True)
    ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        certs / "tls.crt", certs / "tls.key"
    )
    hook, health = free_port(), free_port()
    config = {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "webhook": {"host": "127.0.0.1", "port": hook},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
        "leaderElection": {"leaderElect": False},
        "certManagement": {"enable": False},
    }
    (base / "config.yaml").write_text(yaml.safe_dump(config))
    process = Process(
        name="trainer-py",
        argv=[
            sys.executable,
            "-m",
            "trainer",
            f"--config={base / 'config.yaml'}",
            f"--kubeconfig={kubeconfig}",
            f"--webhook-cert-dir={certs}",
            "--log-format=json",
        ],
        log=base / "manager.log",
    )
    return process, hook, health, ca.cert_pem


async def _pool_nodes(env: Environment) -> None:
    for i in range(2):
        node = kwok_node(f"pool-node-{i}", {"cpu": "8", "memory": "32Gi", "pods": "110"}, {POOL_LABEL: POOL})
        node["spec"] = {"taints": [{"key": POOL_LABEL, "value": POOL, "effect": "NoSchedule"}]}
        status, body = await env.request("POST", "/api/v1/nodes", node)
        assert status == 201, body


async def _our_manager(env: Environment, workdir: Path) -> Process:
    """This manager, ready, its shipped webhooks called by the API server, the torch runtime in."""
    manager, hook, health, ca_pem = _manager(workdir / "manager", env.kubeconfig)
    manager.start(detached=False)
    try:
        await wait_http(manager, f"http://127.0.0.1:{health}/readyz", timeout=120)
        hook_files = sorted((ROOT / "config" / "webhook").glob("*.yaml"))
        await env.install_webhooks(hook_files, host="127.0.0.1", port=hook, ca_bundle=ca_pem)
        await wait_webhooks_effective(env, configurations(hook_files), "default", timeout=120)
        await env.apply_manifests([ROOT / "config" / "runtimes" / "torch-distributed.yaml"])
    except BaseException:
        manager.stop()
        raise
    return manager


async def _go_managers(env: Environment, workdir: Path) -> list[Process]:
    """The Go trainer v2.1.0 and jobset v0.10.1 managers instead (``KUEUE_E2E_MANAGERS=go``),
    as the conformance harness runs them, with the same webhook configurations; the trainer's
    process first (its log is the one the tests read)."""
    built = await asyncio.to_thread(originals.build_all)
    ca = TinyCA("kueue-e2e-go-ca")
    go = harness.go_managers(built, ca, workdir / "go-managers", env.kubeconfig)
    processes = [go.trainer, go.jobset]
    for process in processes:
        process.start(detached=False)
    try:
        await wait_http(go.jobset, f"http://127.0.0.1:{go.jobset_health}/readyz", timeout=120)
        await wait_http(go.trainer, f"http://127.0.0.1:{go.trainer_health}/readyz", timeout=120)
        for hook_file, port in go.webhook_ports().items():
            await env.install_webhooks([hook_file], host="127.0.0.1", port=port, ca_bundle=ca.cert_pem)
        await wait_webhooks_effective(env, configurations(list(go.webhook_ports())), "default", timeout=120)
        await env.apply_manifests([ROOT / "config" / "runtimes" / "torch-distributed.yaml"])
    except BaseException:
        for process in processes:
            process.stop()
        raise
    return processes


async def _start(workdir: Path) -> tuple[Environment, list[Process], kq.KueueProcess]:
    go = GO_MANAGERS
    env = Environment(
        workdir / "cluster",
        full=True,
        nodes=1,
        crd_paths=originals.upstream_crds() if go else [ROOT / "config" / "crd"],
        pod_run_seconds=None if os.environ.get(POD_RUN_SECONDS_ENV) else POD_RUN_SECONDS,
    )
    started = time.monotonic()
    await env.start()
    cluster_ready = time.monotonic()
    managers: list[Process] = []
    try:
        await _pool_nodes(env)
        # Kueue's CRDs take the API server a while (the Workload CRD is 1.6 MB): meanwhile
        # this manager starts.
        installing = asyncio.create_task(
            kq.install_kueue(env, workdir / "kueue", wait_for_pods_ready=WAIT_FOR_PODS_READY)
        )
        try:
            managers = await _go_managers(env, workdir) if go else [await _our_manager(env, workdir)]
        finally:
            kueue = await installing
        await kueue.start()
    except BaseException:
        for process in managers:
            process.stop()
        await env.stop()
        raise
    print(
        f"kueue-e2e: stack ready in {time.monotonic() - started:.1f}s: cluster {cluster_ready - started:.1f}s, "
        f"Kueue's CRDs {kueue.install_seconds:.1f}s (this manager meanwhile), Kueue {kueue.start_seconds:.1f}s"
        + (f" (built in {kueue.build_seconds:.0f}s first)" if kueue.build_seconds else ""),
        file=sys.stderr,
    )
    return env, managers, kueue


@pytest.fixture(scope="package")
def kueue_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    env, managers, kueue = asyncio.run(_start(tmp_path_factory.mktemp("kueue-e2e")))
    try:
        yield Stack(env, managers[0], kueue)
    finally:
        asyncio.run(kueue.stop())
        for process in managers:
            process.stop()
        asyncio.run(env.stop())


@pytest.fixture
async def api(kueue_stack: Stack, request: pytest.FixtureRequest) -> AsyncIterator[Api]:
    """A fresh namespace on the Kueue stack, deleted (while Kueue still converts) after the test."""
    name = "kq-" + request.node.name.removeprefix("test_")[:40].replace("_", "-").strip("-")
    env = kueue_stack.env
    status, body = await env.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    assert status == 201, body
    try:
        yield Api(env, name)
    finally:
        if not os.environ.get("KEEP_TEST_NAMESPACES"):
            await env.request("DELETE", f"/api/v1/namespaces/{name}")
