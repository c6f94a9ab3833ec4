"""`python -m manager.envtest up/down` starts a control plane and leaves nothing behind."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

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
