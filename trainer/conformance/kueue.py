"""Kueue in front of a manager: built from the Go module proxy, run outside the cluster.

Kueue (``sigs.k8s.io/kueue``) is a test dependency, never shipped. Which release sits in front
of a manager follows the manager's API level (:data:`KUEUE_VERSIONS`): v0.15.0 for level v2.1
(its go.mod: trainer v2.1.0, jobset v0.10.1; Kueue writes ``podTemplateOverrides``), v0.17.0 for
level v2.3 (its go.mod: trainer v2.2.0, jobset v0.11.1; Kueue writes a ``runtimePatches`` entry
of manager ``kueue.x-k8s.io/manager``, a field trainer v2.2.0 and v2.3.0 type alike). Its
``cmd/kueue`` is built once per release and cached like the Go originals (``GoMain``); its manifests are
the module's ``config/default`` rendered by kustomize (the kubectl of the asset cache), once,
into the same cache directory: what a user installing the release gets. From those the harness
takes only the CRDs and the two webhook configurations, and installs them on a local control
plane (``manager.envtest.Environment``) with every ``clientConfig.service`` (the admission
webhooks and the CRDs' conversion webhooks, ``/convert``) rewritten to
``https://127.0.0.1:<port><path>`` and the harness CA injected, as ``install_webhooks`` does for
this repository's webhooks. Its RBAC, Deployment and Services are not used: Kueue runs as a
process with the admin kubeconfig.

Kueue's Configuration (``config.kueue.x-k8s.io/v1beta2``) here: the release's own
``controller.groupKindConcurrency`` (``release_controller``), leader election and internal
certificate management off (the serving certificate comes from ``webhook.certDir``), the
``VisibilityOnDemand`` gate off (its API server would need certificates of its own), metrics
off, probes and webhooks on free loopback ports, ``integrations.frameworks`` =
``trainer.kubeflow.org/trainjob``, ``jobset.x-k8s.io/jobset`` and at level v2.3 ``batch/job``
(:data:`KUEUE_FRAMEWORKS`), optionally ``waitForPodsReady``.

Two facts of ``cmd/kueue`` shape the start-up: with internal certificate management off it reads
a metrics certificate from the fixed path ``/etc/kueue/metrics/certs`` even when metrics are
off (written here, once, when missing: :func:`ensure_metrics_certificate`); and it exits ("no
matches for kind Workload") when its CRDs are not served yet, so the CRDs are installed, and
served, first. Kueue v0.15 stores its objects as ``v1beta1`` and reads them as ``v1beta2``
through its own conversion webhook (v0.17 stores ``v1beta2`` and converts for ``v1beta1``
clients), so the webhook configurations are removed before it stops
(:meth:`KueueProcess.stop`); objects of its kinds can then no longer be read until it runs again.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from manager.envtest import Environment, assets
from manager.envtest.assets import GoMain, ensure_go_main, go_mains_dir
from manager.envtest.certs import TinyCA
from manager.envtest.errors import AssetBuildError, EnvtestError
from manager.envtest.process import Process, free_port, wait_http
from trainer import levels
from trainer.conformance.originals import UNNAMED_LEVEL, module_dir
from trainer.levels import ApiLevel

Json = dict[str, Any]

KUEUE_MODULE = "sigs.k8s.io/kueue"
KUEUE_VERSIONS: dict[str, str] = {"v2.1": "v0.15.0", "v2.3": "v0.17.0"}
"""The Kueue release tested in front of a manager of each API level (``ApiLevel.name``):
v0.15.0's go.mod requires github.com/kubeflow/trainer/v2 v2.1.0 and sigs.k8s.io/jobset v0.10.1
(as do v0.15.1 and v0.15.2), v0.17.0's trainer v2.2.0 and jobset v0.11.1, whose TrainJob
``runtimePatches`` are v2.3.0's but for a pod patch's ``terminationGracePeriodSeconds``."""
VERSION_ENV = "KUEUE_VERSION"
"""Another release of Kueue for every level (``KUEUE_VERSION=v0.15.1 make test-kueue``)."""


def version_for(level: ApiLevel) -> str:
    """The Kueue release in front of a manager of ``level``: ``KUEUE_VERSION`` or the table's."""
    return os.environ.get(VERSION_ENV) or KUEUE_VERSIONS[level.name]


def kueue_main(level: ApiLevel) -> GoMain:
    """Kueue's controller manager (``cmd/kueue``) at the release of ``level``.

    Compiled without optimizations (``optimize=False``): only tests and benchmarks run it, the
    same binary in front of both managers a benchmark compares, and its two releases are the
    largest builds of a cold CI run."""
    return GoMain(
        KUEUE_MODULE,
        version_for(level),
        f"{KUEUE_MODULE}/cmd/kueue",
        "kueue-controller-manager",
        optimize=False,
    )


KUEUE = kueue_main(UNNAMED_LEVEL)
KUEUE_VERSION = KUEUE.version
"""The unnamed level's (v2.1) Kueue (v0.15.0 unless ``KUEUE_VERSION`` says otherwise)."""

API_GROUP = "kueue.x-k8s.io"
API_VERSION = f"{API_GROUP}/v1beta2"
"""The version Kueue v0.15 and v0.17 read and write (their CRDs convert by webhook)."""
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
FRAMEWORKS = ("trainer.kubeflow.org/trainjob", "jobset.x-k8s.io/jobset")
KUEUE_FRAMEWORKS: dict[str, tuple[str, ...]] = {"v2.1": FRAMEWORKS, "v2.3": (*FRAMEWORKS, "batch/job")}
"""The integrations the Kueue of each API level runs: TrainJobs and JobSets, and at v2.3 Jobs.
Kueue v0.17.0 needs ``batch/job`` on (as the release's default Configuration has it): it sets up
the webhook of an integration that is off through the integration's own ``SetupWebhook`` with
``WithNoopWebhook``, which the Job integration ignores, so with ``batch/job`` off its
``mjob.kb.io`` answers every Job creation in the cluster with a nil-pointer panic (no LocalQueue
manager) and no JobSet can create its Jobs. v0.15.0 installs a generic no-op webhook instead, and
with ``batch/job`` on its Job webhook refuses a JobSet's first Job while the JobSet is not in its
cache yet (``JobSet ... not found``: a logged reconcile error and a retry), so v2.1 keeps it off."""


def frameworks_for(level: ApiLevel) -> tuple[str, ...]:
    return KUEUE_FRAMEWORKS[level.name]


NAMESPACE = "kueue-system"
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
"""Where ``cmd/kueue`` (v0.15, v0.17) reads its metrics certificate when internal cert management is off."""
MANIFESTS_FILE = "kueue-manifests.yaml"
READY_TIMEOUT = 120.0
CONFIGURATION_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def _say(message: str) -> None:
    print(f"kueue: {message}", file=sys.stderr, flush=True)


def build(level: ApiLevel = UNNAMED_LEVEL, *, quiet: bool = False) -> tuple[Path, float]:
    """The Kueue binary of ``level`` (built now when not cached) and the seconds spent building it."""
    return ensure_go_main(kueue_main(level), quiet=quiet)


def manifests(level: ApiLevel = UNNAMED_LEVEL) -> list[Json]:
    """Every object of the install of ``level``'s release (``kustomize build config/default`` of
    the module), rendered once into the cache directory of the binary."""
    main = kueue_main(level)
    cached = go_mains_dir() / main.key / MANIFESTS_FILE
    if not cached.is_file():
        source = module_dir(main) / "config" / "default"
        kubectl = assets.ensure(["kubectl"])["kubectl"]
        proc = subprocess.run(
            [str(kubectl), "kustomize", str(source)], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise AssetBuildError(f"{main.module}@{main.version}: kustomize config/default", proc.stderr)
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
        partial.write_text(proc.stdout)
        partial.rename(cached)
    return [doc for doc in yaml.safe_load_all(cached.read_text()) if isinstance(doc, dict)]


def _url_config(client: Json, base_url: str, ca_pem: bytes) -> None:
    service = client.pop("service", None) or {}
    client["url"] = base_url + service.get("path", "")
    client["caBundle"] = base64.b64encode(ca_pem).decode()


def crds(docs: Sequence[Json], base_url: str, ca_pem: bytes) -> list[Json]:
    """The release's CRDs, their conversion webhooks pointed at ``base_url`` (``https://host:port``)."""
    out = []
    for doc in docs:
        if doc.get("kind") != "CustomResourceDefinition":
            continue
        doc = yaml.safe_load(yaml.safe_dump(doc))  # a copy
        conversion = doc["spec"].get("conversion") or {}
        if conversion.get("strategy") == "Webhook":
            _url_config(conversion["webhook"].setdefault("clientConfig", {}), base_url, ca_pem)
        out.append(doc)
    return out


def webhook_configurations(docs: Sequence[Json]) -> list[Json]:
    """The release's two admission webhook configurations, as shipped (service references)."""
    return [yaml.safe_load(yaml.safe_dump(d)) for d in docs if d.get("kind") in CONFIGURATION_KINDS]


RELEASE_CONFIGMAP = "kueue-manager-config"
"""The release's ConfigMap of its Configuration (key ``controller_manager_config.yaml``)."""


def release_controller(docs: Sequence[Json]) -> Json:
    """The ``controller`` section of the release's own Configuration (its
    ``groupKindConcurrency``: 5 workers for Jobs, Pods and Workloads, 1 for the queues): what a
    user installing the release runs with. Empty when the release has none."""
    for doc in docs:
        if doc.get("kind") == "ConfigMap" and doc["metadata"]["name"] == RELEASE_CONFIGMAP:
            config = yaml.safe_load((doc.get("data") or {}).get("controller_manager_config.yaml") or "") or {}
            return dict(config.get("controller") or {})
    return {}


def ensure_metrics_certificate(directory: Path = METRICS_CERT_DIR) -> None:
    """A self-signed pair at ``directory`` (``tls.crt``, ``tls.key``) unless one is there already.

    ``cmd/kueue`` (v0.15, v0.17) builds a certificate watcher on this fixed path whenever internal
    certificate management is off, and exits without it; with metrics off (bindAddress "0") the
    pair is never served. Written atomically, so concurrent harnesses agree on one pair."""
    crt, key = directory / "tls.crt", directory / "tls.key"
    if crt.is_file() and key.is_file():
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
        pair = TinyCA("kueue-metrics-ca").issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"])
        suffix = f".{os.getpid()}.tmp"
        pair.write(crt.with_name("tls.crt" + suffix), key.with_name("tls.key" + suffix))
        key.with_name("tls.key" + suffix).rename(key)
        crt.with_name("tls.crt" + suffix).rename(crt)
    except OSError as err:
        raise EnvtestError(
            f"Kueue reads a metrics certificate from {directory} (fixed path) and it cannot be "
            f"written here ({err}); create tls.crt and tls.key there once"
        ) from err


def configuration(
    *,
    webhook_port: int,
    health_port: int,
    cert_dir: Path,
    wait_for_pods_ready: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
    frameworks: Sequence[str] = FRAMEWORKS,
    controller: Mapping[str, Any] | None = None,
) -> Json:
    """Kueue's Configuration for a process outside the cluster (see the module docstring);
    ``controller``: the release's ``controller`` section (``release_controller``)."""
    config: Json = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": 100, "burst": 200},
        "featureGates": {"VisibilityOnDemand": False},
        "integrations": {"frameworks": list(frameworks)},
    }
    if controller:
        config["controller"] = dict(controller)
    if wait_for_pods_ready is not None:
        config["waitForPodsReady"] = dict(wait_for_pods_ready)
    config.update(overrides or {})
    return config


# -- MultiKueue -----------------------------------------------------------------------------------

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
"""The AdmissionCheck ``controllerName`` of MultiKueue, and the ``spec.managedBy`` Kueue's webhooks
give a TrainJob or JobSet queued in a ClusterQueue that has such a check (v0.15 and v0.17)."""
MULTIKUEUE_SECRET_KEY = "kubeconfig"
"""The key of a MultiKueueCluster's kubeconfig Secret (``kueue.MultiKueueConfigSecretKey``)."""
PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
MULTIKUEUE_ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
"""The labels MultiKueue puts on the copy of a job it creates on a worker (v0.15 and v0.17): the
Workload it created there first, and the management cluster's origin (``multiKueue.origin``,
``multikueue`` by default)."""


def multikueue_objects(
    workers: Mapping[str, bytes], *, config: str = "multikueue", check: str = "multikueue"
) -> list[Json]:
    """What a management cluster needs to run jobs on ``workers`` (name -> kubeconfig), as Kueue's
    MultiKueue setup guide of v0.15 and v0.17 has it, at ``kueue.x-k8s.io/v1beta2``: per worker a
    Secret in Kueue's namespace holding its kubeconfig (key ``kubeconfig``; Kueue refuses one with
    a token or CA file path, insecure TLS, basic auth or an exec plugin unless the
    ``MultiKueueAllowInsecureKubeconfigs`` gate is on: certificate data inline, as the harness's
    kubeconfigs have) and a MultiKueueCluster naming it; a MultiKueueConfig listing them; an
    AdmissionCheck of controller ``kueue.x-k8s.io/multikueue`` whose parameters name that config.
    A ClusterQueue whose ``admissionChecksStrategy`` names ``check`` dispatches to the workers,
    which need a LocalQueue of the same name in a namespace of the same name."""
    objects: list[Json] = []
    for name, kubeconfig in workers.items():
        secret = f"multikueue-{name}"
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": secret, "namespace": NAMESPACE},
                "data": {MULTIKUEUE_SECRET_KEY: base64.b64encode(kubeconfig).decode()},
            }
        )
        objects.append(
            {
                "apiVersion": API_VERSION,
                "kind": "MultiKueueCluster",
                "metadata": {"name": name},
                "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret}}},
            }
        )
    objects.append(
        {
            "apiVersion": API_VERSION,
            "kind": "MultiKueueConfig",
            "metadata": {"name": config},
            "spec": {"clusters": list(workers)},
        }
    )
    objects.append(
        {
            "apiVersion": API_VERSION,
            "kind": "AdmissionCheck",
            "metadata": {"name": check},
            "spec": {
                "controllerName": MULTIKUEUE_CONTROLLER,
                "parameters": {"apiGroup": API_GROUP, "kind": "MultiKueueConfig", "name": config},
            },
        }
    )
    return objects


def resource_flavor(name: str, **spec: Any) -> Json:
    """A ResourceFlavor ``name``; ``spec`` e.g. ``nodeLabels`` and ``tolerations`` (none: any node)."""
    obj: Json = {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": name}}
    if spec:
        obj["spec"] = spec
    return obj


def cluster_queue(name: str, flavor: str, cpu: str, **spec: Any) -> Json:
    """A ClusterQueue ``name`` for every namespace with ``cpu`` CPUs of ``flavor``; ``spec`` adds
    fields (``preemption``, ``admissionChecksStrategy``)."""
    quota = [{"name": flavor, "resources": [{"name": "cpu", "nominalQuota": cpu}]}]
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            **spec,
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": quota}],
        },
    }


def local_queue(name: str, namespace: str, cluster_queue: str) -> Json:
    """A LocalQueue ``name`` in ``namespace`` feeding ``cluster_queue``."""
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


# -- probes: the API server calls Kueue's webhooks -----------------------------------------------

_RF_PATH = f"/apis/{API_VERSION}/resourceflavors"


def _flavor(**spec: Any) -> Json:
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"generateName": "kueue-probe-"},
        "spec": spec,
    }


def converted_version(docs: Sequence[Json], crd_name: str = "localqueues.kueue.x-k8s.io") -> str:
    """A served version of the CRD ``crd_name`` of the release that is not its storage version:
    an object created at it goes through the conversion webhook (v0.15 stores v1beta1, v0.17
    stores v1beta2; both serve both)."""
    for doc in docs:
        if doc.get("kind") == "CustomResourceDefinition" and doc["metadata"]["name"] == crd_name:
            for version in doc["spec"]["versions"]:
                if version.get("served") and not version.get("storage"):
                    return str(version["name"])
    raise EnvtestError(f"Kueue's CRD {crd_name} serves no version besides its storage version")


async def wait_kueue_effective(
    env: Environment, *, timeout: float = 60.0, converted: str = "v1beta2"
) -> None:
    """Until the API server calls Kueue's mutating and validating configurations and converts
    through its ``/convert`` (each by a dry-run create, nothing stored; ``converted``: a
    LocalQueue version that is not stored, :func:`converted_version`)."""
    # mresourceflavor.kb.io adds the resource-in-use finalizer.
    await env.wait_webhook_effective(
        _RF_PATH,
        _flavor(),
        mutated=lambda a: (
            isinstance(a, dict)
            and f"{API_GROUP}/resource-in-use" in (a.get("metadata", {}).get("finalizers") or [])
        ),
        timeout=timeout,
    )
    # vresourceflavor.kb.io validates node label keys (the CRD schema does not).
    await env.wait_webhook_effective(
        _RF_PATH, _flavor(nodeLabels={"not a label key!": "x"}), denied_by="vresourceflavor.kb.io"
    )
    # A LocalQueue created at a version that is not stored goes through the conversion webhook.
    local_queue = {
        "apiVersion": f"{API_GROUP}/{converted}",
        "kind": "LocalQueue",
        "metadata": {"generateName": "kueue-probe-", "namespace": "default"},
        "spec": {"clusterQueue": "kueue-probe"},
    }
    await env.wait_webhook_effective(
        f"/apis/{API_GROUP}/{converted}/namespaces/default/localqueues",
        local_queue,
        mutated=lambda a: isinstance(a, dict) and a.get("kind") == "LocalQueue",
        timeout=timeout,
    )


# -- the process ---------------------------------------------------------------------------------


@dataclass
class KueueProcess:
    """Kueue running against ``env``: its process, ports, CA and the objects it installed."""

    env: Environment
    process: Process
    workdir: Path
    webhook_port: int
    health_port: int
    ca: TinyCA
    config: Json
    docs: list[Json] = field(default_factory=list)  # the release's manifests
    webhook_names: list[tuple[str, str]] = field(default_factory=list)  # (plural, name)
    build_seconds: float = 0.0
    install_seconds: float = 0.0
    start_seconds: float = 0.0

    @property
    def log(self) -> Path:
        return self.process.log

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    async def ready(self) -> None:
        await wait_http(self.process, f"http://127.0.0.1:{self.health_port}/readyz", timeout=READY_TIMEOUT)

    async def start(self) -> None:
        """Start the process, wait for its ``/readyz``, install the webhook configurations and
        wait until the API server calls them; stopped again when any of that fails."""
        started = time.monotonic()
        self.process.start(detached=False)
        try:
            await self.ready()
            ready = time.monotonic()
            hooks = webhook_configurations(self.docs)
            hooks_file = self.workdir / "kueue-webhooks.yaml"
            hooks_file.write_text(yaml.safe_dump_all(hooks))
            names = await self.env.install_webhooks(
                [hooks_file], host="127.0.0.1", port=self.webhook_port, ca_bundle=self.ca.cert_pem
            )
            for doc, name in zip(hooks, names, strict=True):
                self.webhook_names.append((doc["kind"].lower() + "s", name))
            await wait_kueue_effective(self.env, converted=converted_version(self.docs))
        except BaseException:
            await self.stop()
            raise
        self.start_seconds = time.monotonic() - started
        _say(
            f"CRDs served in {self.install_seconds:.1f}s, /readyz {ready - started:.1f}s after the "
            f"start, webhooks called {time.monotonic() - ready:.1f}s after that"
        )

    async def remove_webhooks(self) -> None:
        for plural, name in self.webhook_names:
            await self.env.request("DELETE", f"/apis/admissionregistration.k8s.io/v1/{plural}/{name}")
        self.webhook_names.clear()

    async def stop(self) -> int | None:
        """Remove the webhook configurations (the API server would refuse every Pod, Job and
        JobSet while they point at nothing), then SIGTERM the process; returns its exit code."""
        with contextlib.suppress(Exception):
            await self.remove_webhooks()
        self.process.stop(timeout=15)
        return self.process.exited()


def _prepare(workdir: Path, level: ApiLevel) -> tuple[Path, float, list[Json], TinyCA, Path]:
    """What blocks: the build (minutes, once), the manifests, the certificates."""
    binary, build_seconds = build(level)
    if build_seconds:
        main = kueue_main(level)
        _say(f"built {main.name} {main.version} in {build_seconds:.0f}s")
    docs = manifests(level)
    ensure_metrics_certificate()
    workdir.mkdir(parents=True, exist_ok=True)
    ca = TinyCA("kueue-webhook-ca")
    certs = workdir / "webhook-certs"
    certs.mkdir(exist_ok=True)
    ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        certs / "tls.crt", certs / "tls.key"
    )
    return binary, build_seconds, docs, ca, certs


async def install_kueue(
    env: Environment,
    workdir: Path,
    *,
    level: ApiLevel = UNNAMED_LEVEL,
    wait_for_pods_ready: Mapping[str, Any] | None = None,
    config_overrides: Mapping[str, Any] | None = None,
    log_level: str | None = None,
) -> KueueProcess:
    """Build (once) and configure the Kueue of ``level`` (:data:`KUEUE_VERSIONS`) for ``env``
    and install its namespace and CRDs (served
    when this returns, conversion pointed at the port Kueue will listen on); not started yet:
    :meth:`KueueProcess.start`. Its CRDs are large (the Workload CRD is 1.6 MB, two versions of a
    pod template each), so a caller may overlap this with starting its own manager."""
    started = time.monotonic()
    binary, build_seconds, docs, ca, certs = await asyncio.to_thread(_prepare, workdir, level)
    webhook_port, health_port = free_port(), free_port()
    await env.apply(
        f"/api/v1/namespaces/{NAMESPACE}",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
    )
    crd_file = workdir / "kueue-crds.yaml"
    crd_file.write_text(yaml.safe_dump_all(crds(docs, f"https://127.0.0.1:{webhook_port}", ca.cert_pem)))
    await env.install_crds([crd_file])
    config = configuration(
        webhook_port=webhook_port,
        health_port=health_port,
        cert_dir=certs,
        wait_for_pods_ready=wait_for_pods_ready,
        overrides=config_overrides,
        frameworks=frameworks_for(level),
        controller=release_controller(docs),
    )
    config_file = workdir / "kueue-config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    argv = [str(binary), f"--config={config_file}"]
    if log_level is not None:
        argv.append(f"--zap-log-level={log_level}")
    process = Process(
        name="kueue",
        argv=argv,
        log=workdir / "kueue.log",
        extra_env={"KUBECONFIG": str(env.kubeconfig)},
    )
    kueue = KueueProcess(env, process, workdir, webhook_port, health_port, ca, config, docs=docs)
    kueue.build_seconds = build_seconds
    kueue.install_seconds = time.monotonic() - started - build_seconds
    return kueue


async def start_kueue(env: Environment, workdir: Path, **kwargs: Any) -> KueueProcess:
    """Install Kueue's CRDs and webhook configurations on ``env`` and start Kueue, ready and
    called by the API server (``install_kueue`` then ``KueueProcess.start``; ``kwargs`` are
    ``install_kueue``'s). The manager(s) serving TrainJobs and JobSets run separately."""
    kueue = await install_kueue(env, workdir, **kwargs)
    await kueue.start()
    return kueue


@contextlib.asynccontextmanager
async def running_kueue(env: Environment, workdir: Path, **kwargs: Any) -> AsyncIterator[KueueProcess]:
    """:func:`start_kueue` for the block; stopped (webhook configurations removed) after it."""
    kueue = await start_kueue(env, workdir, **kwargs)
    try:
        yield kueue
    finally:
        await kueue.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m trainer.conformance.kueue --build-only``: build (or find) Kueue and print its path."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m trainer.conformance.kueue")
    parser.add_argument("--build-only", action="store_true", help="build Kueue and render its manifests")
    parser.add_argument(
        "--level",
        action="append",
        choices=sorted(levels.LEVELS),
        help="the API level(s) whose Kueue release to build (repeatable; default: every level)",
    )
    args = parser.parse_args(argv)
    if not args.build_only:
        parser.error("only --build-only is supported; the e2e suite is test/e2e/kueue")
    for name in args.level or list(levels.LEVELS):
        level = levels.get(name)
        binary, seconds = build(level)
        manifests(level)
        print(f"level {name}: {binary} ({f'built in {seconds:.0f}s' if seconds else 'cached'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
