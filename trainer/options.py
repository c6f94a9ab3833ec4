"""The Configuration file (``config.trainer.kubeflow.org/v1alpha1``) to the manager's options.

The one place the entry point turns what an operator wrote into settings: reading the file
(upstream's texts), the manager options (metrics, probes, leader election with its Go
durations, group-kind concurrency), the client throttle and the webhook server's address.
"""

from __future__ import annotations

import ssl
import warnings
from pathlib import Path
from typing import Any

import yaml

from manager import Options
from manager import log as mlog
from manager.config import RestConfig
from manager.meta.duration import DurationError, parse_duration
from manager.metrics.filters import with_authentication_and_authorization
from manager.webhook.certwatcher import TLSOption
from trainer.api import config_tls
from trainer.api.config_v1alpha1 import Configuration, ConfigurationError, TLSOptions, load

__all__ = [
    "DEFAULT_WEBHOOK_PORT",
    "apply_client_connection",
    "duration",
    "manager_options",
    "read_configuration",
    "tls_options",
    "webhook_address",
]

log = mlog.get_logger("setup")

DEFAULT_WEBHOOK_PORT = 9443


def read_configuration(path: str) -> Configuration:
    """Upstream's texts: `failed to read config file: ...` / `failed to decode config file: ...`."""
    data: Any = None
    if path:
        try:
            text = Path(path).read_text()
        except OSError as err:
            raise ConfigurationError(f"failed to read config file: {err}") from err
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ConfigurationError(f"failed to decode config file: {err}") from err
    return load(data)


def duration(text: str | None, default: float) -> float:
    """A Go duration such as ``15s``, ``1m30s`` or ``500ms`` in seconds (``default`` when unset)."""
    if not text:
        return default
    try:
        return parse_duration(text)
    except DurationError as err:
        raise ConfigurationError(str(err)) from None


def manager_options(cfg: Configuration) -> Options:
    metrics = cfg.metrics.bind_address if cfg.metrics and cfg.metrics.bind_address else ":8443"
    health = cfg.health.health_probe_bind_address if cfg.health else ":8081"
    options = Options(
        metrics_bind_address=metrics,
        health_probe_bind_address=health or "",
        metrics_tls_opts=tls_options(cfg),
    )
    if cfg.metrics is None or cfg.metrics.secure_serving is not False:
        # HTTPS with a self-signed certificate (upstream passes no cert dir), and every scrape
        # authenticated and authorised through the API server (divergences.md: upstream serves
        # HTTPS without the filter)
        options.metrics_secure_serving = True
        options.metrics_filter_provider = with_authentication_and_authorization
    le = cfg.leader_election
    if le is not None and le.leader_elect:
        options.leader_election = True
        options.leader_election_id = le.resource_name or "trainer.kubeflow.org"
        options.leader_election_namespace = le.resource_namespace or ""
        options.lease_duration = duration(le.lease_duration, options.lease_duration)
        options.renew_deadline = duration(le.renew_deadline, options.renew_deadline)
        options.retry_period = duration(le.retry_period, options.retry_period)
    if cfg.controller and cfg.controller.group_kind_concurrency:
        # Upstream passes this but never applies it; we apply it (divergences.md).
        options.group_kind_concurrency = dict(cfg.controller.group_kind_concurrency)
    return options


def apply_client_connection(rest: RestConfig, cfg: Configuration) -> None:
    """clientConnection.qps/burst throttle the client (upstream validates but ignores them).

    qps 0 means no client-side limit.
    """
    conn = cfg.client_connection
    if conn is None or conn.qps is None:
        return
    rest.qps = float(conn.qps) or None
    rest.burst = int(conn.burst if conn.burst is not None else 100)


def webhook_address(cfg: Configuration) -> tuple[str, int]:
    """The webhook server's host ("" for every address) and port."""
    port = cfg.webhook.port if cfg.webhook and cfg.webhook.port else DEFAULT_WEBHOOK_PORT
    host = cfg.webhook.host if cfg.webhook and cfg.webhook.host else ""
    return host, port


def tls_options(cfg: Configuration) -> tuple[TLSOption, ...]:
    """The ``tls`` block as the one change every server's context gets (upstream's ``tlsconfig.Apply``).

    The block is validated at load. As upstream: ``nextProtos`` replaces the ALPN list (default
    ``http/1.1`` only), ``minVersion`` sets the minimum, ``cipherSuites`` the TLS 1.0-1.2 suites
    (TLS 1.3's are not configurable, as in Go), an insecure suite logged as upstream does. Unlike
    Go, when ``cipherSuites`` is empty the servers offer Go's default suites, and ``h2`` is dropped
    from ``nextProtos`` because the servers speak HTTP/1.1 only (docs/divergences.md).
    """
    tls = cfg.tls or TLSOptions()
    protos = list(tls.next_protos or []) or [config_tls.HTTP11]
    if config_tls.HTTP2 in protos:
        log.warning(
            "HTTP/2 is not served by this manager: h2 is not offered in the TLS handshake",
            field="tls.nextProtos",
        )
        protos = [p for p in protos if p != config_tls.HTTP2]
    min_version = tls.min_version or "1.2"
    suites = list(tls.cipher_suites or [])
    for name in suites:
        if config_tls.BY_GO_NAME[name].insecure:
            log.warning(f'Cipher suite "{name}" is insecure and should not be used in production')
    ciphers = config_tls.cipher_string(suites or config_tls.GO_DEFAULT_SUITES, min_version)
    minimum = config_tls.TLS_VERSIONS[min_version]
    if not ciphers:
        # Only TLS 1.3 suites listed: Go then finds no suite for a TLS 1.2 client and refuses it.
        minimum = ssl.TLSVersion.TLSv1_3

    def apply(context: ssl.SSLContext) -> None:
        context.set_alpn_protocols(protos)
        with warnings.catch_warnings():  # TLSv1 and TLSv1_1 are deprecated names, still honoured
            warnings.simplefilter("ignore", DeprecationWarning)
            context.minimum_version = minimum
        if ciphers:
            context.set_ciphers(ciphers)

    return (apply,)
