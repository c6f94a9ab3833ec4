"""Child processes of a local control plane: start, health-wait and stop, leaving nothing behind.

Processes started for an in-process environment get ``PR_SET_PDEATHSIG`` so the kernel
kills them when the test process dies, however it dies. Detached processes (the CLI's
``up``) run in their own session and are stopped by pid from the state file, after checking
the pid still belongs to the binary we started.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import fcntl
import os
import random
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from manager.envtest.errors import StartError

_PR_SET_PDEATHSIG = 1


def signal_on_parent_death(sig: signal.Signals) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent dies (Linux)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)


def _die_with_parent() -> None:
    # SIGKILL, not SIGTERM: a kube-apiserver whose etcd died with it can spend minutes in a
    # graceful shutdown, and nothing of a throwaway control plane needs saving.
    signal_on_parent_death(signal.SIGKILL)


_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LISTEN_PORTS = (20000, 32767)  # below Linux's default ephemeral range (32768-60999)
_handed_out: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = (int(v) for v in _EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def _listen_ports() -> range:
    """Ports for our listeners, outside the kernel's ephemeral range.

    A port from ``bind(0)`` lies in the ephemeral range, so once the probe socket closes the
    kernel may hand it to any outbound connection (a client dialling the API server) before
    the listener binds it, or while a process restarted on the same port is down; the listener
    then fails with EADDRINUSE for as long as that connection lives. Outside the range only
    another listener can take it.
    """
    low, high = _ephemeral_range()
    start, end = _LISTEN_PORTS
    if start <= high and low <= end:  # a tuned range that overlaps ours: take what lies below it
        start, end = 10000, max(10000, low - 1)
    return range(start, end + 1)


_RESERVATIONS_DIR = Path(tempfile.gettempdir()) / "envtest-ports"
_RESERVATIONS_KEPT = 512
_reservations: collections.deque[int] = collections.deque()


def _reserve(port: int) -> bool:
    """Hold ``port`` for this process against every other process that picks ports here.

    A port handed out is free but not yet bound: another process (a ``make run`` started by a
    test with ports the test picked, a second test run) could pick it in that window and one of
    the two listeners would then fail. Each handed-out port is held by an exclusive ``flock``
    on ``$TMPDIR/envtest-ports/<port>`` until this process exits (the kernel releases it) or it
    is among the oldest reservations past the last ``_RESERVATIONS_KEPT`` (bound long since).
    """
    try:
        _RESERVATIONS_DIR.mkdir(exist_ok=True)
        fd = os.open(_RESERVATIONS_DIR / str(port), os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        return True  # no shared directory: fall back to the bind check alone
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _reservations.append(fd)
    if len(_reservations) > _RESERVATIONS_KEPT:
        os.close(_reservations.popleft())
    return True


def free_port() -> int:
    """A loopback port that was free a moment ago and that no outbound connection can take.

    Picked at random outside the ephemeral range, never twice in one process and never one
    another process picking the same way still holds (``_reserve``): a listener can lose it
    only to a program that binds ports without asking here. Falls back to ``bind(0)`` when the
    whole range is taken.
    """
    ports = _listen_ports()
    for _ in range(200):
        port = random.choice(ports)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        if not _reserve(port):
            continue
        _handed_out.add(port)
        return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        fallback: int = sock.getsockname()[1]
        return fallback


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@dataclass
class Process:
    """One started binary, its log and how to reach its health endpoint."""

    name: str
    argv: Sequence[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    pid: int = 0
    extra_env: dict[str, str] = field(default_factory=dict)

    def start(self, *, detached: bool) -> None:
        env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        env.update(self.extra_env)
        with self.log.open("ab") as log:
            self.popen = subprocess.Popen(
                list(self.argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=None if detached else _die_with_parent,
            )
        self.pid = self.popen.pid

    def exited(self) -> int | None:
        if self.popen is not None:
            return self.popen.poll()
        return None if pid_alive(self.pid) else -1

    def failure(self, reason: str) -> StartError:
        return StartError(self.name, reason, log_tail(self.log))

    def stop(self, timeout: float = 20.0) -> None:
        stop_pid(self.pid, timeout=timeout, popen=self.popen)

    def kill(self) -> None:
        """SIGKILL the process group at once (a crash, not a shutdown) and reap it."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        if self.popen is not None:
            self.popen.wait(timeout=10)


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def pid_executable(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def stop_pid(pid: int, *, timeout: float, popen: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM, wait, then SIGKILL: the process group first, so helpers of a binary go too."""
    if pid <= 0:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + (timeout if sig == signal.SIGTERM else 5.0)
        while time.monotonic() < deadline:
            if popen is not None:
                if popen.poll() is not None:
                    return
            elif not pid_alive(pid):
                return
            time.sleep(0.05)


def _http_ok(url: str, context: ssl.SSLContext | None, accept: Callable[[int, bytes], bool]) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=2) as response:
            return accept(response.status, response.read())
    except urllib.error.HTTPError as err:
        return accept(err.code, b"")
    except (OSError, urllib.error.URLError):
        return False


async def wait_http(
    process: Process,
    url: str,
    *,
    timeout: float,
    context: ssl.SSLContext | None = None,
    accept: Callable[[int, bytes], bool] = lambda status, _body: status == 200,
) -> None:
    """Poll ``url`` until ``accept`` says yes; fail fast if the process exits first."""
    deadline = time.monotonic() + timeout
    while True:
        code = process.exited()
        if code is not None:
            raise process.failure(f"exited with code {code} before {url} answered")
        if await asyncio.to_thread(_http_ok, url, context, accept):
            return
        if time.monotonic() > deadline:
            raise process.failure(f"{url} not ready after {timeout:.0f}s")
        await asyncio.sleep(0.1)
