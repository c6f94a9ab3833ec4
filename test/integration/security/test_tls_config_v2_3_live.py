"""The Configuration's ``tls`` (Trainer v2.3.0) on the three HTTPS servers of ``python -m trainer``.

A v2.3 manager (its own kube-apiserver with the v2.3 CRDs, the TrainJobStatus gate on so the
status server runs) with secure metrics: each of the webhook, metrics and status servers refuses
a client below ``tls.minVersion``, refuses a TLS 1.2 client offering only suites outside
``tls.cipherSuites``, and negotiates the ALPN protocol of ``tls.nextProtos`` (``h2`` dropped: the
servers speak HTTP/1.1 only, docs/divergences.md). A bad value stops the manager at start with
the field named.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from module_env import V2_3_CRDS, module_control_plane
from trainer_process import ROOT, running_manager

from manager.envtest import Environment
from manager.envtest.process import free_port

# The test certificates (TinyCA, the metrics server's self-signed pair) are ECDSA P-256.
ALLOWED = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
ALLOWED_OPENSSL = "ECDHE-ECDSA-AES128-GCM-SHA256"
DISALLOWED_OPENSSL = "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305"
SYSTEM = "kubeflow-system"
SERVICE = "kubeflow-trainer-controller-manager"


@pytest.fixture(scope="module")
def env_v2_3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    with module_control_plane(tmp_path_factory, "tls-v2.3", V2_3_CRDS) as env:
        yield env


def client(
    *,
    maximum: ssl.TLSVersion | None = None,
    minimum: ssl.TLSVersion | None = None,
    ciphers: str = "DEFAULT:@SECLEVEL=0",
    alpn: tuple[str, ...] = ("h2", "http/1.1"),
) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the handshake is under test, not the chain
    ctx.set_ciphers(ciphers)  # SECLEVEL 0: let this client offer old protocol versions
    if minimum is not None:
        ctx.minimum_version = minimum
    if maximum is not None:
        ctx.maximum_version = maximum
    ctx.set_alpn_protocols(list(alpn))
    return ctx


async def handshake(port: int, ctx: ssl.SSLContext) -> tuple[str, str, str | None]:
    """(protocol version, cipher, ALPN protocol) of a completed handshake; raises on a refused one."""
    _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, ssl=ctx), 10)
    try:
        ssl_obj = writer.get_extra_info("ssl_object")
        return ssl_obj.version(), ssl_obj.cipher()[0], ssl_obj.selected_alpn_protocol()
    finally:
        writer.close()
        with contextlib.suppress(ssl.SSLError, ConnectionError):
            await writer.wait_closed()


@pytest.fixture
async def service_account(env_v2_3: Environment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The manager's own token, whose issuer the v2.3 status server reads at start (in a pod:
    /var/run/secrets/kubernetes.io/serviceaccount/token), in ``KUBERNETES_SERVICE_ACCOUNT_DIR``."""
    await env_v2_3.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM}}
    )
    sa_dir = tmp_path / "serviceaccount"
    sa_dir.mkdir()
    (sa_dir / "token").write_text(await env_v2_3.service_account_token(SYSTEM, SERVICE))
    (sa_dir / "namespace").write_text(SYSTEM)
    monkeypatch.setenv("KUBERNETES_SERVICE_ACCOUNT_DIR", str(sa_dir))


def manager_config(tls: dict[str, object]) -> tuple[dict[str, object], int, int]:
    metrics_port, status_port = free_port(), free_port()
    config: dict[str, object] = {
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}", "secureServing": True},
        "featureGates": {"TrainJobStatus": True},
        "statusServer": {"port": status_port},
        "tls": tls,
    }
    return config, metrics_port, status_port


@pytest.mark.usefixtures("service_account")
async def test_min_version_cipher_suites_and_next_protos_on_every_server(
    env_v2_3: Environment, tmp_path: Path
) -> None:
    config, metrics_port, status_port = manager_config(
        {"minVersion": "1.2", "cipherSuites": [ALLOWED], "nextProtos": ["h2", "http/1.1"]}
    )
    async with running_manager(env_v2_3, tmp_path, config, args=["--api-level=v2.3"]) as manager:
        servers = {"webhook": manager.webhook_port, "metrics": metrics_port, "status": status_port}
        for name, port in servers.items():
            with pytest.raises((ssl.SSLError, ConnectionError)):  # below minVersion
                await handshake(port, client(maximum=ssl.TLSVersion.TLSv1_1))
            with pytest.raises((ssl.SSLError, ConnectionError)):  # no allowed suite offered
                await handshake(port, client(maximum=ssl.TLSVersion.TLSv1_2, ciphers=DISALLOWED_OPENSSL))
            assert await handshake(port, client(maximum=ssl.TLSVersion.TLSv1_2)) == (
                "TLSv1.2",
                ALLOWED_OPENSSL,
                "http/1.1",  # h2 offered by both sides, dropped by the manager
            ), name
        log = manager.log_path.read_text()
        assert "HTTP/2 is not served by this manager" in log


@pytest.mark.usefixtures("service_account")
async def test_tls13_minimum_and_a_custom_alpn_protocol(env_v2_3: Environment, tmp_path: Path) -> None:
    config, metrics_port, status_port = manager_config(
        {"minVersion": "1.3", "nextProtos": ["spdy/3.1", "http/1.1"]}
    )
    async with running_manager(env_v2_3, tmp_path, config, args=["--api-level=v2.3"]) as manager:
        servers = {"webhook": manager.webhook_port, "metrics": metrics_port, "status": status_port}
        for name, port in servers.items():
            with pytest.raises((ssl.SSLError, ConnectionError)):
                await handshake(port, client(maximum=ssl.TLSVersion.TLSv1_2))
            version, _, alpn = await handshake(port, client(alpn=("http/1.1", "spdy/3.1")))
            assert (version, alpn) == ("TLSv1.3", "spdy/3.1"), name  # the server's order decides


@pytest.mark.parametrize(
    ("tls", "message"),
    [
        ({"minVersion": "1.4"}, 'tls.minVersion: Unsupported value: \\"1.4\\"'),
        ({"cipherSuites": ["TLS_ECDHE_ECDSA_WITH_AES_128_GCM"]}, "tls.cipherSuites[0]: Unsupported value"),
        ({"cipherSuites": ["TLS_RSA_WITH_RC4_128_SHA"]}, "tls.cipherSuites[0]: Invalid value"),
    ],
)
async def test_a_bad_value_stops_the_manager_at_start(
    tmp_path: Path, tls: dict[str, object], message: str
) -> None:
    config = {"apiVersion": "config.trainer.kubeflow.org/v1alpha1", "kind": "Configuration", "tls": tls}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "trainer",
        f"--config={tmp_path / 'config.yaml'}",
        "--api-level=v2.3",
        "--log-format=json",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1, out.decode()
    text = out.decode()
    assert "unable to load the configuration" in text and "invalid configuration: " in text, text
    assert message in text, text
