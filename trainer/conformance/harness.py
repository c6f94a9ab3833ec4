"""Both sides of a comparison, each on its own full local control plane (envtest, KWOK nodes).

Both sides run one API level (``trainer/levels``; ``LevelInputs`` says what each side gets):

``theirs``: the level's Go jobset and trainer managers (``originals.for_level``) as two
processes, with upstream's CRDs and upstream's webhook configurations of those releases;
``ours``: ``python -m trainer --api-level=<level>`` with the level's CRDs and the webhook
configurations of the level's manifests (``config/<ApiLevel.manifests>``), without its
``scheduling`` component (the PodGroup/ElasticQuota status controllers have no counterpart among
the Go originals run here). On both, leader election is off, the webhook configurations are
installed as URL configurations pointing at the local webhook servers (as envtest does) with
certificates from a harness CA, metrics and probes listen on free loopback ports, and the same
runtimes are applied on both sides once the webhooks answer (ours where they are shipped for the
level, else upstream's of the level). ``Side.routes`` maps each webhook path to the server
answering it (for direct mode).
"""

from __future__ import annotations

import asyncio
import functools
import os
import shlex
import shutil
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from manager.envtest import Environment, assets
from manager.envtest.certs import TinyCA
from manager.envtest.errors import EnvtestError
from manager.envtest.process import Process, free_port, wait_http
from trainer import features, levels
from trainer.api import jobset_config_v1alpha1 as jobset_config
from trainer.conformance import kueue, originals
from trainer.conformance.kube import Kube
from trainer.conformance.webhook_probes import (
    CONFIGURATION_KINDS,
    configurations,
    needs_runtimes,
    wait_webhooks_effective,
)
from trainer.levels import ApiLevel

Json = dict[str, Any]

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "config" / "crd"
THIRD_PARTY_CRDS = [
    ROOT / "config/crd/bases/scheduling.x-k8s.io_podgroups.yaml",
    ROOT / "config/crd/bases/scheduling.x-k8s.io_elasticquotas.yaml",
]
WEBHOOK_DIR = ROOT / "config" / "webhook"
RUNTIMES_DIR = ROOT / "config" / "runtimes"
READY_TIMEOUT = 180.0
OURS_ARGS_ENV = "CONFORMANCE_OURS_ARGS"
"""Set, its words are added to our manager's command line (e.g. ``--yield-to-admission=0``): a
benchmark or a comparison of one setting against another."""
OURS_LOG_LEVEL_ENV = "CONFORMANCE_OURS_LOG_LEVEL"
"""Set (e.g. to ``debug``), our manager runs with that ``--zap-log-level`` (its log is kept with
``--keep-workdir``): for finding the cause of a difference."""

SHIPPED_RUNTIMES: dict[str, Path] = {levels.get("v2.1").name: RUNTIMES_DIR}
"""The runtimes this repository ships that both sides run, by the API level they are written for:
``config/runtimes`` are v2.1's. At v2.3 both sides get upstream v2.3.0's runtimes as its module
holds them (``config/overlays/v2.3/runtimes`` equals them field for field)."""


POD_RUN_SECONDS = 2.0
"""How long KWOK keeps a Job's pod Running before it succeeds, on both sides. A fixed run time
(no jitter) makes what a controller can see between start and completion the same on both
sides (every replica of an InOrder step started before the first finishes). A pod annotated
``kwokstages.RUN_SECONDS_ANNOTATION`` runs that long instead; a settle waits for the Running
pods' completion (``runner.Scenario._settle``), so any run time is settled correctly."""


@dataclass(frozen=True)
class PodTiming:
    """KWOK's pod timing on a side's cluster (``manager.envtest.kwokstages``)."""

    run_seconds: float | None = POD_RUN_SECONDS
    start_seconds: float = 0.0
    probe_delays: bool = False


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
    pod_timing: PodTiming | None = None
    """KWOK's pod timing on a local cluster of the harness (None: a cluster the user runs, whose
    pods the runner knows nothing about)."""
    status_port: int | None = None
    """Where the side's TrainJob status server listens on 127.0.0.1 (None: none; only with the
    run's ``--feature-gates TrainJobStatus=true``)."""
    stoppers: list[Callable[[], Awaitable[Any]]] = field(default_factory=list)
    """What runs in front of the side's managers and stops first (``add_kueue``: Kueue, whose
    webhooks must go before the cluster refuses every Pod, Job and JobSet)."""

    @property
    def collects_garbage(self) -> bool:
        """Whether a garbage collector runs on the side's cluster: a cluster the user runs has
        one; a local one only when full (kube-controller-manager, ``--nodes`` > 0)."""
        return self.env is None or self.env.full

    def webhook_ssl(self) -> ssl.SSLContext:
        ctx = (
            ssl.create_default_context(cadata=self.ca_pem.decode())
            if self.ca_pem
            else ssl.create_default_context()
        )
        return ctx

    async def stop(self) -> None:
        for stop in reversed(self.stoppers):
            await stop()
        self.stoppers.clear()
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
            paths += _configuration_paths(doc)
    return paths


def _configuration_paths(doc: Json) -> list[str]:
    paths = []
    for hook in doc.get("webhooks", []):
        service = hook.get("clientConfig", {}).get("service") or {}
        if service.get("path"):
            paths.append(service["path"])
    return paths


def _runtime_files() -> list[Path]:
    return sorted(p for p in RUNTIMES_DIR.rglob("*.yaml") if p.name != "kustomization.yaml")


@functools.cache
def kustomize(directory: Path) -> tuple[Json, ...]:
    """``kubectl kustomize DIRECTORY`` (the control-plane asset cache's kubectl) as objects."""
    kubectl = assets.ensure(["kubectl"])["kubectl"]
    proc = subprocess.run(
        [str(kubectl), "kustomize", str(directory)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise EnvtestError(f"kubectl kustomize {directory}: {proc.stderr.strip()}")
    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the CRDs are megabytes
    return tuple(d for d in yaml.load_all(proc.stdout, Loader=loader) if isinstance(d, dict))


def webhook_configurations(directory: Path, *, name_prefix: str = "") -> list[Json]:
    """The admission webhook configurations a kustomization renders (names given ``name_prefix``,
    as a kustomization that includes this one would)."""
    out = []
    for doc in kustomize(directory):
        if doc.get("kind") in CONFIGURATION_KINDS:
            doc = {**doc, "metadata": {**doc["metadata"], "name": name_prefix + doc["metadata"]["name"]}}
            out.append(doc)
    return out


@dataclass(frozen=True)
class LevelInputs:
    """What each side of a conformance run at one API level is installed with."""

    level: ApiLevel

    @property
    def originals(self) -> originals.Originals:
        return originals.for_level(self.level)

    def our_crds(self) -> list[Path]:
        """The level's CRDs (``ApiLevel.crd_dir``) and the PodGroup/ElasticQuota CRDs of
        ``config/crd/bases`` (the scheduler-plugins kinds are the same at every level)."""
        crd_dir = ROOT / "config" / self.level.crd_dir
        extra = [p for p in THIRD_PARTY_CRDS if p.parent.resolve() != crd_dir.resolve()]
        return [crd_dir, *extra]

    def their_crds(self) -> list[Path]:
        """Upstream's CRDs of the level's releases and the scheduler-plugins CRDs."""
        return [*self.originals.crds(), *THIRD_PARTY_CRDS]

    def their_webhooks(self) -> tuple[list[Json], list[Json]]:
        """Upstream's webhook configurations: (the jobset process's, the trainer process's).
        JobSet's are named as its ``config/default`` names them (``jobset-`` prefix)."""
        jobset = webhook_configurations(self.originals.jobset_webhooks(), name_prefix="jobset-")
        trainer = webhook_configurations(self.originals.trainer_webhooks())
        return jobset, trainer

    def our_webhooks(self) -> list[Json]:
        """The webhook configurations of the level's manifests (``config/<ApiLevel.manifests>``).
        A TrainJob defaulting configuration the level serves (``RuntimeLevel.trainjob_defaulter``)
        but its manifests do not register yet is taken from upstream's of the level."""
        docs = webhook_configurations(ROOT / "config" / self.level.manifests)
        wanted = self.level.runtime.trainjob_defaulter
        if wanted and wanted not in {d["metadata"]["name"] for d in docs}:
            docs += [d for d in self.their_webhooks()[1] if d["metadata"]["name"] == wanted]
        return docs

    def runtimes(self) -> list[Path]:
        """The runtimes both sides get: ours where they are shipped for the level
        (``SHIPPED_RUNTIMES``), else upstream's of the level (``manifests/base/runtimes``)."""
        if (ours := SHIPPED_RUNTIMES.get(self.level.name)) is not None:
            return sorted(p for p in ours.rglob("*.yaml") if p.name != "kustomization.yaml")
        return [self.originals.runtimes()]

    def runtimes_source(self) -> str:
        if self.level.name in SHIPPED_RUNTIMES:
            return "config/runtimes"
        return f"upstream trainer {self.level.trainer_version}'s manifests/base/runtimes"


def _say(message: str) -> None:
    print(f"conformance: {message}", file=sys.stderr, flush=True)


async def _start_env(
    workdir: Path, name: str, nodes: int, crds: list[Path], timing: PodTiming, service_accounts: bool = False
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
        service_accounts=service_accounts,
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


MANAGER_NAMESPACE = "kubeflow-system"
MANAGER_SERVICE_ACCOUNT = "kubeflow-trainer-controller-manager"
WEBHOOK_SECRET = "kubeflow-trainer-webhook-cert"
IN_CLUSTER_SA_DIR = "/run/secrets/kubernetes.io/serviceaccount"
GO_STATUS_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"


def status_server_on(feature_gates: dict[str, bool] | None) -> bool:
    return bool((feature_gates or {}).get("TrainJobStatus"))


async def _status_server_inputs(env: Environment, ca: TinyCA, base: Path) -> Path:
    """With the TrainJobStatus gate: the webhook Secret whose ``ca.crt`` the TrainJobStatus plugin
    copies into each TrainJob's ConfigMap (certificate management is off in the harness), and the
    manager's own ServiceAccount token (its issuer is what the status server verifies tokens
    against) in a directory laid out as the in-cluster mount; returns that directory."""
    import base64

    await env.apply(
        f"/api/v1/namespaces/{MANAGER_NAMESPACE}",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MANAGER_NAMESPACE}},
    )
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": WEBHOOK_SECRET, "namespace": MANAGER_NAMESPACE},
        "data": {"ca.crt": base64.b64encode(ca.cert_pem).decode()},
    }
    await env.apply(f"/api/v1/namespaces/{MANAGER_NAMESPACE}/secrets/{WEBHOOK_SECRET}", secret)
    sa_dir = base / "serviceaccount"
    sa_dir.mkdir(parents=True, exist_ok=True)
    token = await env.service_account_token(
        MANAGER_NAMESPACE, MANAGER_SERVICE_ACCOUNT, expiration_seconds=86400
    )
    (sa_dir / "token").write_text(token)
    (sa_dir / "namespace").write_text(MANAGER_NAMESPACE)
    return sa_dir


def _in_mount_namespace(argv: list[str], binds: dict[str, Path]) -> list[str]:
    """``argv`` run in a private mount namespace (``unshare -m``) where each ``binds`` target
    (an absolute path) shows the given directory: the Go trainer v2.3.0 reads its ServiceAccount
    token and the status server's certificate from fixed paths (``/var/run/secrets/...``,
    ``/tmp/k8s-webhook-server/serving-certs``), which this machine's other processes must not
    see changed. ``/run`` is a fresh tmpfs inside (``/var/run`` is its symlink)."""
    script = ["set -e", "mount -t tmpfs tmpfs /run"]
    args: list[str] = []
    for i, (target, source) in enumerate(binds.items(), start=1):
        script += [f'mkdir -p "{target}"', f'mount --bind "${{{i}}}" "{target}"']
        args.append(str(source))
    script.append(f"shift {len(args)}")
    script.append('exec "$@"')
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", "; ".join(script), "sh", *args, *argv]


async def _wait_ready(proc: Process, port: int) -> None:
    await wait_http(proc, f"http://127.0.0.1:{port}/readyz", timeout=READY_TIMEOUT)


async def _finish(
    side: Side, env: Environment, hook_ports: dict[Path, int], runtimes: list[Path] | None = None
) -> None:
    """``config/webhook`` files and ``runtimes`` (default: the shipped runtimes; level v2.1,
    ``originals.UNNAMED_LEVEL``; the benchmarks)."""
    hooks = [(doc, port) for path, port in hook_ports.items() for doc in configurations([path])]
    await _install(side, env, hooks, _runtime_files() if runtimes is None else runtimes)


async def _install(side: Side, env: Environment, hooks: list[tuple[Json, int]], runtimes: list[Path]) -> None:
    """Each webhook configuration pointed at the port of the server that answers it, then the
    runtimes."""
    hook_dir = env.dir / "webhook-configurations"
    hook_dir.mkdir(parents=True, exist_ok=True)
    for i, (doc, port) in enumerate(hooks):
        hook_file = hook_dir / f"{i:02d}-{doc['metadata']['name']}.yaml"
        hook_file.write_text(yaml.safe_dump(doc))
        await env.install_webhooks([hook_file], host="127.0.0.1", port=port, ca_bundle=side.ca_pem)
        for path in _configuration_paths(doc):
            side.routes[path] = f"https://127.0.0.1:{port}{path}"
    # Runtimes go through the managers' validating webhooks, as in a real deployment: apply them
    # once the API server calls every configuration and its server answers. A configuration
    # whose probe needs a runtime (the TrainJob defaulter) is waited for after them.
    docs = [doc for doc, _port in hooks]
    first = [d for d in docs if not needs_runtimes(d)]
    await wait_webhooks_effective(env, first, "default", timeout=READY_TIMEOUT)
    await env.apply_manifests(runtimes, field_manager="conformance")
    later = [d for d in docs if needs_runtimes(d)]
    await wait_webhooks_effective(env, later, "default", timeout=READY_TIMEOUT)


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
    status_port: int | None = None
    """The Go trainer's status server (TrainJobStatus gate), None without it."""

    def webhook_ports(self) -> dict[Path, int]:
        """Each ``config/webhook`` file with the port of the server that answers it."""
        return {
            WEBHOOK_DIR / "jobset.yaml": self.jobset_webhook,
            WEBHOOK_DIR / "trainer.yaml": self.trainer_webhook,
        }

    def level_hooks(self, inputs: LevelInputs) -> list[tuple[Json, int]]:
        """Upstream's webhook configurations of the level, each with its process's port."""
        jobset, trainer = inputs.their_webhooks()
        return [(d, self.jobset_webhook) for d in jobset] + [(d, self.trainer_webhook) for d in trainer]


def go_managers(
    built: dict[str, tuple[Path, float]],
    ca: TinyCA,
    base: Path,
    kubeconfig: Path,
    *,
    client_connection: bool = True,
    feature_gates: dict[str, bool] | None = None,
    service_account_dir: Path | None = None,
    jobset_release: str = jobset_config.DEFAULT_RELEASE,
) -> GoManagers:
    """The Go jobset and trainer managers (``built`` by ``originals.build_all``) configured under
    ``base``: serving certificates from ``ca``, leader election and certificate management off,
    webhooks, metrics and probes on free loopback ports (the trainer's metrics over plain HTTP).
    ``client_connection``: the client QPS/burst the conformance runs use (500/500 jobset,
    500/1000 trainer) instead of the Go defaults. ``feature_gates`` go to the Configuration of
    the manager whose gates they are (``trainer.features``: the JobSet release's to the jobset
    one, of release ``jobset_release``; the others to the trainer one)."""
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
    status_port = None
    if trainer_gates := features.of_component(feature_gates or {}, features.TRAINER):
        tr_config["featureGates"] = trainer_gates
    if jobset_gates := features.of_component(feature_gates or {}, features.JOBSET):
        js_config["featureGates"] = jobset_gates
    if status_server_on(feature_gates):
        status_port = free_port()
        tr_config["statusServer"] = {"port": status_port}
    base.mkdir(parents=True, exist_ok=True)
    (base / "jobset-config.yaml").write_text(jobset_config.render(js_config, jobset_release))
    (base / "trainer-config.yaml").write_text(yaml.safe_dump(tr_config))
    kube_env = {"KUBECONFIG": str(kubeconfig)}
    jobset = Process(
        name="jobset-go",
        argv=[str(built[originals.JOBSET.name][0]), f"--config={base / 'jobset-config.yaml'}"],
        log=base / "jobset-go.log",
        extra_env=kube_env,
    )
    tr_argv = [str(built[originals.TRAINER.name][0]), f"--config={base / 'trainer-config.yaml'}"]
    if status_port is not None:
        binds = {GO_STATUS_CERT_DIR: tr_tmp / "k8s-webhook-server" / "serving-certs"}
        if service_account_dir is not None:
            binds[IN_CLUSTER_SA_DIR] = service_account_dir
        tr_argv = _in_mount_namespace(tr_argv, binds)
    trainer = Process(
        name="trainer-go",
        argv=tr_argv,
        log=base / "trainer-go.log",
        extra_env={**kube_env, "TMPDIR": str(tr_tmp)},
    )
    return GoManagers(
        jobset, trainer, js_hook, js_health, js_metrics, tr_hook, tr_health, tr_metrics, status_port
    )


async def start_theirs(
    workdir: Path,
    nodes: int = 2,
    pod_run_seconds: float | None = POD_RUN_SECONDS,
    *,
    timing: PodTiming | None = None,
    level: ApiLevel | None = None,
    feature_gates: dict[str, bool] | None = None,
    env: Environment | None = None,
    apply_runtimes: bool = True,
    service_accounts: bool = False,
    runtimes: list[Path] | None = None,
) -> Side:
    """The Go jobset and trainer managers of ``level`` (default: ``originals.UNNAMED_LEVEL``, jobset v0.10.1
    and trainer v2.1.0; built on first use) with upstream's CRDs; ``timing``, when given, replaces
    ``pod_run_seconds``. Without ``level``: ``config/webhook`` and ``config/runtimes``; with it:
    upstream's webhook configurations of the level and ``LevelInputs.runtimes``. ``env``: a
    running control plane whose CRDs the caller installed (``migrated``: a cluster migrated to
    the level), then ``apply_runtimes`` False keeps the runtimes it holds. ``service_accounts``:
    the ServiceAccount admission plugin on in the cluster started here (``Environment``).
    ``runtimes``: the runtime files applied in place of the level's default (the benchmarks give
    the level's shipped runtimes, ``ApiLevel.runtimes``)."""
    inputs = LevelInputs(level or originals.UNNAMED_LEVEL)
    # a build of minutes off the loop: ours may be starting beside it (``migrated`` starts both
    # sides at once) and its readiness wait must not see the build's minutes as its own
    built = await asyncio.to_thread(inputs.originals.build)
    for binary, (_path, seconds) in built.items():
        if seconds:
            _say(f"built {binary} ({inputs.originals.describe()}) in {seconds:.0f}s")
    timing = timing or PodTiming(pod_run_seconds)
    if env is None:
        env = await _start_env(workdir, "theirs", nodes, inputs.their_crds(), timing, service_accounts)
    runtimes = (inputs.runtimes() if runtimes is None else runtimes) if apply_runtimes else []
    side = Side("theirs", await Kube.from_kubeconfig(env.kubeconfig), env=env, pod_timing=timing)
    try:
        ca = TinyCA("conformance-theirs-webhook-ca")
        side.ca_pem = ca.cert_pem
        base = workdir / "theirs-managers"
        sa_dir = await _status_server_inputs(env, ca, base) if status_server_on(feature_gates) else None
        go = go_managers(
            built,
            ca,
            base,
            env.kubeconfig,
            feature_gates=feature_gates,
            service_account_dir=sa_dir,
            jobset_release=inputs.level.jobset_version,
        )
        side.status_port = go.status_port
        for proc in (go.jobset, go.trainer):
            proc.start(detached=False)
            side.processes.append(proc)
        await asyncio.gather(
            _wait_ready(go.jobset, go.jobset_health), _wait_ready(go.trainer, go.trainer_health)
        )
        if level is None:
            await _finish(side, env, go.webhook_ports(), runtimes)
        else:
            await _install(side, env, go.level_hooks(inputs), runtimes)
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

    def level_hooks(self, inputs: LevelInputs) -> list[tuple[Json, int]]:
        """The webhook configurations of the level's manifests, all answered by this process."""
        return [(d, self.webhook) for d in inputs.our_webhooks()]


def our_manager(
    ca: TinyCA,
    base: Path,
    kubeconfig: Path,
    *,
    controllers: str | None = None,
    config_overrides: dict[str, Any] | None = None,
    api_level: ApiLevel | None = None,
    service_account_dir: Path | None = None,
) -> OurManager:
    """This repository's manager (``python -m trainer``) configured under ``base``: a serving
    certificate from ``ca``, leader election and certificate management off, webhooks, metrics
    (plain HTTP) and probes on free loopback ports. ``controllers``: its ``--controllers`` value
    (None: every component); ``config_overrides``: top-level Configuration fields added to these;
    ``api_level``: its ``--api-level`` (None: the Configuration's ``apiLevel`` of
    ``config_overrides``, else ``originals.UNNAMED_LEVEL``)."""
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
    if level := os.environ.get(OURS_LOG_LEVEL_ENV):
        # debugging a difference: ours' log at debug shows each reconcile's steps
        argv.append(f"--zap-log-level={level}")
    if controllers is not None:
        argv.append(f"--controllers={controllers}")
    argv += shlex.split(os.environ.get(OURS_ARGS_ENV, ""))
    # Always named: without one the manager would run the product's default level over the CRDs
    # the caller installed for the unnamed one.
    level_name = api_level.name if api_level else config.get("apiLevel") or originals.UNNAMED_LEVEL.name
    argv.append(f"--api-level={level_name}")
    process = Process(
        name="trainer-py",
        argv=argv,
        log=base / "trainer-py.log",
        extra_env={
            "KUBECONFIG": str(kubeconfig),
            # the in-cluster mount's place (our manager reads its own token there, as Go does)
            **({"KUBERNETES_SERVICE_ACCOUNT_DIR": str(service_account_dir)} if service_account_dir else {}),
        },
    )
    return OurManager(process, hook, health, metrics)


async def start_ours(
    workdir: Path,
    nodes: int = 2,
    pod_run_seconds: float | None = POD_RUN_SECONDS,
    *,
    timing: PodTiming | None = None,
    config_overrides: dict[str, Any] | None = None,
    level: ApiLevel | None = None,
    feature_gates: dict[str, bool] | None = None,
    env: Environment | None = None,
    apply_runtimes: bool = True,
    service_accounts: bool = False,
    runtimes: list[Path] | None = None,
) -> Side:
    """This repository's manager (``python -m trainer``); ``timing``, when given, replaces
    ``pod_run_seconds``; ``config_overrides``: top-level Configuration fields added to the
    harness's own (the benchmarks pass the shipped ``controller`` and ``clientConnection``).
    Without ``level``: ``config/crd``, ``config/webhook`` and ``config/runtimes`` (the default
    level, no ``--api-level``); with it: the level's CRDs, the webhook configurations of its
    manifests, ``--api-level`` and ``LevelInputs.runtimes``. ``env``, ``apply_runtimes``,
    ``service_accounts`` and ``runtimes``: as for ``start_theirs``."""
    inputs = LevelInputs(level or originals.UNNAMED_LEVEL)
    timing = timing or PodTiming(pod_run_seconds)
    crds = inputs.our_crds() if level is not None else [CRD_DIR]
    if env is None:
        env = await _start_env(workdir, "ours", nodes, crds, timing, service_accounts)
    runtimes = (inputs.runtimes() if runtimes is None else runtimes) if apply_runtimes else []
    side = Side("ours", await Kube.from_kubeconfig(env.kubeconfig), env=env, pod_timing=timing)
    try:
        ca = TinyCA("conformance-ours-webhook-ca")
        side.ca_pem = ca.cert_pem
        overrides = dict(config_overrides or {})
        sa_dir = None
        if feature_gates:
            overrides["featureGates"] = dict(feature_gates)
        if status_server_on(feature_gates):
            side.status_port = free_port()
            overrides["statusServer"] = {"port": side.status_port}
            sa_dir = await _status_server_inputs(env, ca, workdir / "ours-manager")
        ours = our_manager(
            ca,
            workdir / "ours-manager",
            env.kubeconfig,
            # The Go side runs no scheduler-plugins controller: PodGroup status is not compared
            # against one that nobody writes there.
            controllers="*,-scheduling",
            config_overrides=overrides or None,
            api_level=level,
            service_account_dir=sa_dir,
        )
        ours.process.start(detached=False)
        side.processes.append(ours.process)
        await _wait_ready(ours.process, ours.health)
        if level is None:
            await _finish(side, env, ours.webhook_ports(), runtimes)
        else:
            await _install(side, env, ours.level_hooks(inputs), runtimes)
    except BaseException:
        await side.stop()
        raise
    return side


async def add_kueue(side: Side, level: ApiLevel, **kwargs: Any) -> kueue.KueueProcess:
    """The Kueue release of ``level`` (``kueue.KUEUE_VERSIONS``) in front of the side's managers,
    on its local cluster (``kueue.start_kueue``: CRDs, webhooks, the process, called by the API
    server when this returns); stopped with the side. ``kwargs`` are ``install_kueue``'s.
    Returns the ``KueueProcess``."""
    if side.env is None:
        raise EnvtestError(f"{side.name}: Kueue is started on local clusters only (no --kubeconfig-*)")
    workdir = side.workdir or side.env.dir.parent
    process = await kueue.start_kueue(side.env, workdir / f"{side.name}-kueue", level=level, **kwargs)
    side.stoppers.append(process.stop)
    return process


async def attach(name: str, kubeconfig: str, webhooks: dict[str, str] | None = None) -> Side:
    """A side the user already runs: the runner only applies and compares."""
    return Side(name, await Kube.from_kubeconfig(kubeconfig), routes=dict(webhooks or {}))


def new_workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="conformance-"))
