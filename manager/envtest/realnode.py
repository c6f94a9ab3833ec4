"""A real kubelet node for a full local cluster (``Environment(full=True, real_node=True)``).

Beside KWOK's fake nodes, one node runs pods for real: kubelet and kube-proxy built from
``k8s.io/kubernetes`` at the control plane's version (the ``node`` piece of the asset cache),
Debian's containerd and runc, the CNI ``bridge`` and ``host-local`` plugins. What it needs and
why (docs/realnode.md has the whole story):

* containerd is started by us with its own root, state, socket and CRI config, so nothing of a
  system containerd is used or changed. ``restrict_oom_score_adj = true``: the kubelet asks for
  a lower oom_score_adj than containerd's, which needs CAP_SYS_RESOURCE, which root lacks on
  these machines (runc then fails every sandbox with ``can't get final child's PID from pipe``).
* The pause image (the sandbox of every pod) is a static Go binary that waits for SIGTERM, built
  once into the Go cache and imported as ``localhost/envtest/pause:<digest>``: no registry.
* The node is tainted ``envtest/real-node=true:NoSchedule`` and labelled
  ``envtest/real-node=true``: only pods that tolerate the taint run there, everything else stays
  on KWOK's nodes (which KWOK alone manages: it is started with an annotation selector).
* kube-proxy in iptables mode, so a Service's ClusterIP (from the host, the API server's webhook
  calls included, or from a pod) reaches a pod on the node. Pods reach the API server through the
  ``kubernetes`` Service: the API server listens on all addresses and advertises the node IP.
* cgroup v1 hybrid with cgroupfs, no QoS cgroups, no node allocatable enforcement, swap allowed.

Everything it changes on the host is undone by :func:`cleanup` (also run by ``down`` from the
recorded state, and after a failed start): the pods' tasks and their network namespaces,
containerd and its shims, the CNI bridge link, the CNI results cache, ``KUBE-*`` chains (kube-proxy's
and the kubelet's, both address families) and ``CNI-*`` chains of this network, the kubelet's
log links in ``/var/log/containers``, the sysctls it found, and every mount under its directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import os
import random
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from manager.envtest import assets, ociimage
from manager.envtest.errors import EnvtestError, StartError
from manager.envtest.process import Process, free_port, pid_alive, pid_executable, stop_pid

TAINT_KEY = "envtest/real-node"
"""The taint (``NoSchedule``, value ``true``) and label of the real node."""
LABEL = {TAINT_KEY: "true"}
TOLERATION = {"key": TAINT_KEY, "operator": "Equal", "value": "true", "effect": "NoSchedule"}
"""What a pod needs to run on the real node (with ``node_selector``)."""
NODE_SELECTOR = dict(LABEL)
K8S_NAMESPACE = "k8s.io"
"""containerd's namespace of CRI (the kubelet's) images and containers."""

PACKAGES = ("containerd", "runc", "containernetworking-plugins", "conntrack", "iptables")
CNI_BIN_DIR = Path("/usr/lib/cni")
SYSCTLS = (
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/route_localnet",
    "net/bridge/bridge-nf-call-iptables",
    "net/bridge/bridge-nf-call-ip6tables",
)
"""Host settings the bridge plugin, kube-proxy or the kubelet may change: put back on cleanup."""
CONTAINER_LOGS = Path("/var/log/containers")
CNI_RESULTS = Path("/var/lib/cni/results")
HOST_DIRS = (Path("/var/lib/cni/results"), Path("/var/lib/cni"), Path("/var/run/netns"), CONTAINER_LOGS)
"""Host directories containerd and the kubelet create: removed again (when empty) if they were
absent, as are the ``k8s.io`` cgroup parents runc creates."""

_PAUSE_GO = """\
// The sandbox process of every pod of an envtest real node: waits for SIGTERM or SIGINT.
package main

import (
\t"os"
\t"os/signal"
\t"syscall"
)

func main() {
\tc := make(chan os.Signal, 1)
\tsignal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
\t<-c
}
"""


def _run(argv: Sequence[str], *, check: bool = True, timeout: float = 120, **kw: Any) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise EnvtestError(
            f"{' '.join(argv)} exited {proc.returncode}: {(proc.stderr or proc.stdout)[-2000:]}"
        )
    return str(proc.stdout)


# -- host packages ------------------------------------------------------------------------------


def _installed(package: str) -> bool:
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True, check=False
    )
    return proc.returncode == 0 and proc.stdout.strip() == "install ok installed"


def ensure_packages(packages: Iterable[str] = PACKAGES) -> list[str]:
    """Install the missing Debian packages (apt-get, root only); returns what was installed."""
    if shutil.which("dpkg-query") is None:
        missing = [
            b for b in ("containerd", "runc", "ctr", "iptables", "conntrack") if shutil.which(b) is None
        ]
        if missing:
            raise EnvtestError(f"a real node needs {missing} (no dpkg here to install them)")
        return []
    missing = [p for p in packages if not _installed(p)]
    if not missing:
        return []
    if os.geteuid() != 0:
        raise EnvtestError(f"a real node needs the packages {missing}: run as root, or install them")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    lock = ["-o", "DPkg::Lock::Timeout=600"]
    _run(["apt-get", *lock, "update", "-qq"], env=env, timeout=900)
    _run(
        ["apt-get", *lock, "install", "-y", "-qq", "--no-install-recommends", *missing], env=env, timeout=1800
    )
    return missing


# -- what the node writes (pure: unit-tested) ---------------------------------------------------


@dataclass
class NodeState:
    """Everything cleanup needs, recorded in ``envtest.json`` for ``down``."""

    dir: str
    name: str
    node_ip: str
    subnet: str
    bridge: str
    network: str
    socket: str
    pause_image: str
    sysctls: dict[str, str] = field(default_factory=dict)
    processes: list[dict[str, Any]] = field(default_factory=list)
    kube_proxy: str = ""
    sandboxes: list[str] = field(default_factory=list)
    """Container ids seen at cleanup (their ``cni-loopback-<id>`` results are removed)."""
    absent_dirs: list[str] = field(default_factory=list)
    kubelet_root: str = ""
    """The kubelet's ``--root-dir`` (``kubelet_root_path``); empty: ``<dir>/kubelet/root``."""

    @property
    def gateway(self) -> str:
        return str(next(ipaddress.ip_network(self.subnet).hosts()))


def containerd_config(state: NodeState) -> str:
    """containerd 1.6's config (version 2): its own root/state/socket, the CRI plugin with our
    pause image, runc without systemd cgroups, CNI from our conf dir."""
    base = Path(state.dir) / "containerd"
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""\
version = 2
root = "{base / "root"}"
state = "{base / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{state.socket}"

[ttrpc]
  address = "{state.socket}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{base / "opt"}"

[{cri}]
  sandbox_image = "{state.pause_image}"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_cdi = false

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false

[{cri}.cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{Path(state.dir) / "cni" / "net.d"}"
  max_conf_num = 1
"""


def cni_conflist(state: NodeState) -> dict[str, Any]:
    """A bridge on the node's pod subnet, addresses from host-local (its data in our dir); no
    masquerading, portmap or firewall plugin, so no ``CNI-*`` chains are needed."""
    return {
        "cniVersion": "0.4.0",
        "name": state.network,
        "plugins": [
            {
                "type": "bridge",
                "bridge": state.bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(Path(state.dir) / "cni" / "ipam"),
                    "ranges": [[{"subnet": state.subnet, "gateway": state.gateway}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            }
        ],
    }


def kubelet_config(state: NodeState, *, port: int, healthz_port: int, client_ca: str) -> dict[str, Any]:
    base = Path(state.dir) / "kubelet"
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": state.node_ip,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        # The API server calls the kubelet (logs, exec) with no client certificate.
        "authentication": {
            "anonymous": {"enabled": True},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": client_ca},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "containerRuntimeEndpoint": f"unix://{state.socket}",
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "cgroupsPerQOS": False,
        "enforceNodeAllocatable": [],
        "podLogsDir": str(base / "pod-logs"),
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "serializeImagePulls": False,
        "maxPods": 110,
        "registerWithTaints": [{"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"}],
        "nodeStatusUpdateFrequency": "4s",
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
        "resolvConf": "",
        "makeIPTablesUtilChains": True,
    }


def kube_proxy_config(
    state: NodeState, *, kubeconfig: str, healthz_port: int, metrics_port: int
) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": kubeconfig},
        "hostnameOverride": state.name,
        "clusterCIDR": state.subnet,
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        # Leave the host's conntrack table settings as they are.
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        "iptables": {"localhostNodePorts": False, "syncPeriod": "10s", "minSyncPeriod": "0s"},
        "nodePortAddresses": [f"{state.node_ip}/32"],
    }


def iptables_cleanup(save: str, network: str) -> str:
    """The ``iptables-restore --noflush`` input that removes what a real node added, from an
    ``iptables-save`` dump: every ``KUBE-*`` chain (kube-proxy's and the kubelet's), and every
    ``CNI-*`` chain that a rule commented with this CNI network's name jumps to, with the rules
    of other chains that jump to them. Tables with nothing to remove are left out."""
    out: list[str] = []
    table = ""
    chains: list[str] = []
    rules: list[str] = []

    def flush_table() -> None:
        ours = {c for c in chains if c.startswith("KUBE-")}
        for rule in rules:
            if f'"{network}"' in rule or f"name: {network} " in rule or f'name: \\"{network}\\"' in rule:
                ours |= set(re.findall(r"-j (CNI-[\w-]+)", rule))
        if not ours:
            return
        out.append(f"*{table}")
        for rule in rules:
            chain = rule.split()[1]
            target = re.search(r"-j (\S+)", rule)
            if chain not in ours and target and target.group(1) in ours:
                out.append("-D" + rule[2:])
        out.extend(f"-F {c}" for c in sorted(ours))
        out.extend(f"-X {c}" for c in sorted(ours))
        out.append("COMMIT")

    for line in save.splitlines():
        if line.startswith("*"):
            table, chains, rules = line[1:], [], []
        elif line.startswith(":"):
            chains.append(line[1:].split()[0])
        elif line.startswith("-A "):
            rules.append(line)
        elif line == "COMMIT":
            flush_table()
    return "\n".join(out) + ("\n" if out else "")


def mounts_under(directory: str, mountinfo: str) -> list[str]:
    """Mount points under ``directory`` (from /proc/self/mountinfo), deepest first."""
    root = directory.rstrip("/") + "/"
    found = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) > 4:
            point = fields[4].encode().decode("unicode_escape")
            if point.startswith(root) or point == directory:
                found.append(point)
    return sorted(set(found), key=lambda p: (-p.count("/"), p))


def pick_subnet(used: Iterable[str], *, rng: random.Random | None = None) -> str:
    """A /24 for pods in 10.200.0.0/16 that overlaps no route or address of the host."""
    taken = [ipaddress.ip_network(u, strict=False) for u in used]
    candidates = [ipaddress.ip_network(f"10.200.{i}.0/24") for i in range(256)]
    (rng or random).shuffle(candidates)
    for net in candidates:
        if not any(net.overlaps(t) for t in taken):
            return str(net)
    raise EnvtestError("no free /24 for pods in 10.200.0.0/16")


# -- host probes --------------------------------------------------------------------------------


def host_ip(towards: str = "10.0.0.1") -> str:
    """The address the host sends from towards ``towards`` (the Service range): the node IP."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect((towards, 443))  # no packet is sent
        except OSError as err:
            raise EnvtestError(f"no route towards {towards} for a node IP: {err}") from err
        address: str = sock.getsockname()[0]
    if address.startswith("127."):
        raise EnvtestError(f"the host's route towards {towards} leaves from loopback ({address})")
    return address


def _used_networks() -> list[str]:
    nets = []
    for line in _run(["ip", "-4", "-o", "addr", "show"], check=False).splitlines():
        if m := re.search(r"inet (\S+)", line):
            nets.append(m.group(1))
    for line in _run(["ip", "-4", "route", "show"], check=False).splitlines():
        first = line.split()[0] if line.split() else ""
        if first and first != "default":
            nets.append(first if "/" in first else first + "/32")
    return nets


def _read_sysctl(name: str) -> str | None:
    try:
        return (Path("/proc/sys") / name).read_text().strip()
    except OSError:
        return None


def _write_sysctl(name: str, value: str) -> None:
    with contextlib.suppress(OSError):
        (Path("/proc/sys") / name).write_text(value + "\n")


# -- the pause image ----------------------------------------------------------------------------


def pause_binary() -> Path:
    """The pause program, built once (per content) into the Go-mains cache."""
    with tempfile.TemporaryDirectory(prefix="envtest-pause-") as src:
        Path(src, "go.mod").write_text("module envtest/pause\n\ngo 1.24\n")
        Path(src, "main.go").write_text(_PAUSE_GO)
        built, _ = assets.ensure_go_source(Path(src), "pause", quiet=True)
    return built


def pause_image_name(binary: Path) -> str:
    return f"localhost/envtest/pause:{hashlib.sha256(binary.read_bytes()).hexdigest()[:12]}"


# -- the node -----------------------------------------------------------------------------------

_SOCKET_MAX = 100  # sun_path holds 108 bytes; containerd adds ".ttrpc"


def _socket_path(preferred: Path, suffix: str) -> str:
    """containerd's socket in the node's directory, or in /run when that path is too long for a
    unix socket (removed by cleanup there)."""
    if len(str(preferred)) + len(".ttrpc") <= _SOCKET_MAX:
        return str(preferred)
    return f"/run/envtest-{suffix}-containerd.sock"


_KUBELET_ROOT_MAX = 64
"""The longest kubelet root directory: the kubelet listens on unix sockets inside it (the longest,
``pod-resources/<9 digits>`` while it binds, ``device-plugins/kubelet.sock``) and a socket path
over 107 bytes fails to bind (``Failed to create listener for podResources endpoint``, exit 1)."""


def kubelet_root_path(preferred: Path, suffix: str) -> str:
    """The kubelet's root directory in the node's directory, or in /run when that path is too long
    for the sockets the kubelet makes in it (a deep pytest ``tmp_path``); removed by cleanup."""
    if len(str(preferred)) <= _KUBELET_ROOT_MAX:
        return str(preferred)
    return f"/run/envtest-{suffix}-kubelet"


Spawn = Callable[[str, list[str]], Process]


class RealNode:
    """containerd, kubelet and kube-proxy for one node called ``name``, in ``directory``."""

    def __init__(self, directory: Path, name: str, node_ip: str) -> None:
        self.dir = directory
        suffix = hashlib.sha256(str(directory).encode()).hexdigest()[:6]
        self.state = NodeState(
            dir=str(directory),
            name=name,
            node_ip=node_ip,
            subnet="",
            bridge=f"envtest{suffix}",  # at most 15 characters
            network=f"envtest-{suffix}",
            socket=_socket_path(directory / "containerd" / "containerd.sock", suffix),
            pause_image="",
            kubelet_root=kubelet_root_path(directory / "kubelet" / "root", suffix),
        )
        self.processes: list[Process] = []

    def ctr(self, *args: str, timeout: float = 120) -> str:
        """``ctr`` against this node's containerd, in the kubelet's namespace."""
        return _run(["ctr", "--address", self.state.socket, "-n", K8S_NAMESPACE, *args], timeout=timeout)

    def import_image(self, archive: bytes | Path) -> None:
        """Import an image archive (OCI layout or ``docker save``/``podman save``) for pods."""
        if isinstance(archive, bytes):
            path = self.dir / "image-import.tar"
            path.write_bytes(archive)
            try:
                self.ctr("images", "import", str(path), timeout=600)
            finally:
                path.unlink(missing_ok=True)
        else:
            self.ctr("images", "import", str(archive), timeout=600)

    async def start(
        self,
        spawn: Spawn,
        *,
        kubeconfig: Path,
        client_ca: Path,
        wait_http: Callable[..., Any],
    ) -> None:
        """Start containerd (pause image imported), the kubelet and kube-proxy; returns once
        containerd answers and kube-proxy's health check passes (the Node's readiness is the
        caller's wait)."""
        ensure_packages()
        binaries = assets.ensure(assets.NODE)
        for path in ("containerd", "cni/net.d", "cni/ipam", "kubelet", "kube-proxy"):
            (self.dir / path).mkdir(parents=True, exist_ok=True)
        state = self.state
        state.subnet = pick_subnet(_used_networks())
        state.sysctls = {s: v for s in SYSCTLS if (v := _read_sysctl(s)) is not None}
        state.absent_dirs = [str(d) for d in (*HOST_DIRS, *_cgroup_parents()) if not d.exists()]
        state.kube_proxy = str(binaries["kube-proxy"])
        pause = pause_binary()
        state.pause_image = pause_image_name(pause)
        self.write_state()

        config = self.dir / "containerd" / "config.toml"
        config.write_text(containerd_config(state))
        (self.dir / "cni" / "net.d" / "10-envtest.conflist").write_text(
            json.dumps(cni_conflist(state), indent=2)
        )
        containerd = self._track(
            spawn("containerd", ["containerd", f"--config={config}", "--log-level=warn"])
        )
        await self._wait_containerd(containerd)
        self.import_image(ociimage.binary_image(state.pause_image, pause))

        kubelet_cfg = self.dir / "kubelet" / "config.yaml"
        kubelet_cfg.write_text(
            yaml.safe_dump(
                kubelet_config(
                    state, port=free_port(), healthz_port=(hz := free_port()), client_ca=str(client_ca)
                )
            )
        )
        kubelet = self._track(
            spawn(
                "kubelet",
                [
                    str(binaries["kubelet"]),
                    f"--config={kubelet_cfg}",
                    f"--kubeconfig={kubeconfig}",
                    f"--hostname-override={state.name}",
                    f"--node-ip={state.node_ip}",
                    f"--root-dir={self.state.kubelet_root}",
                    f"--cert-dir={self.dir / 'kubelet' / 'pki'}",
                    f"--node-labels={','.join(f'{k}={v}' for k, v in LABEL.items())}",
                    "--v=1",
                ],
            )
        )
        proxy_cfg = self.dir / "kube-proxy" / "config.yaml"
        proxy_hz = free_port()
        proxy_cfg.write_text(
            yaml.safe_dump(
                kube_proxy_config(
                    state, kubeconfig=str(kubeconfig), healthz_port=proxy_hz, metrics_port=free_port()
                )
            )
        )
        proxy = self._track(spawn("kube-proxy", [state.kube_proxy, f"--config={proxy_cfg}", "--v=1"]))
        self.write_state()
        await wait_http(kubelet, f"http://127.0.0.1:{hz}/healthz", timeout=120)
        await wait_http(proxy, f"http://127.0.0.1:{proxy_hz}/healthz", timeout=120)

    def _track(self, proc: Process) -> Process:
        self.processes.append(proc)
        self.state.processes.append({"name": proc.name, "pid": proc.pid, "exe": pid_executable(proc.pid)})
        return proc

    async def _wait_containerd(self, proc: Process) -> None:
        import asyncio

        deadline = time.monotonic() + 60
        while True:
            if (code := proc.exited()) is not None:
                raise proc.failure(f"exited with code {code}")
            if await asyncio.to_thread(Path(self.state.socket).exists):
                try:
                    await asyncio.to_thread(self.ctr, "version", timeout=10)
                    return
                except (EnvtestError, subprocess.TimeoutExpired):
                    pass
            if time.monotonic() > deadline:
                raise proc.failure("its socket did not answer within 60s")
            await asyncio.sleep(0.2)

    def write_state(self) -> None:
        (self.dir / "node-state.json").write_text(json.dumps(asdict(self.state), indent=2))

    def stop(self) -> list[str]:
        """Stop everything and undo the host changes; returns what could not be undone."""
        return cleanup(self.state)


def _cgroup_parents() -> list[Path]:
    """Where runc puts the containers of containerd's ``k8s.io`` namespace (cgroupfs, v1 and the
    unified mount): ``/sys/fs/cgroup/<controller>/k8s.io``, made on the first container."""
    root = Path("/sys/fs/cgroup")
    if not root.is_dir():
        return []
    return [d / K8S_NAMESPACE for d in sorted(root.iterdir()) if d.is_dir() and not d.is_symlink()]


def pids_with(argument: str) -> list[int]:
    """Processes whose command line contains ``argument`` as one word (their own socket)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argument.encode() in words and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


def _revive_containerd(config: Path, sock: str, log: Path) -> subprocess.Popen[bytes] | None:
    """containerd on the recorded config, once its socket answers (None if it never does)."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            ["containerd", f"--config={config}", "--log-level=warn"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        check = subprocess.run(
            ["ctr", "--address", sock, "version"], capture_output=True, check=False, timeout=10
        )
        if check.returncode == 0:
            return proc
        time.sleep(0.2)
    stop_pid(proc.pid, timeout=10, popen=proc)
    return None


def _stop_recorded(proc: Mapping[str, Any], timeout: float) -> None:
    pid = int(proc["pid"])
    if pid_alive(pid) and (not proc.get("exe") or pid_executable(pid) == proc["exe"]):
        stop_pid(pid, timeout=timeout)


def cleanup(state: NodeState, *, timeout: float = 20.0) -> list[str]:
    """Undo everything a real node did on the host (each step tolerates what is already gone);
    returns the problems left (empty: nothing leaked)."""
    problems: list[str] = []
    by_name = {p["name"]: p for p in state.processes}
    sock = state.socket
    ctr = ["ctr", "--address", sock, "-n", K8S_NAMESPACE]

    def step(what: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as err:
            problems.append(f"{what}: {err}")

    # 1. kube-proxy and the kubelet stop first: nothing restarts pods or rewrites rules.
    for name in ("kube-proxy", "kubelet"):
        if name in by_name:
            step(f"stopping {name}", lambda n=name: _stop_recorded(by_name[n], timeout))  # type: ignore[misc]

    # 2. The pods' tasks (sandboxes and containers), their network namespaces.
    netns: list[str] = []
    containerd = by_name.get("containerd")
    containerd_up = containerd is not None and pid_alive(int(containerd["pid"])) and Path(sock).exists()
    revived: subprocess.Popen[bytes] | None = None
    config = Path(state.dir) / "containerd" / "config.toml"
    if not containerd_up and containerd is not None and config.is_file() and shutil.which("containerd"):
        # containerd died (a hard kill) but its shims and the pods' processes may not have: it
        # is started again on its own state, only to kill and delete them.
        revived = _revive_containerd(config, sock, Path(state.dir) / "containerd" / "cleanup.log")
        containerd_up = revived is not None
    if containerd_up:

        def tasks() -> None:
            ids = _run([*ctr, "containers", "ls", "-q"], timeout=60).split()
            state.sandboxes = ids
            for cid in ids:
                info = json.loads(_run([*ctr, "containers", "info", cid], check=False, timeout=30) or "{}")
                for ns in (info.get("Spec") or {}).get("linux", {}).get("namespaces", []):
                    if ns.get("type") == "network" and ns.get("path"):
                        netns.append(ns["path"])
            for cid in _run([*ctr, "tasks", "ls", "-q"], timeout=60).split():
                _run([*ctr, "tasks", "kill", "-a", "-s", "SIGKILL", cid], check=False, timeout=30)
            deadline = time.monotonic() + 30
            while (
                left := _run([*ctr, "tasks", "ls", "-q"], timeout=60).split()
            ) and time.monotonic() < deadline:
                for cid in left:
                    _run([*ctr, "tasks", "delete", "-f", cid], check=False, timeout=30)
                time.sleep(0.2)
            if left:
                raise EnvtestError(f"tasks still running: {left}")
            for cid in ids:
                _run([*ctr, "containers", "delete", cid], check=False, timeout=30)

        step("removing the pods' tasks", tasks)
    # 3. containerd, then any shim of its socket still alive.
    if containerd is not None:
        step("stopping containerd", lambda: _stop_recorded(containerd, timeout))
    if revived is not None:
        step("stopping the revived containerd", lambda: stop_pid(revived.pid, timeout=timeout, popen=revived))

    def shims() -> None:
        for pid in pids_with(sock):
            stop_pid(pid, timeout=5)

    step("stopping containerd's shims", shims)

    # 4. Network: namespaces, the bridge, the CNI results cache, iptables chains.
    def namespaces() -> None:
        for path in sorted(set(netns)):
            subprocess.run(["umount", path], capture_output=True, check=False)
            Path(path).unlink(missing_ok=True)

    step("removing the pods' network namespaces", namespaces)

    def bridge() -> None:
        if Path(f"/sys/class/net/{state.bridge}").exists():
            _run(["ip", "link", "delete", state.bridge])

    step(f"deleting the bridge {state.bridge}", bridge)

    def results() -> None:
        if CNI_RESULTS.is_dir():
            for path in _cni_results(state):
                path.unlink(missing_ok=True)

    step("removing CNI results", results)

    def chains() -> None:
        if state.kube_proxy and Path(state.kube_proxy).is_file():
            subprocess.run([state.kube_proxy, "--cleanup"], capture_output=True, check=False, timeout=120)
        for family in ("iptables", "ip6tables"):
            if shutil.which(f"{family}-save") is None:
                continue
            save = _run([f"{family}-save"], check=False)
            script = iptables_cleanup(save, state.network)
            if script:
                subprocess.run(
                    [f"{family}-restore", "--noflush"],
                    input=script,
                    text=True,
                    capture_output=True,
                    check=False,
                )
            left = iptables_cleanup(_run([f"{family}-save"], check=False), state.network)
            if left:
                raise EnvtestError(f"{family} chains left: {left.strip()}")

    step("removing KUBE-* and CNI-* chains", chains)

    # 5. Host files and settings.
    def log_links() -> None:
        if CONTAINER_LOGS.is_dir():
            for link in CONTAINER_LOGS.iterdir():
                if link.is_symlink() and os.readlink(link).startswith(state.dir):
                    link.unlink(missing_ok=True)

    step("removing /var/log/containers links", log_links)

    def host_dirs() -> None:
        for directory in state.absent_dirs:
            with contextlib.suppress(OSError):
                Path(directory).rmdir()  # only when empty

    step("removing the host directories it created", host_dirs)
    for path in (sock, f"{sock}.ttrpc"):  # left by a containerd that was killed, or in /run
        step(f"removing {path}", lambda p=path: Path(p).unlink(missing_ok=True))  # type: ignore[misc]
    for name, value in state.sysctls.items():
        if _read_sysctl(name) != value:
            step(f"restoring {name}", lambda n=name, v=value: _write_sysctl(n, v))  # type: ignore[misc]

    def unmount() -> None:
        for point in _node_mounts(state):
            subprocess.run(["umount", point], capture_output=True, check=False)
        for point in _node_mounts(state):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
        left = _node_mounts(state)
        if left:
            raise EnvtestError(f"still mounted: {left}")

    step(f"unmounting everything under {state.dir}", unmount)
    if state.kubelet_root and not state.kubelet_root.startswith(state.dir + "/"):
        # the kubelet's root moved to /run for its sockets' sake: nothing of it stays there
        step(f"removing {state.kubelet_root}", lambda: shutil.rmtree(state.kubelet_root, ignore_errors=True))
    return problems


def _node_mounts(state: NodeState) -> list[str]:
    """Mount points under the node's directory and under its kubelet root, wherever that is."""
    mountinfo = Path("/proc/self/mountinfo").read_text()
    found = mounts_under(state.dir, mountinfo)
    if state.kubelet_root and not state.kubelet_root.startswith(state.dir + "/"):
        found += mounts_under(state.kubelet_root, mountinfo)
    return found


def _cni_results(state: NodeState) -> list[Path]:
    """The CNI results cache entries of this node: its network's and containerd's loopback ones."""
    if not CNI_RESULTS.is_dir():
        return []
    found = list(CNI_RESULTS.glob(f"{state.network}-*"))
    for cid in state.sandboxes:
        found += CNI_RESULTS.glob(f"cni-loopback-{cid}-*")
    return found


def load_state(directory: Path | str) -> NodeState | None:
    path = Path(directory) / "node-state.json"
    if not path.exists():
        return None
    return NodeState(**json.loads(path.read_text()))


def leaks(state: NodeState) -> list[str]:
    """What of this node is still on the host (a test's check that cleanup left nothing)."""
    found = []
    for proc in state.processes:
        if pid_alive(int(proc["pid"])) and pid_executable(int(proc["pid"])) == proc.get("exe"):
            found.append(f"process {proc['name']} ({proc['pid']})")
    if pids_with(state.socket):
        found.append(f"processes of {state.socket}: {pids_with(state.socket)}")
    if Path(f"/sys/class/net/{state.bridge}").exists():
        found.append(f"link {state.bridge}")
    for family in ("iptables", "ip6tables"):
        if shutil.which(f"{family}-save") and iptables_cleanup(
            _run([f"{family}-save"], check=False), state.network
        ):
            found.append(f"{family} KUBE-*/CNI-* chains")
    if mounts := _node_mounts(state):
        found.append(f"mounts {mounts}")
    if (
        state.kubelet_root
        and not state.kubelet_root.startswith(state.dir + "/")
        and Path(state.kubelet_root).exists()
    ):
        found.append(f"kubelet root {state.kubelet_root}")
    if results := _cni_results(state):
        found.append(f"CNI results {[p.name for p in results]}")
    if CONTAINER_LOGS.is_dir() and any(
        link.is_symlink() and os.readlink(link).startswith(state.dir) for link in CONTAINER_LOGS.iterdir()
    ):
        found.append("/var/log/containers links")
    for name, value in state.sysctls.items():
        if _read_sysctl(name) != value:
            found.append(f"sysctl {name}={_read_sysctl(name)} (was {value})")
    found += [f"{d} (absent before)" for d in state.absent_dirs if Path(d).exists()]
    found += [f"socket {p}" for p in (state.socket, f"{state.socket}.ttrpc") if Path(p).exists()]
    return found


__all__ = [
    "LABEL",
    "NODE_SELECTOR",
    "TAINT_KEY",
    "TOLERATION",
    "NodeState",
    "RealNode",
    "StartError",
    "cleanup",
    "leaks",
]
