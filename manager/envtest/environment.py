"""A real local control plane: etcd + kube-apiserver, and in full mode the controller-manager,
the scheduler and KWOK with fake nodes, so Jobs create Pods that run to completion.

``Environment`` is an async context manager for tests and tools in this process. The CLI
(``python -m manager.envtest up``) starts the same processes detached and records them in
``DIR/envtest.json`` so ``down`` can stop exactly those processes later.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import json
import os
import shutil
import ssl
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from manager.envtest import assets, kwokstages, realnode
from manager.envtest.certs import KeyPair, TinyCA, key_pem, public_key_pem
from manager.envtest.errors import EnvtestError, StartError
from manager.envtest.process import Process, free_port, pid_alive, pid_executable, stop_pid, wait_http
from manager.meta.object import Json

STATE_FILE = "envtest.json"
KUBECONFIG_FILE = "kubeconfig"
SECONDARY_SCHEDULER_PROFILES = ("scheduler-plugins-scheduler", "volcano")
_START_ATTEMPTS = 3
POD_RUN_SECONDS_ENV = "ENVTEST_POD_RUN_SECONDS"
"""Environment variable: the default of ``Environment(pod_run_seconds=...)`` (KWOK pod run time)."""
POD_START_SECONDS_ENV = "ENVTEST_POD_START_SECONDS"
"""Environment variable: the default of ``Environment(pod_start_seconds=...)``."""
POD_PROBE_DELAYS_ENV = "ENVTEST_POD_PROBE_DELAYS"
"""Environment variable: the default of ``Environment(pod_probe_delays=...)`` (``1``/``true``)."""


def _timeout(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


@dataclass
class ControlPlaneInfo:
    """What a running control plane looks like from outside: enough for `down` and for tests."""

    dir: str
    owns_dir: bool
    url: str
    etcd_url: str
    kubeconfig: str
    full: bool
    nodes: list[str]
    processes: list[Json] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    real_node: Json | None = None
    """The real node's recorded state (``realnode.NodeState``), when there is one."""


class Environment:
    """Start etcd and kube-apiserver (plus, with ``full=True``, kube-controller-manager,
    kube-scheduler and KWOK with ``nodes`` fake nodes) on free loopback ports.

    ``directory`` holds certificates, logs, etcd data and the admin kubeconfig; a temporary
    directory is used (and removed) when none is given.
    """

    def __init__(
        self,
        directory: Path | str | None = None,
        *,
        full: bool = False,
        nodes: int = 1,
        crd_paths: Iterable[Path | str] = (),
        detached: bool = False,
        keep_dir: bool = False,
        pod_run_seconds: float | None = None,
        pod_run_jitter_seconds: float = 0.0,
        pod_start_seconds: float | None = None,
        pod_probe_delays: bool | None = None,
        kwok_args: Iterable[str] = (),
        controller_manager_args: Iterable[str] = (),
        real_node: bool = False,
        service_accounts: bool = False,
    ) -> None:
        if real_node and not full:
            raise ValueError("a real node needs a full environment (full=True)")
        self.full = full
        self.real_node = real_node
        """Also run one real kubelet node (containerd, kube-proxy), tainted ``realnode.TAINT_KEY``
        so only pods that tolerate it run there (``realnode``; docs/realnode.md)."""
        self.node: realnode.RealNode | None = None
        self.node_ip = ""
        self.service_accounts = service_accounts or real_node
        """The API server's ServiceAccount admission plugin on, as in any cluster: each pod gets
        its namespace's ServiceAccount (``default`` unless it names one; the controller-manager
        creates it) and that account's token volume. Off by default (KWOK pods need no token, and
        a pod is then admitted before its namespace's account exists); a real node turns it on."""
        # Extra flags, after the defaults (the last of a repeated flag wins): a large simulated
        # cluster renews node leases less often and keeps its nodes Ready meanwhile.
        self.kwok_args = list(kwok_args)
        self.controller_manager_args = list(controller_manager_args)
        if pod_run_seconds is None and os.environ.get(POD_RUN_SECONDS_ENV):
            pod_run_seconds = float(os.environ[POD_RUN_SECONDS_ENV])
        if pod_start_seconds is None:
            pod_start_seconds = float(os.environ.get(POD_START_SECONDS_ENV) or 0)
        if pod_probe_delays is None:
            pod_probe_delays = os.environ.get(POD_PROBE_DELAYS_ENV, "").lower() in ("1", "true", "yes")
        if pod_run_seconds is None and (pod_start_seconds or pod_probe_delays):
            pod_run_seconds = 0.0  # our stages (KWOK's own know no start time), Job pods end at once
        if pod_run_seconds is not None:  # a bad value fails here
            kwokstages.pod_stages(
                pod_run_seconds,
                pod_run_jitter_seconds,
                start_seconds=pod_start_seconds,
                probe_delays=pod_probe_delays,
            )
        self.pod_run_seconds = pod_run_seconds
        """With KWOK: how long a Job's pod stays Running before it succeeds (None: KWOK's default,
        about at once); ``pod_run_jitter_seconds`` adds a random part up to that much."""
        self.pod_run_jitter_seconds = pod_run_jitter_seconds
        self.pod_start_seconds = pod_start_seconds
        """With KWOK stages: how long a scheduled pod stays Pending before it runs (image pulls)."""
        self.pod_probe_delays = pod_probe_delays
        """With KWOK stages: a pod with readiness/startup probes is Ready after their initial delay."""
        self.node_count = nodes if full else 0
        self.crd_paths = [Path(p) for p in crd_paths]
        self.detached = detached
        self.keep_dir = keep_dir or bool(os.environ.get("KEEP_CONTROL_PLANE"))
        self._given_dir = Path(directory) if directory is not None else None
        self.dir = self._given_dir or Path(tempfile.mkdtemp(prefix="envtest-"))
        self.owns_dir = self._given_dir is None or not self._given_dir.exists()
        self.processes: list[Process] = []
        self.written: list[Path] = []
        self.url = ""
        self.etcd_url = ""
        self.node_names: list[str] = []
        self.serving_ca = TinyCA("envtest-serving-ca")
        self.client_ca = TinyCA("envtest-client-ca")
        self.admin: KeyPair = self.client_ca.issue_client("admin", ["system:masters"])
        self._atexit_registered = False

    @classmethod
    def attach(cls, directory: Path | str) -> Environment:
        """An Environment for a control plane already running in ``directory`` (started by
        ``up``): its API helpers work, and it does not stop what it did not start."""
        state = Path(directory) / STATE_FILE
        if not state.exists():
            raise EnvtestError(f"no control plane recorded in {directory}")
        info = json.loads(state.read_text())
        env = cls(directory, full=info["full"], detached=True, keep_dir=True)
        env.owns_dir = False
        env.url, env.etcd_url, env.node_names = info["url"], info["etcd_url"], info["nodes"]
        return env

    # -- paths -------------------------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        return self.dir / KUBECONFIG_FILE

    def _file(self, name: str) -> Path:
        path = self.dir / name
        if path not in self.written:
            self.written.append(path)
        return path

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Environment:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def start(self) -> None:
        # off the loop: a first build takes minutes, and whatever else runs on the loop (another
        # cluster starting, a manager's readiness wait) must not stand still meanwhile
        binaries = await asyncio.to_thread(assets.ensure, assets.FULL if self.full else assets.PLAIN)
        if self.real_node:
            if os.geteuid() != 0:
                raise EnvtestError("a real node needs root (containerd, iptables, network namespaces)")
            await asyncio.to_thread(realnode.ensure_packages)
            await asyncio.to_thread(assets.ensure, assets.NODE)
            self.node_ip = realnode.host_ip()
        self.dir.mkdir(parents=True, exist_ok=True)
        if not self.detached and not self._atexit_registered:
            atexit.register(self._stop_processes)
            self._atexit_registered = True
        last_error: Exception | None = None
        for _ in range(_START_ATTEMPTS):
            try:
                await self._start_core(binaries)
                break
            except StartError as err:
                # A lost port race shows up as a start failure: retry on fresh ports.
                last_error = err
                self._stop_processes()
        else:
            assert last_error is not None
            raise last_error
        try:
            self._write_kubeconfig()
            await self._wait_default_namespace()
            if self.full:
                await self._start_cluster_components(binaries)
            if self.real_node:
                await self._start_real_node()
            if self.crd_paths:
                await self.install_crds(self.crd_paths)
            self._write_state()
        except BaseException:
            self._stop_processes()
            raise

    async def stop(self) -> None:
        self._stop_processes()
        self._remove_files()

    def _stop_processes(self) -> None:
        timeout = _timeout("KUBEBUILDER_CONTROLPLANE_STOP_TIMEOUT", 20)
        problems: list[str] = []
        if self.node is not None:
            # Before the control plane: the node's pods, containerd, network and mounts.
            problems = self.node.stop()
            self.node = None
        for proc in reversed(self.processes):
            proc.stop(timeout=timeout)
        self.processes.clear()
        if problems:  # raised after the processes stopped; the directory is kept (mounts may remain)
            raise EnvtestError("the real node left something behind: " + "; ".join(problems))

    def _remove_files(self) -> None:
        if self.keep_dir:
            return
        if self.owns_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            return
        for path in reversed(self.written):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    # -- etcd and kube-apiserver -------------------------------------------------------------

    async def _start_core(self, binaries: Mapping[str, Path]) -> None:
        client_port, peer_port, api_port = free_port(), free_port(), free_port()
        data_dir = self._file("etcd-data")
        shutil.rmtree(data_dir, ignore_errors=True)
        self.etcd_url = f"http://127.0.0.1:{client_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        etcd = self._spawn(
            "etcd",
            [
                str(binaries["etcd"]),
                "--name=envtest",
                f"--data-dir={data_dir}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=envtest={peer_url}",
                "--initial-cluster-state=new",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        await wait_http(etcd, f"{self.etcd_url}/health", timeout=30)

        ips, dns = ["127.0.0.1"], ["localhost"]
        if self.real_node:  # pods reach it as the `kubernetes` Service (its first IP), at the node IP
            ips += [self.node_ip, SERVICE_CIDR_FIRST_IP]
            dns += [
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ]
        serving = self.serving_ca.issue_server("localhost", ips=ips, dns=dns)
        serving.write(self._file("apiserver.crt"), self._file("apiserver.key"))
        self._file("serving-ca.crt").write_bytes(self.serving_ca.cert_pem)
        self._file("client-ca.crt").write_bytes(self.client_ca.cert_pem)
        self.admin.write(self._file("admin.crt"), self._file("admin.key"))
        sa_key = TinyCA("envtest-sa-signer").key
        self._file("sa.key").write_bytes(key_pem(sa_key))
        self._file("sa.pub").write_bytes(public_key_pem(sa_key))
        cert_dir = self._file("apiserver-certs")
        cert_dir.mkdir(exist_ok=True)

        self.url = f"https://127.0.0.1:{api_port}"
        api = self._spawn(
            "kube-apiserver",
            [
                str(binaries["kube-apiserver"]),
                f"--etcd-servers={self.etcd_url}",
                f"--bind-address={'0.0.0.0' if self.real_node else '127.0.0.1'}",
                f"--advertise-address={self.node_ip or '127.0.0.1'}",
                f"--secure-port={api_port}",
                f"--cert-dir={cert_dir}",
                f"--tls-cert-file={self.dir / 'apiserver.crt'}",
                f"--tls-private-key-file={self.dir / 'apiserver.key'}",
                f"--client-ca-file={self.dir / 'client-ca.crt'}",
                "--authorization-mode=RBAC",
                # A real node runs real pods: they get their ServiceAccount token volume, as in
                # any cluster (the plugin then wants each namespace's ServiceAccount to exist).
                *([] if self.service_accounts else ["--disable-admission-plugins=ServiceAccount"]),
                # The real node's name resolves nowhere: logs and exec go to its InternalIP.
                *(["--kubelet-preferred-address-types=InternalIP"] if self.real_node else []),
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                f"--service-account-issuer={self.url}/",
                f"--service-account-key-file={self.dir / 'sa.pub'}",
                f"--service-account-signing-key-file={self.dir / 'sa.key'}",
            ],
        )
        await wait_http(
            api,
            f"{self.url}/readyz",
            context=self.ssl_context(client_cert=False),
            timeout=_timeout("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT", 90),
        )

    def process(self, name: str) -> Process:
        """The running process called ``name`` (``etcd``, ``kube-apiserver``, ``kwok``, ...)."""
        for proc in self.processes:
            if proc.name == name:
                return proc
        raise EnvtestError(f"no process {name!r} in this environment")

    async def restart_apiserver(self, *, kill: bool = True, down_seconds: float = 0.0) -> float:
        """Stop kube-apiserver (SIGKILL with ``kill``, else a graceful stop), keep it down for
        ``down_seconds``, start it again with the same flags (same port, same etcd, same
        certificates) and wait until it is ready; returns how long it was unreachable."""
        proc = self.process("kube-apiserver")
        start = time.monotonic()
        if kill:
            await asyncio.to_thread(proc.kill)
        else:
            await asyncio.to_thread(proc.stop, _timeout("KUBEBUILDER_CONTROLPLANE_STOP_TIMEOUT", 20))
        if down_seconds > 0:
            await asyncio.sleep(down_seconds)
        proc.start(detached=self.detached)
        await wait_http(
            proc,
            f"{self.url}/readyz",
            context=self.ssl_context(client_cert=False),
            timeout=_timeout("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT", 90),
        )
        return time.monotonic() - start

    async def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (physically), as its periodic
        compaction does: a watch or a list asking for an older resourceVersion is then answered
        410 Gone (``too old resource version``) once kube-apiserver's cache cannot serve it.
        Returns the revision compacted to."""
        async with aiohttp.ClientSession() as session:
            async with session.post(
                f"{self.etcd_url}/v3/kv/range", json={"key": base64.b64encode(b"/").decode()}
            ) as r:
                if r.status != 200:
                    raise EnvtestError(f"etcd range answered {r.status}: {await r.text()}")
                revision = int((await r.json())["header"]["revision"])
            async with session.post(
                f"{self.etcd_url}/v3/kv/compaction", json={"revision": str(revision), "physical": True}
            ) as r:
                if r.status != 200:
                    raise EnvtestError(f"etcd compaction answered {r.status}: {await r.text()}")
        return revision

    def _spawn(self, name: str, argv: list[str]) -> Process:
        proc = Process(name=name, argv=argv, log=self._file(f"{name}.log"))
        proc.start(detached=self.detached)
        self.processes.append(proc)
        return proc

    def ssl_context(self, *, client_cert: bool = True) -> ssl.SSLContext:
        """TLS context trusting this apiserver, authenticated as admin when ``client_cert``."""
        ctx = ssl.create_default_context(cafile=str(self.dir / "serving-ca.crt"))
        if client_cert:
            ctx.load_cert_chain(self.dir / "admin.crt", self.dir / "admin.key")
        return ctx

    def _write_kubeconfig(self) -> None:
        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "envtest",
                    "cluster": {
                        "server": self.url,
                        "certificate-authority-data": b64(self.serving_ca.cert_pem),
                    },
                }
            ],
            "users": [
                {
                    "name": "envtest",
                    "user": {
                        "client-certificate-data": b64(self.admin.cert),
                        "client-key-data": b64(self.admin.key),
                    },
                }
            ],
            "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": "envtest"}}],
            "current-context": "envtest",
        }
        path = self._file(KUBECONFIG_FILE)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)

    async def _wait_default_namespace(self) -> None:
        deadline = time.monotonic() + 30
        while True:
            status, _ = await self.request("GET", "/api/v1/namespaces/default")
            if status == 200:
                return
            if time.monotonic() > deadline:
                raise StartError("kube-apiserver", "namespace 'default' was not created within 30s")
            await asyncio.sleep(0.1)

    # -- controller-manager, scheduler, KWOK -------------------------------------------------

    def _serving_flags(self, port: int, cert_dir: str) -> list[str]:
        """How the controller-manager and the scheduler serve /healthz and /metrics: on
        127.0.0.1:``port`` with self-signed certificates, checking requests against this API
        server, health paths open to all."""
        certs = self._file(cert_dir)
        certs.mkdir(exist_ok=True)
        return [
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={certs}",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        ]

    async def _start_cluster_components(self, binaries: Mapping[str, Path]) -> None:
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        kcm_port = free_port()
        kcm = self._spawn(
            "kube-controller-manager",
            [
                str(binaries["kube-controller-manager"]),
                f"--kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                *self._serving_flags(kcm_port, "kcm-certs"),
                f"--root-ca-file={self.dir / 'serving-ca.crt'}",
                f"--service-account-private-key-file={self.dir / 'sa.key'}",
                "--controllers=*",
                "--kube-api-qps=500",
                "--kube-api-burst=1000",
                "--concurrent-job-syncs=10",
                *self.controller_manager_args,
            ],
        )

        sched_port = free_port()
        sched_config = self._file("scheduler-config.yaml")
        sched_config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "clientConnection": {"kubeconfig": str(self.kubeconfig), "qps": 500, "burst": 1000},
                    "leaderElection": {"leaderElect": False},
                    # Pods of gang-scheduled jobs name these schedulers; the default plugins
                    # schedule them (without gang semantics) so e2e tests still run.
                    "profiles": [{"schedulerName": "default-scheduler"}]
                    + [{"schedulerName": n} for n in SECONDARY_SCHEDULER_PROFILES],
                }
            )
        )
        sched = self._spawn(
            "kube-scheduler",
            [
                str(binaries["kube-scheduler"]),
                f"--config={sched_config}",
                *self._serving_flags(sched_port, "scheduler-certs"),
            ],
        )

        kwok_args = [
            str(binaries["kwok"]),
            f"--kubeconfig={self.kubeconfig}",
            # With a real node, KWOK keeps to its own nodes (the kubelet runs the real one).
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake"
            if self.real_node
            else "--manage-all-nodes=true",
            "--cidr=10.244.0.1/16",
            "--node-ip=10.243.0.1",
            "--node-lease-duration-seconds=40",
        ]
        if self.pod_run_seconds is not None:
            kwok_config = self._file("kwok-stages.yaml")
            stages = kwokstages.pod_stages(
                self.pod_run_seconds,
                self.pod_run_jitter_seconds,
                start_seconds=self.pod_start_seconds,
                probe_delays=self.pod_probe_delays,
            )
            kwok_config.write_text(yaml.safe_dump_all(stages, sort_keys=False))
            kwok_args.append(f"--config={kwok_config}")
        kwok = self._spawn("kwok", [*kwok_args, *self.kwok_args])
        await wait_http(kcm, f"https://127.0.0.1:{kcm_port}/healthz", context=insecure, timeout=60)
        await wait_http(sched, f"https://127.0.0.1:{sched_port}/healthz", context=insecure, timeout=60)
        await self._create_fake_nodes(kwok)

    async def _create_fake_nodes(self, kwok: Process) -> None:
        self.node_names = [f"kwok-node-{i}" for i in range(self.node_count)]
        for name in self.node_names:
            node = kwok_node(name, NODE_RESOURCES, {"kubernetes.io/role": "agent"})
            status, body = await self.request("POST", "/api/v1/nodes", node)
            if status not in (201, 409):
                raise StartError("kwok", f"creating node {name} answered {status}: {body!r}")
        deadline = time.monotonic() + 90
        while True:
            if (code := kwok.exited()) is not None:
                raise kwok.failure(f"exited with code {code}")
            status, body = await self.request("GET", "/api/v1/nodes?labelSelector=type%3Dkwok")
            ready = set()
            if status == 200:
                for item in body.get("items", []):
                    conditions = item.get("status", {}).get("conditions", [])
                    taints = item.get("spec", {}).get("taints", [])
                    is_ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
                    not_ready_taint = any(
                        t.get("key", "").startswith("node.kubernetes.io/not-") for t in taints
                    )
                    if is_ready and not not_ready_taint:
                        ready.add(item["metadata"]["name"])
            if ready >= set(self.node_names):
                return
            if time.monotonic() > deadline:
                raise kwok.failure(f"nodes not Ready and untainted after 90s (ready: {sorted(ready)})")
            await asyncio.sleep(0.2)

    # -- the real node -----------------------------------------------------------------------

    async def _start_real_node(self) -> None:
        node = realnode.RealNode(self._file("real-node"), REAL_NODE_NAME, self.node_ip)
        self.node = node
        await node.start(
            self._spawn, kubeconfig=self.kubeconfig, client_ca=self.dir / "client-ca.crt", wait_http=wait_http
        )
        deadline = time.monotonic() + _timeout("ENVTEST_REAL_NODE_TIMEOUT", 180)
        conditions: list[Json] = []
        while True:
            for proc in node.processes:
                if (code := proc.exited()) is not None:
                    raise proc.failure(f"exited with code {code} before the node was Ready")
            status, body = await self.request("GET", f"/api/v1/nodes/{REAL_NODE_NAME}")
            conditions = body.get("status", {}).get("conditions", []) if status == 200 else []
            if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                return
            if time.monotonic() > deadline:
                raise node.processes[1].failure(f"node {REAL_NODE_NAME} not Ready ({conditions})")
            await asyncio.sleep(0.5)

    def import_image(self, archive: bytes | Path) -> None:
        """Import an image archive (OCI layout, ``podman save``) into the real node's containerd."""
        if self.node is None:
            raise EnvtestError("this environment has no real node")
        self.node.import_image(archive)

    # -- API helpers -------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        body: object = None,
        *,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> tuple[int, Any]:
        """One authenticated admin request; returns the status and the decoded JSON body."""
        data = json.dumps(body) if body is not None else None
        connector = aiohttp.TCPConnector(ssl=self.ssl_context())
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.request(
                method,
                self.url + path,
                data=data,
                headers={"Content-Type": content_type, "Accept": accept},
                # Generous: two control planes starting side by side on a loaded 2-core machine
                # have answered an admin request after more than 30 s.
                timeout=aiohttp.ClientTimeout(total=120),
            ) as response,
        ):
            return await decoded_response(response)

    async def service_account_token(
        self, namespace: str, name: str, *, expiration_seconds: int = 3600
    ) -> str:
        """A bearer token of the ServiceAccount ``namespace/name`` (created if absent), from a
        TokenRequest, as the kubelet projects one into a Pod."""
        status, body = await self.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
        )
        if status not in (201, 409):
            raise EnvtestError(f"creating ServiceAccount {namespace}/{name} answered {status}: {body}")
        status, body = await self.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": expiration_seconds},
            },
        )
        if status != 201:
            raise EnvtestError(f"a TokenRequest for {namespace}/{name} answered {status}: {body}")
        return str(body["status"]["token"])

    async def install_crds(self, paths: Iterable[Path | str]) -> list[str]:
        """Apply every CRD found in the files or directories and wait until each is served as
        applied (``_wait_crd_served``: also when it replaces a CRD of the same name)."""
        crds = [doc for doc in _load_documents(paths) if doc.get("kind") == "CustomResourceDefinition"]
        if not crds and any(True for _ in paths):
            raise EnvtestError(f"no CustomResourceDefinition found in {list(paths)}")
        for crd in crds:
            await self.apply(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + crd["metadata"]["name"], crd
            )
        for crd in crds:
            await self._wait_crd_served(crd)
        return [crd["metadata"]["name"] for crd in crds]

    async def apply_manifests(self, paths: Iterable[Path | str], field_manager: str = "envtest") -> list[str]:
        """Server-side apply every document in the files or directories, whatever its kind.

        The resource path is found through discovery, as kubectl does; returns ``Kind/name``s.
        Returns once every RBAC binding among them is in effect (``wait_binding_effective``).
        """
        applied: list[str] = []
        resources: dict[str, dict[str, tuple[str, bool]]] = {}
        docs = _load_documents(paths)
        for doc in docs:
            api_version, kind, meta = doc["apiVersion"], doc["kind"], doc.get("metadata", {})
            if api_version not in resources:
                base = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
                status, body = await self.request("GET", base)
                if status != 200:
                    raise EnvtestError(f"{api_version} is not served ({status}); is its CRD installed?")
                resources[api_version] = {
                    r["kind"]: (r["name"], r["namespaced"]) for r in body["resources"] if "/" not in r["name"]
                }
            if kind not in resources[api_version]:
                raise EnvtestError(f"{api_version} serves no kind {kind}")
            plural, namespaced = resources[api_version][kind]
            base = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
            namespace = f"/namespaces/{meta.get('namespace') or 'default'}" if namespaced else ""
            await self.apply(f"{base}{namespace}/{plural}/{meta['name']}", doc, field_manager)
            applied.append(f"{kind}/{meta['name']}")
        for doc in docs:
            if doc["apiVersion"] == RBAC_API and doc["kind"] in BINDING_KINDS:
                await self.wait_binding_effective(doc)
        return applied

    async def apply(self, path: str, obj: Mapping[str, object], field_manager: str = "envtest") -> Any:
        """Server-side apply (create or update in one idempotent call)."""
        status, body = await self.request(
            "PATCH",
            f"{path}?fieldManager={field_manager}&force=true",
            obj,
            content_type="application/apply-patch+yaml",
        )
        if status >= 300:
            raise EnvtestError(f"applying {path} answered {status}: {body}")
        return body

    async def wait_binding_effective(self, binding: Mapping[str, Any], *, timeout: float = 30.0) -> None:
        """Wait until the API server authorizes what a RoleBinding or ClusterRoleBinding grants.

        The RBAC authorizer reads bindings and roles from informers, so a request sent right
        after the write may still be denied. Each subject is asked, by SubjectAccessReview, for
        the first rule of the bound role; the wait ends when every answer is allowed. A binding
        whose role does not exist (yet) grants nothing to wait for.
        """
        meta = binding.get("metadata", {})
        namespace = (meta.get("namespace") or "default") if binding["kind"] == "RoleBinding" else None
        role_ref = binding["roleRef"]
        role_path = (
            f"/apis/{RBAC_API}/clusterroles/{role_ref['name']}"
            if role_ref["kind"] == "ClusterRole"
            else f"/apis/{RBAC_API}/namespaces/{namespace}/roles/{role_ref['name']}"
        )
        status, role = await self.request("GET", role_path)
        if status == 404 or not (role.get("rules") if status == 200 else None):
            return
        if status != 200:
            raise EnvtestError(f"reading {role_path} answered {status}: {role}")
        attributes = _review_attributes(role["rules"][0], namespace)
        deadline = time.monotonic() + timeout
        for subject in binding.get("subjects") or []:
            user, groups = _subject_identity(subject, namespace)
            review = {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {"user": user, "groups": groups, **attributes},
            }
            while True:
                status, body = await self.request(
                    "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review
                )
                if status == 201 and body["status"].get("allowed"):
                    break
                if time.monotonic() > deadline:
                    raise EnvtestError(
                        f"{binding['kind']} {meta.get('name')} not in effect after {timeout:.0f}s: "
                        f"{user or groups} still denied {attributes} ({status}: {body.get('status', body)})"
                    )
                await asyncio.sleep(0.05)

    async def wait_webhook_effective(
        self,
        path: str,
        probe: Mapping[str, Any],
        *,
        denied_by: str | None = None,
        mutated: Callable[[Any], bool] | None = None,
        timeout: float = 60.0,
    ) -> None:
        """Wait until the API server calls an admission webhook whose configuration was just written.

        The API server's admission plugins read Validating and MutatingWebhookConfigurations
        from informers, so a create sent right after the configuration is applied can pass
        unchecked (or fail calling a server that is not listening yet). ``probe`` is created at
        the collection ``path`` with ``dryRun=All`` (nothing is stored: the webhook must say
        ``sideEffects: None``) until the answer shows the webhook acted: a refusal by the webhook
        named ``denied_by`` (``admission webhook "<name>" denied the request``), or, with
        ``mutated``, an admitted object for which ``mutated(object)`` holds. The webhooks of one
        configuration object take effect together, so one probe per configuration suffices.
        """
        if (denied_by is None) == (mutated is None):
            raise ValueError("wait_webhook_effective needs exactly one of denied_by and mutated")
        expected = f'refused by webhook "{denied_by}"' if denied_by is not None else "mutated"
        dry_run = f"{path}{'&' if '?' in path else '?'}dryRun=All"
        deadline = time.monotonic() + timeout
        while True:
            status, body = await self.request("POST", dry_run, probe)
            if denied_by is not None:
                message = str(body.get("message", "")) if isinstance(body, dict) else str(body)
                if status >= 400 and f'admission webhook "{denied_by}" denied the request' in message:
                    return
            elif mutated is not None and status in (200, 201) and mutated(body):
                return
            if time.monotonic() > deadline:
                raise EnvtestError(
                    f"a dry-run create at {path} was not {expected} within {timeout:.0f}s "
                    f"(last answer {status}: {body})"
                )
            await asyncio.sleep(0.1)

    async def _wait_crd_served(self, crd: Mapping[str, Any], timeout: float = 30.0) -> None:
        """Until every served version is in discovery and its objects are listed with the applied
        CRD's printer columns. The API server builds a CRD's handler (schema, pruning, columns)
        from its informer and rebuilds it a moment after an update: a CRD that replaces one of the
        same name is in discovery at once, but served by the old schema until then."""
        spec = crd["spec"]
        plural = spec["names"]["plural"]
        deadline = time.monotonic() + timeout
        for version in (v for v in spec["versions"] if v.get("served", True)):
            base = f"/apis/{spec['group']}/{version['name']}"
            # The API server lists Name, then the printer columns (Age if there are none).
            expected = ["Name"] + [
                c["name"] for c in version.get("additionalPrinterColumns") or [{"name": "Age"}]
            ]
            columns: Any = None
            while True:
                status, body = await self.request("GET", base)
                if status == 200 and any(r["name"] == plural for r in body.get("resources", [])):
                    status, table = await self.request("GET", f"{base}/{plural}?limit=1", accept=TABLE)
                    columns = (
                        [c["name"] for c in table.get("columnDefinitions", [])] if status == 200 else table
                    )
                    if columns == expected:
                        break
                if time.monotonic() > deadline:
                    raise EnvtestError(
                        f"CRD {crd['metadata']['name']} not served at {version['name']} as applied after "
                        f"{timeout:.0f}s (columns {columns}, expected {expected})"
                    )
                await asyncio.sleep(0.1)

    async def install_webhooks(
        self, paths: Iterable[Path | str], *, host: str, port: int, ca_bundle: bytes
    ) -> list[str]:
        """Apply admission webhook configurations, pointing every webhook at ``https://host:port``.

        As envtest does, each ``clientConfig.service`` becomes a URL with the same path, and the
        ``caBundle`` is injected. Returns once the configurations are stored, not once the API
        server calls them: wait for that with ``wait_webhook_effective``.
        """
        names = []
        for doc in _load_documents(paths):
            kind = doc.get("kind")
            if kind not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
                continue
            for hook in doc.get("webhooks", []):
                client = hook.setdefault("clientConfig", {})
                service = client.pop("service", None)
                path = (service or {}).get("path", "")
                if service is not None:
                    client["url"] = f"https://{host}:{port}{path}"
                client["caBundle"] = base64.b64encode(ca_bundle).decode()
            plural = (
                "mutatingwebhookconfigurations"
                if kind.startswith("Mutating")
                else "validatingwebhookconfigurations"
            )
            name = doc["metadata"]["name"]
            await self.apply(f"/apis/admissionregistration.k8s.io/v1/{plural}/{name}", doc)
            names.append(name)
        return names

    # -- state for the CLI -------------------------------------------------------------------

    def info(self) -> ControlPlaneInfo:
        return ControlPlaneInfo(
            dir=str(self.dir),
            owns_dir=self.owns_dir,
            url=self.url,
            etcd_url=self.etcd_url,
            kubeconfig=str(self.kubeconfig),
            full=self.full,
            nodes=self.node_names,
            processes=[
                {"name": p.name, "pid": p.pid, "exe": pid_executable(p.pid), "log": str(p.log)}
                for p in self.processes
            ],
            written=[str(p) for p in self.written],
            real_node=asdict(self.node.state) if self.node is not None else None,
        )

    def _write_state(self) -> None:
        state = self._file(STATE_FILE)
        state.write_text(json.dumps(self.info().__dict__, indent=2))


REAL_NODE_NAME = "envtest-real-node"
"""The name of the real node of an ``Environment(real_node=True)``."""
SERVICE_CIDR = "10.0.0.0/24"
SERVICE_CIDR_FIRST_IP = "10.0.0.1"
"""The ClusterIP of the ``kubernetes`` Service."""

NODE_RESOURCES = {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}
"""Capacity (and allocatable) of each fake node of a full ``Environment``."""


async def decoded_response(response: aiohttp.ClientResponse) -> tuple[int, Any]:
    """The status and the body of an API server answer: its JSON, or the raw text when it is not
    JSON (``/readyz`` and pod logs answer plain text), None when empty."""
    text = await response.text()
    try:
        decoded = json.loads(text) if text else None
    except json.JSONDecodeError:
        decoded = text
    return response.status, decoded


def kwok_node(name: str, resources: Mapping[str, str], labels: Mapping[str, str] | None = None) -> Json:
    """A fake Node that KWOK manages (label ``type=kwok``): ``resources`` are both its capacity
    and its allocatable; ``labels`` join the hostname/os/arch labels a kubelet sets."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **(labels or {}),
            },
        },
        "status": {"allocatable": dict(resources), "capacity": dict(resources)},
    }


RBAC_API = "rbac.authorization.k8s.io/v1"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
"""The Accept header of a Table answer (what ``kubectl get`` prints)."""
BINDING_KINDS = ("RoleBinding", "ClusterRoleBinding")


def _review_attributes(rule: Mapping[str, Any], namespace: str | None) -> dict[str, Any]:
    """A SubjectAccessReview's attributes for one request the RBAC rule allows."""
    verb = rule["verbs"][0]
    if urls := rule.get("nonResourceURLs"):
        return {"nonResourceAttributes": {"path": urls[0].rstrip("*") or "/", "verb": verb}}
    resource, _, subresource = rule["resources"][0].partition("/")
    attributes: dict[str, Any] = {"verb": verb, "group": rule.get("apiGroups", [""])[0], "resource": resource}
    if subresource:
        attributes["subresource"] = subresource
    if names := rule.get("resourceNames"):
        attributes["name"] = names[0]
    if namespace:
        attributes["namespace"] = namespace
    return {"resourceAttributes": attributes}


def _subject_identity(subject: Mapping[str, Any], namespace: str | None) -> tuple[str, list[str]]:
    """The user and groups the API server authenticates a binding's subject as."""
    kind, name = subject["kind"], subject["name"]
    if kind == "ServiceAccount":
        sa_namespace = subject.get("namespace") or namespace or "default"
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{sa_namespace}", "system:authenticated"]
        return f"system:serviceaccount:{sa_namespace}:{name}", groups
    if kind == "Group":
        return "", [name]
    return name, ["system:authenticated"]


def _load_documents(paths: Iterable[Path | str]) -> list[dict[str, Any]]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))
        elif path.is_file():
            files.append(path)
        else:
            raise EnvtestError(f"manifest path {path} does not exist")
    docs: list[dict[str, Any]] = []
    for file in files:
        docs += [d for d in yaml.safe_load_all(file.read_text()) if _is_object(d)]
    return docs


def _is_object(doc: object) -> bool:
    """A Kubernetes object, not an empty document or a kustomize build file beside the manifests."""
    if not isinstance(doc, dict):
        return False
    return not str(doc.get("apiVersion", "")).startswith("kustomize.config.k8s.io/")


def stop_detached(directory: Path | str) -> ControlPlaneInfo | None:
    """Stop what ``up`` started in ``directory`` and remove what it wrote; None if nothing ran."""
    state_path = Path(directory) / STATE_FILE
    if not state_path.exists():
        return None
    info = ControlPlaneInfo(**json.loads(state_path.read_text()))
    node = info.real_node or (lambda s: asdict(s) if s else None)(
        realnode.load_state(Path(info.dir) / "real-node")
    )
    problems = realnode.cleanup(realnode.NodeState(**node)) if node is not None else []
    for proc in reversed(info.processes):
        pid = int(proc["pid"])
        # Never signal a pid that the kernel has since handed to another program.
        if pid_alive(pid) and pid_executable(pid) == proc["exe"]:
            stop_pid(pid, timeout=_timeout("KUBEBUILDER_CONTROLPLANE_STOP_TIMEOUT", 20))
    if problems:  # the directory is kept: something of the node may still be mounted there
        raise EnvtestError("the real node left something behind: " + "; ".join(problems))
    if info.owns_dir:
        shutil.rmtree(info.dir, ignore_errors=True)
    else:
        for written in reversed(info.written):
            path = Path(written)
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
    return info
