"""Connection config loading (in-cluster service account, kubeconfig) and session lifetime."""

from __future__ import annotations

from pathlib import Path

import pytest

from manager.cluster import Cluster
from manager.config import RestConfig, RestConfigError, get_config, load_incluster, load_kubeconfig
from manager.envtest.certs import TinyCA


def test_incluster_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ca = TinyCA("incluster-ca")
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem)
    (tmp_path / "token").write_text("secret-token")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    config = load_incluster(token_file=str(tmp_path / "token"), cert_file=str(tmp_path / "ca.crt"))
    assert config.host == "https://10.0.0.1:443"
    assert config.ssl_context is not None
    assert config.qps is None  # client-side throttling off by default, as controller-runtime


async def test_incluster_token_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ca = TinyCA("incluster-ca")
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem)
    (tmp_path / "token").write_text("secret-token")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    config = load_incluster(token_file=str(tmp_path / "token"), cert_file=str(tmp_path / "ca.crt"))
    assert await config.authorization() == "Bearer secret-token"


async def test_kubeconfig_with_token_and_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
"""
    )
    config = await load_kubeconfig(kubeconfig)
    assert config.host == "https://127.0.0.1:6443"
    assert await config.authorization() == "Bearer abc"
    assert config.ssl_context is not None and config.ssl_context.check_hostname is False
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    assert (await get_config()).host == "https://127.0.0.1:6443"
    with pytest.raises(RestConfigError):
        await load_kubeconfig(tmp_path / "missing")


async def test_cluster_closes_its_http_session() -> None:
    async with Cluster(RestConfig(host="http://127.0.0.1:1")) as cluster:
        session = cluster.transport.session
        assert not session.closed
    assert session.closed


async def test_incluster_token_rotation_is_picked_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime

    from kubernetes_asyncio.config import incluster_config

    ca = TinyCA("incluster-ca")
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem)
    (tmp_path / "token").write_text("first")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    # Projected tokens are re-read once they age; make every read "aged".
    monkeypatch.setattr(incluster_config, "TOKEN_REFRESH_PERIOD", datetime.timedelta(0))
    config = load_incluster(token_file=str(tmp_path / "token"), cert_file=str(tmp_path / "ca.crt"))
    assert await config.authorization() == "Bearer first"
    (tmp_path / "token").write_text("rotated")
    assert await config.authorization() == "Bearer rotated"


async def test_exec_plugin_credentials_are_refreshed(tmp_path: Path) -> None:
    import sys

    token_file = tmp_path / "current"
    token_file.write_text("one")
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json, pathlib\n"
        f"token = pathlib.Path({str(token_file)!r}).read_text()\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',"
        " 'status': {'token': token}}))\n"
    )
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        f"""
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}}}]
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: {sys.executable}
      args: [{plugin}]
      interactiveMode: Never
contexts: [{{name: ctx, context: {{cluster: c, user: u}}}}]
current-context: ctx
"""
    )
    config = await load_kubeconfig(kubeconfig, refresh_interval=0)
    assert await config.authorization() == "Bearer one"
    token_file.write_text("two")
    assert await config.authorization() == "Bearer two"


def test_the_loaders_come_without_kubernetes_asyncios_generated_client() -> None:
    # Its 700-odd models cost 37 MB of RSS in every process (docs/bench.md); a later import of
    # the package by a user's code must still get the whole real thing.
    import subprocess
    import sys

    probe = """
import sys

asked = []


class Record:
    def find_spec(self, name, path=None, target=None):
        asked.append(name)
        return None


sys.meta_path.insert(0, Record())
import manager.config

assert not [n for n in sys.modules if n.startswith("kubernetes_asyncio")], "left in sys.modules"
generated = [n for n in asked if n.startswith(("kubernetes_asyncio.client.api", "kubernetes_asyncio.client.models"))]
assert not generated, generated[:5]
assert "kubernetes_asyncio.config.kube_config" in asked
from kubernetes_asyncio import client, config, watch

assert client.CoreV1Api and client.V1Pod and watch.Watch and config.load_kube_config
assert client.ApiClient.__module__ == "kubernetes_asyncio.client.api_client"
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"
