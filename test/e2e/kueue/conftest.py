"""The Kueue stack, once per API level for the package: a full local cluster of its own, this
manager (``python -m trainer --api-level=<level>``, every component, the level's CRDs and
webhooks), the Kueue release of the level in front of it (``kueue.KUEUE_VERSIONS``: v0.15.0 for
v2.1, v0.17.0 for v2.3). Each test runs at every level (``[v2_1]``, ``[v2_3]`` in its id).

Its own cluster, not the session's ``full_cluster``: Kueue's webhooks intercept every Pod, Job
and JobSet of the cluster (``failurePolicy: Fail``) and its CRDs convert through it, which the
other e2e tests should not depend on. Two KWOK nodes form the pool Kueue's flavor leads to
(labelled and tainted, see ``kueuee2e.POOL_LABEL``), one untainted node takes everything else.
Pods of Jobs run ``ENVTEST_POD_RUN_SECONDS`` (default here 600 s: long enough to watch them
run, be preempted and resume) before they succeed.

The MultiKueue tests add a second stack per level (``multikueue_stack``): a management cluster
with its own manager and Kueue, whose MultiKueue admission check runs its TrainJobs and JobSets
on the Kueue stack above, its one worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from kueuee2e import (
    GO_MANAGERS,
    KUEUE_LEVELS,
    PODS_READY_TIMEOUT,
    POOL,
    POOL_LABEL,
    ROOT,
    WRITES,
    Api,
    MultiKueue,
    MultiKueueApi,
    Stack,
    connect_worker,
)

from manager.envtest import Environment
from manager.envtest.certs import TinyCA
from manager.envtest.environment import POD_RUN_SECONDS_ENV, kwok_node
from manager.envtest.process import Process, free_port, wait_http
from trainer import levels
from trainer.conformance import harness, originals
from trainer.conformance import kueue as kq
from trainer.conformance.webhook_probes import configurations, needs_runtimes, wait_webhooks_effective
from trainer.levels import ApiLevel

Json = dict[str, object]

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


def _manager(base: Path, kubeconfig: Path, level: ApiLevel) -> tuple[Process, int, int, bytes]:
    """``python -m trainer --api-level=<level>`` with every component, JSON logs, webhooks on a
    loopback port."""
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
            f"--api-level={level.name}",
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


@dataclass(frozen=True)
class LevelStack:
    """What the stack of one API level installs (``LEVEL_STACKS``)."""

    our_crds: Callable[[], list[Path]]
    our_hooks: Callable[[], list[Json]]
    """This manager's webhook configurations at the level."""
    go_hooks: Callable[[harness.GoManagers], list[tuple[Json, int]]]
    """The webhook configurations the Go managers of the level get, each with its server's port."""
    runtime: Path
    """The ``torch-distributed`` ClusterTrainingRuntime of the level (the tests' runtime)."""


def _v2_1_hook_files() -> list[Path]:
    return sorted((ROOT / "config" / "webhook").glob("*.yaml"))


def _v2_1_go_hooks(go: harness.GoManagers) -> list[tuple[Json, int]]:
    # this repository's webhook configurations, each pointed at the Go process serving it
    return [(doc, port) for path, port in go.webhook_ports().items() for doc in configurations([path])]


LEVEL_STACKS: dict[str, LevelStack] = {
    # Level v2.1: as the suite ran before levels: config/crd, config/webhook, config/runtimes.
    "v2.1": LevelStack(
        our_crds=lambda: [ROOT / "config" / "crd"],
        our_hooks=lambda: configurations(_v2_1_hook_files()),
        go_hooks=_v2_1_go_hooks,
        runtime=ROOT / "config" / "runtimes" / "torch-distributed.yaml",
    ),
    # Level v2.3: what the conformance harness installs at the level (config/overlays/v2.3's
    # CRDs and webhook configurations, the TrainJob defaulter included; upstream v2.3.0's and
    # jobset v0.12.0's for the Go managers) and the overlay's shipped runtime.
    "v2.3": LevelStack(
        our_crds=lambda: harness.LevelInputs(levels.get("v2.3")).our_crds(),
        our_hooks=lambda: harness.LevelInputs(levels.get("v2.3")).our_webhooks(),
        go_hooks=lambda go: go.level_hooks(harness.LevelInputs(levels.get("v2.3"))),
        runtime=ROOT / "config" / "overlays" / "v2.3" / "runtimes" / "torch-distributed.yaml",
    ),
}


async def _install_hooks(
    env: Environment, hooks: list[tuple[Json, int]], ca_pem: bytes, runtime: Path, workdir: Path
) -> None:
    """Each configuration pointed at its server's port; the runtime once the API server calls
    those that need none, then the wait for those whose probe needs it (the TrainJob defaulter)."""
    hook_dir = workdir / "webhook-configurations"
    hook_dir.mkdir(parents=True, exist_ok=True)
    for i, (doc, port) in enumerate(hooks):
        hook_file = hook_dir / f"{i:02d}-{doc['metadata']['name']}.yaml"  # type: ignore[index]
        hook_file.write_text(yaml.safe_dump(doc))
        await env.install_webhooks([hook_file], host="127.0.0.1", port=port, ca_bundle=ca_pem)
    docs = [doc for doc, _ in hooks]
    await wait_webhooks_effective(env, [d for d in docs if not needs_runtimes(d)], "default", timeout=120)
    await env.apply_manifests([runtime])
    await wait_webhooks_effective(env, [d for d in docs if needs_runtimes(d)], "default", timeout=120)


async def _our_manager(env: Environment, workdir: Path, level: ApiLevel) -> Process:
    """This manager, ready, its level's webhooks called by the API server, the torch runtime in."""
    stack = LEVEL_STACKS[level.name]
    manager, hook, health, ca_pem = _manager(workdir / "manager", env.kubeconfig, level)
    manager.start(detached=False)
    try:
        await wait_http(manager, f"http://127.0.0.1:{health}/readyz", timeout=120)
        hooks = [(doc, hook) for doc in stack.our_hooks()]
        await _install_hooks(env, hooks, ca_pem, stack.runtime, workdir)
    except BaseException:
        manager.stop()
        raise
    return manager


async def _go_managers(env: Environment, workdir: Path, level: ApiLevel) -> list[Process]:
    """The Go trainer and jobset managers of the level instead (``KUEUE_E2E_MANAGERS=go``: v2.1.0
    and v0.10.1, or v2.3.0 and v0.12.0), as the conformance harness runs them; the trainer's
    process first (its log is the one the tests read)."""
    built = await asyncio.to_thread(originals.build_all, level=level)
    ca = TinyCA("kueue-e2e-go-ca")
    go = harness.go_managers(built, ca, workdir / "go-managers", env.kubeconfig)
    processes = [go.trainer, go.jobset]
    for process in processes:
        process.start(detached=False)
    try:
        await wait_http(go.jobset, f"http://127.0.0.1:{go.jobset_health}/readyz", timeout=120)
        await wait_http(go.trainer, f"http://127.0.0.1:{go.trainer_health}/readyz", timeout=120)
        stack = LEVEL_STACKS[level.name]
        await _install_hooks(env, stack.go_hooks(go), ca.cert_pem, stack.runtime, workdir)
    except BaseException:
        for process in processes:
            process.stop()
        raise
    return processes


async def _start(
    workdir: Path,
    level: ApiLevel,
    *,
    role: str = "worker",
    pool: bool = True,
    nodes: int = 1,
    wait_for_pods_ready: Json | None = WAIT_FOR_PODS_READY,
) -> tuple[Environment, list[Process], kq.KueueProcess]:
    """A full local cluster with this manager (or the Go managers) and Kueue in front of it.
    ``role`` names it in the log; ``pool``: the two pool nodes (``kueuee2e.POOL_LABEL``) besides
    ``nodes`` untainted ones; ``wait_for_pods_ready``: Kueue's setting (None: off)."""
    go = GO_MANAGERS
    env = Environment(
        workdir / "cluster",
        full=True,
        nodes=nodes,
        crd_paths=harness.LevelInputs(level).their_crds() if go else LEVEL_STACKS[level.name].our_crds(),
        pod_run_seconds=None if os.environ.get(POD_RUN_SECONDS_ENV) else POD_RUN_SECONDS,
    )
    started = time.monotonic()
    await env.start()
    cluster_ready = time.monotonic()
    managers: list[Process] = []
    try:
        if pool:
            await _pool_nodes(env)
        # Kueue's CRDs take the API server a while (the Workload CRD is 1.6 MB): meanwhile
        # this manager starts.
        installing = asyncio.create_task(
            kq.install_kueue(env, workdir / "kueue", level=level, wait_for_pods_ready=wait_for_pods_ready)
        )
        try:
            managers = (
                await _go_managers(env, workdir, level) if go else [await _our_manager(env, workdir, level)]
            )
        finally:
            kueue = await installing
        await kueue.start()
    except BaseException:
        for process in managers:
            process.stop()
        await env.stop()
        raise
    print(
        f"kueue-e2e: level {level.name}, Kueue {kq.version_for(level)}: {role} stack ready in "
        f"{time.monotonic() - started:.1f}s: cluster {cluster_ready - started:.1f}s, "
        f"Kueue's CRDs {kueue.install_seconds:.1f}s (this manager meanwhile), Kueue {kueue.start_seconds:.1f}s"
        + (f" (built in {kueue.build_seconds:.0f}s first)" if kueue.build_seconds else ""),
        file=sys.stderr,
    )
    return env, managers, kueue


def _stop(env: Environment, managers: list[Process], kueue: kq.KueueProcess) -> None:
    asyncio.run(kueue.stop())
    for process in managers:
        process.stop()
    asyncio.run(env.stop())


def _level_id(name: str) -> str:
    return name.replace(".", "_")


@pytest.fixture(scope="package", params=KUEUE_LEVELS, ids=[_level_id(n) for n in KUEUE_LEVELS])
def kueue_level(request: pytest.FixtureRequest) -> ApiLevel:
    """The API level of the stack (every test runs at each; ``-k v2_3`` picks one)."""
    return levels.get(str(request.param))


@pytest.fixture(scope="package")
def kueue_stack(kueue_level: ApiLevel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp(f"kueue-e2e-{_level_id(kueue_level.name)}")
    env, managers, kueue = asyncio.run(_start(workdir, kueue_level))
    try:
        yield Stack(env, managers[0], kueue, kueue_level, WRITES[kueue_level.name])
    finally:
        _stop(env, managers, kueue)


@pytest.fixture(scope="package")
def multikueue_stack(kueue_stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MultiKueue]:
    """MultiKueue: a management cluster of its own (this manager, or the Go managers, and Kueue
    with the MultiKueue admission check) in front of ``kueue_stack`` as its one worker
    (``kueuee2e.WORKER``): started only for the tests that ask for it."""
    level = kueue_stack.level
    workdir = tmp_path_factory.mktemp(f"multikueue-e2e-{_level_id(level.name)}")
    # No nodes: nothing may run there (a pod made there would stay Pending, and be seen).
    env, managers, kueue = asyncio.run(
        _start(workdir, level, role="management", pool=False, nodes=0, wait_for_pods_ready=None)
    )
    try:
        asyncio.run(connect_worker(env, kueue_stack.env))
        yield MultiKueue(Stack(env, managers[0], kueue, level, WRITES[level.name]), kueue_stack)
    finally:
        _stop(env, managers, kueue)


def _namespace_name(request: pytest.FixtureRequest, level: ApiLevel) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.removeprefix("test_").lower().replace("_", "-"))
    suffix = _level_id(level.name).replace("_", "-")
    return "kq-" + base.removesuffix("-").removesuffix(f"-{suffix}")[:36].strip("-") + f"-{suffix}"


@contextlib.asynccontextmanager
async def _namespace(stack: Stack, name: str) -> AsyncIterator[Api]:
    """``name`` on the stack's cluster, deleted (while Kueue still converts) after the block."""
    env = stack.env
    status, body = await env.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    assert status == 201, body
    try:
        yield Api(env, name, stack.writes)
    finally:
        if not os.environ.get("KEEP_TEST_NAMESPACES"):
            await env.request("DELETE", f"/api/v1/namespaces/{name}")


@pytest.fixture
async def api(kueue_stack: Stack, request: pytest.FixtureRequest) -> AsyncIterator[Api]:
    """A fresh namespace on the Kueue stack, deleted (while Kueue still converts) after the test."""
    async with _namespace(kueue_stack, _namespace_name(request, kueue_stack.level)) as api:
        yield api


@pytest.fixture
async def mk(multikueue_stack: MultiKueue, request: pytest.FixtureRequest) -> AsyncIterator[MultiKueueApi]:
    """The same fresh namespace on the management and the worker cluster (MultiKueue creates its
    copies in the namespace of the same name)."""
    name = _namespace_name(request, multikueue_stack.worker.level)
    async with (
        _namespace(multikueue_stack.management, name) as management,
        _namespace(multikueue_stack.worker, name) as worker,
    ):
        yield MultiKueueApi(management, worker)
