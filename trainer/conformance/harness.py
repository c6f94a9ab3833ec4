"""Both sides of a comparison, each on its own full local control plane (envtest, KWOK nodes).

``theirs``: the Go jobset and trainer managers as two processes, with upstream's CRDs;
``ours``: ``python -m trainer`` with this repository's CRDs, without its ``scheduling``
component (the PodGroup/ElasticQuota status controllers have no counterpart among the Go
originals run here). On both, leader election is off,
the webhook configurations of ``config/webhook`` are installed as URL configurations pointing at
the local webhook servers (as envtest does) with certificates from a harness CA, metrics and
probes listen on free loopback ports, and the shipped runtimes are applied once the webhooks
answer. ``Side.routes`` maps each webhook path to the server answering it (for direct mode).
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from manager.envtest import Environment
from manager.envtest.certs import TinyCA
from manager.envtest.process import Process, free_port, wait_http
from trainer.api import jobset_config_v1alpha1 as jobset_config
from trainer.conformance import originals
from trainer.conformance.kube import Kube
from trainer.conformance.webhook_probes import configurations, wait_webhooks_effective

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "config" / "crd"
THIRD_PARTY_CRDS = [
    ROOT / "config/crd/bases/scheduling.x-k8s.io_podgroups.yaml",
    ROOT / "config/crd/bases/scheduling.x-k8s.io_elasticquotas.yaml",
]
WEBHOOK_DIR = ROOT / "config" / "webhook"
RUNTIMES_DIR = ROOT / "config" / "runtimes"
READY_TIMEOUT = 180.0


@dataclass
class Side:
    """One cluster and the managers serving it."""

    name: str
    kube: Kube
    routes: dict[str, str] = field(default_factory=dict)
    ca_pem: bytes = b""
    env: Environment | None = None
    processes: list[Process] = field(default_factory=list)
    workdir: Path | None = None

    def webhook_ssl(self) -> ssl.SSLContext:
        ctx = (
            ssl.create_default_context(cadata=self.ca_pem.decode())
            if self.ca_pem
            else ssl.create_default_context()
        )
        return ctx

    async def stop(self) -> None:
        for proc in reversed(self.processes):
            proc.stop(timeout=15)
        self.processes.clear()
        await self.kube.close()
        if self.env is not None:
            await self.env.stop()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _webhook_paths(path: Path) -> list[str]:
    paths = []
    for doc in yaml.safe_load_all(path.read_text()):
        if isinstance(doc, dict):
            for hook in doc.get("webhooks", []):
                service = hook.get("clientConfig", {}).get("service") or {}
                if service.get("path"):
                    paths.append(service["path"])
    return paths


def _runtime_files() -> list[Path]:
    return sorted(p for p in RUNTIMES_DIR.rglob("*.yaml") if p.name != "kustomization.yaml")


def _say(message: str) -> None:
    print(f"conformance: {message}", file=sys.stderr, flush=True)


POD_RUN_SECONDS = 2.0
"""How long KWOK keeps a Job's pod Running before it succeeds, on both sides. A fixed run time
(no jitter) makes what a controller can see between start and completion the same on both
sides (every replica of an InOrder step started before the first finishes); it stays below the
settle quiet time, so a scenario is not declared settled while its pods still run."""


@dataclass(frozen=True)
class PodTiming:
    """KWOK's pod timing on a side's cluster (``manager.envtest.kwokstages``)."""

    run_seconds: float | None = POD_RUN_SECONDS
    start_seconds: float = 0.0
    probe_delays: bool = False


async def _start_env(
    workdir: Path, name: str, nodes: int, crds: list[Path], timing: PodTiming
) -> Environment:
    # Nodes 0: etcd and kube-apiserver only (admission and the objects managers write).
    env = Environment(
        workdir / f"{name}-cluster",
        full=nodes > 0,
        nodes=nodes,
        crd_paths=crds,
        pod_run_seconds=timing.run_seconds,
        pod_start_seconds=timing.start_seconds,
        pod_probe_delays=timing.probe_delays,
    )
    try:
        await env.start()
    except BaseException:  # a failed or interrupted start leaves neither processes nor files
        await env.stop()
        raise
    return env


def _serving_pair(ca: TinyCA, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        directory / "tls.crt", directory / "tls.key"
    )


async def _wait_ready(proc: Process, port: int) -> None:
    await wait_http(proc, f"http://127.0.0.1:{port}/readyz", timeout=READY_TIMEOUT)


async def _finish(side: Side, env: Environment, hook_ports: dict[Path, int]) -> None:
    for hook_file, port in hook_ports.items():
        await env.install_webhooks([hook_file], host="127.0.0.1", port=port, ca_bundle=side.ca_pem)
        for path in _webhook_paths(hook_file):
            side.routes[path] = f"https://127.0.0.1:{port}{path}"
    # Runtimes go through the managers' validating webhooks, as in a real deployment: apply them
    # once the API server calls every configuration and its server answers.
    await wait_webhooks_effective(env, configurations(hook_ports), "default", timeout=READY_TIMEOUT)
    await env.apply_manifests(_runtime_files(), field_manager="conformance")


@dataclass(frozen=True)
class GoManagers:
    """The Go jobset and trainer managers' processes (not started yet) and their loopback ports."""

    jobset: Process
    trainer: Process
    jobset_webhook: int
    jobset_health: int
    jobset_metrics: int
    trainer_webhook: int
    trainer_health: int
    trainer_metrics: int

    def webhook_ports(self) -> dict[Path, int]:
        """Each ``config/webhook`` file with the port of the server that answers it."""
        return {
            WEBHOOK_DIR / "jobset.yaml": self.jobset_webhook,
            WEBHOOK_DIR / "trainer.yaml": self.trainer_webhook,
        }


def go_managers(
    built: dict[str, tuple[Path, float]],
    ca: TinyCA,
    base: Path,
    kubeconfig: Path,
    *,
    client_connection: bool = True,
) -> GoManagers:
    """The Go jobset and trainer managers (``built`` by ``originals.build_all``) configured under
    ``base``: serving certificates from ``ca``, leader election and certificate management off,
    webhooks, metrics and probes on free loopback ports (the trainer's metrics over plain HTTP).
    ``client_connection``: the client QPS/burst the conformance runs use (500/500 jobset,
    500/1000 trainer) instead of the Go defaults."""
    js_certs, tr_tmp = base / "jobset-certs", base / "trainer-tmp"
    _serving_pair(ca, js_certs)
    # The Go trainer's webhook server reads {TempDir}/k8s-webhook-server/serving-certs.
    _serving_pair(ca, tr_tmp / "k8s-webhook-server" / "serving-certs")
    js_hook, js_health, js_metrics = free_port(), free_port(), free_port()
    js_config: dict[str, Any] = {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"port": js_hook, "host": "127.0.0.1", "certDir": str(js_certs)},
        "metrics": {"bindAddress": f"127.0.0.1:{js_metrics}", "certDir": str(js_certs)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{js_health}"},
    }
    tr_hook, tr_health, tr_metrics = free_port(), free_port(), free_port()
    tr_config: dict[str, Any] = {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "health": {
            "healthProbeBindAddress": f"127.0.0.1:{tr_health}",
            "readinessEndpointName": "readyz",
            "livenessEndpointName": "healthz",
        },
        "metrics": {"bindAddress": f"127.0.0.1:{tr_metrics}", "secureServing": False},
        "webhook": {"port": tr_hook, "host": "127.0.0.1"},
        "leaderElection": {"leaderElect": False},
        "certManagement": {"enable": False},
    }
    if client_connection:
        js_config["clientConnection"] = {"qps": 500, "burst": 500}
        tr_config["clientConnection"] = {"qps": 500, "burst": 1000}
    base.mkdir(parents=True, exist_ok=True)
    (base / "jobset-config.yaml").write_text(jobset_config.render(js_config))
    (base / "trainer-config.yaml").write_text(yaml.safe_dump(tr_config))
    kube_env = {"KUBECONFIG": str(kubeconfig)}
    jobset = Process(
        name="jobset-go",
        argv=[str(built[originals.JOBSET.name][0]), f"--config={base / 'jobset-config.yaml'}"],
        log=base / "jobset-go.log",
        extra_env=kube_env,
    )
    trainer = Process(
        name="trainer-go",
        argv=[str(built[originals.TRAINER.name][0]), f"--config={base / 'trainer-config.yaml'}"],
        log=base / "trainer-go.log",
        extra_env={**kube_env, "TMPDIR": str(tr_tmp)},
    )
    return GoManagers(jobset, trainer, js_hook, js_health, js_metrics, tr_hook, tr_health, tr_metrics)


async def start_theirs(
    workdir: Path,
    nodes: int = 2,
    pod_run_seconds: float | None = POD_RUN_SECONDS,
    *,
    timing: PodTiming | None = None,
) -> Side:
    """The Go jobset v0.10.1 and trainer v2.1.0 managers (built on first use); ``timing``, when
    given, replaces ``pod_run_seconds``."""
    built = originals.build_all()
    for binary, (_path, seconds) in built.items():
        if seconds:
            _say(f"built {binary} in {seconds:.0f}s")
    env = await _start_env(
        workdir,
        "theirs",
        nodes,
        [*originals.upstream_crds(), *THIRD_PARTY_CRDS],
        timing or PodTiming(pod_run_seconds),
    )
    side = Side("theirs", await Kube.from_kubeconfig(env.kubeconfig), env=env)
    try:
        ca = TinyCA("conformance-theirs-webhook-ca")
        side.ca_pem = ca.cert_pem
        base = workdir / "theirs-managers"
        go = go_managers(built, ca, base, env.kubeconfig)
        for proc in (go.jobset, go.trainer):
            proc.start(detached=False)
            side.processes.append(proc)
        await asyncio.gather(
            _wait_ready(go.jobset, go.jobset_health), _wait_ready(go.trainer, go.trainer_health)
        )
        await _finish(side, env, go.webhook_ports())
    except BaseException:
        await side.stop()
        raise
    return side


@dataclass(frozen=True)
class OurManager:
    """This repository's manager process (not started yet) and its loopback ports."""

    process: Process
    webhook: int
    health: int
    metrics: int

    def webhook_ports(self) -> dict[Path, int]:
        """Each ``config/webhook`` file with the port of the server that answers it (one for all)."""
        return {WEBHOOK_DIR / "jobset.yaml": self.webhook, WEBHOOK_DIR / "trainer.yaml": self.webhook}


def our_manager(
    ca: TinyCA,
    base: Path,
    kubeconfig: Path,
    *,
    controllers: str | None = None,
    config_overrides: dict[str, Any] | None = None,
) -> OurManager:
    """This repository's manager (``python -m trainer``) configured under ``base``: a serving
    certificate from ``ca``, leader election and certificate management off, webhooks, metrics
    (plain HTTP) and probes on free loopback ports. ``controllers``: its ``--controllers`` value
    (None: every component); ``config_overrides``: top-level Configuration fields added to these."""
    base.mkdir(parents=True, exist_ok=True)
    certs = base / "webhook-certs"
    _serving_pair(ca, certs)
    hook, health, metrics = free_port(), free_port(), free_port()
    config: dict[str, Any] = {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "webhook": {"host": "127.0.0.1", "port": hook},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics}", "secureServing": False},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
        "leaderElection": {"leaderElect": False},
        "certManagement": {"enable": False},
        **(config_overrides or {}),
    }
    (base / "config.yaml").write_text(yaml.safe_dump(config))
    argv = [
        sys.executable,
        "-m",
        "trainer",
        f"--config={base / 'config.yaml'}",
        f"--webhook-cert-dir={certs}",
        "--log-format=console",
    ]
    if controllers is not None:
        argv.append(f"--controllers={controllers}")
    process = Process(
        name="trainer-py",
        argv=argv,
        log=base / "trainer-py.log",
        extra_env={"KUBECONFIG": str(kubeconfig)},
    )
    return OurManager(process, hook, health, metrics)


async def start_ours(
    workdir: Path,
    nodes: int = 2,
    pod_run_seconds: float | None = POD_RUN_SECONDS,
    *,
    timing: PodTiming | None = None,
    config_overrides: dict[str, Any] | None = None,
) -> Side:
    """This repository's manager (``python -m trainer``), with this repository's CRDs; ``timing``,
    when given, replaces ``pod_run_seconds``; ``config_overrides``: top-level Configuration
    fields added to the harness's own (the benchmarks pass the shipped ``controller`` and
    ``clientConnection``)."""
    env = await _start_env(workdir, "ours", nodes, [CRD_DIR], timing or PodTiming(pod_run_seconds))
    side = Side("ours", await Kube.from_kubeconfig(env.kubeconfig), env=env)
    try:
        ca = TinyCA("conformance-ours-webhook-ca")
        side.ca_pem = ca.cert_pem
        ours = our_manager(
            ca,
            workdir / "ours-manager",
            env.kubeconfig,
            # The Go side runs no scheduler-plugins controller: PodGroup status is not compared
            # against one that nobody writes there.
            controllers="*,-scheduling",
            config_overrides=config_overrides,
        )
        ours.process.start(detached=False)
        side.processes.append(ours.process)
        await _wait_ready(ours.process, ours.health)
        await _finish(side, env, ours.webhook_ports())
    except BaseException:
        await side.stop()
        raise
    return side


async def attach(name: str, kubeconfig: str, webhooks: dict[str, str] | None = None) -> Side:
    """A side the user already runs: the runner only applies and compares."""
    return Side(name, await Kube.from_kubeconfig(kubeconfig), routes=dict(webhooks or {}))


def new_workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="conformance-"))
