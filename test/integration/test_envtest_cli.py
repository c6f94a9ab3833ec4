"""`python -m manager.envtest up/down` starts a control plane and leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from manager.envtest.process import pid_alive

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "manager.envtest", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_up_then_down_leaves_no_process_port_or_file(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    up = cli("up", "--dir", str(directory))
    assert up.returncode == 0, up.stderr
    assert f"export KUBECONFIG={directory / 'kubeconfig'}" in up.stdout

    state = json.loads((directory / "envtest.json").read_text())
    pids = [p["pid"] for p in state["processes"]]
    assert [p["name"] for p in state["processes"]] == ["etcd", "kube-apiserver"]
    assert all(pid_alive(pid) for pid in pids), "up returned but its processes are not running"
    api_port = int(state["url"].rsplit(":", 1)[1])
    etcd_port = int(state["etcd_url"].rsplit(":", 1)[1])
    assert port_in_use(api_port) and port_in_use(etcd_port)
    kubeconfig = yaml.safe_load((directory / "kubeconfig").read_text())
    assert kubeconfig["clusters"][0]["cluster"]["server"] == state["url"]

    # A second `up` on the same directory refuses instead of starting a second plane.
    again = cli("up", "--dir", str(directory))
    assert again.returncode == 1 and "already runs" in again.stderr

    down = cli("down", "--dir", str(directory))
    assert down.returncode == 0, down.stderr
    assert not any(pid_alive(pid) for pid in pids)
    assert not port_in_use(api_port) and not port_in_use(etcd_port)
    assert not directory.exists()


def test_down_on_an_empty_directory_is_harmless(tmp_path: Path) -> None:
    down = cli("down", "--dir", str(tmp_path))
    assert down.returncode == 0
    assert "nothing is running" in down.stderr
    assert tmp_path.exists()


def _processes_under(directory: Path) -> list[int]:
    """Pids of live processes whose command line names ``directory`` (etcd, kube-apiserver)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(directory) in cmdline and pid_alive(int(entry.name)):
            pids.append(int(entry.name))
    return pids


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_up_interrupted_says_so_and_stops_what_it_started(tmp_path: Path, sig: signal.Signals) -> None:
    directory = tmp_path / "cluster"
    proc = subprocess.Popen(
        [sys.executable, "-m", "manager.envtest", "up", "--dir", str(directory)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        # interrupted while kube-apiserver starts: etcd runs, the API server is not ready yet
        while not (directory / "kube-apiserver.log").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "kube-apiserver never started"
            time.sleep(0.05)
        started = _processes_under(directory)
        assert started, "no process of the control plane found"
        os.killpg(proc.pid, sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + sig, err
    last = err.strip().splitlines()[-1]
    assert last == (
        f"envtest up: interrupted by {sig.name} during starting a plain control plane in {directory}"
    ), err
    assert "Traceback" not in err, err
    assert "export KUBECONFIG" not in out
    assert not [p for p in started if pid_alive(p)], "up left control-plane processes running"
    assert not _processes_under(directory)
    assert not directory.exists()
