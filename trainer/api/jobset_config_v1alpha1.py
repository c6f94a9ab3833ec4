"""JobSet's own controller configuration file, ``config.jobset.x-k8s.io/v1alpha1`` (docs/behaviour/jobset.md
§5.1, §5.2).

The product runs the JobSet controllers inside the Trainer's manager, whose configuration is
the Trainer's. This is the Go JobSet manager's own file, with upstream's texts: decoded
strictly, defaulted, validated and turned into manager settings. The conformance harness
writes the Configuration it starts the Go JobSet manager with through it (``render``), so a
file the Go manager would refuse fails before the run. Also the User-Agent upstream sends.
"""

from __future__ import annotations

import copy
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from manager.meta.duration import DurationError
from manager.meta.duration import parse_duration as _parse_duration
from manager.meta.field import FieldError, aggregate
from manager.meta.object import Json as Object
from manager.meta.validation import is_dns1035_label, is_dns1123_subdomain

API_VERSION = "config.jobset.x-k8s.io/v1alpha1"
KIND = "Configuration"
DEFAULT_LEADER_ELECTION_ID = "6d4f6a47.jobset.x-k8s.io"
DEFAULT_WEBHOOK_SERVICE = "jobset-webhook-service"
DEFAULT_WEBHOOK_SECRET = "jobset-webhook-server-cert"
DEFAULT_METRICS_CERT_DIR = "/tmp/k8s-metrics-server/serving-certs"


# The fields a Configuration may carry; anything else is a strict-decoding error.
_SCHEMA: dict[str, Any] = {
    "apiVersion": None,
    "kind": None,
    "webhook": {"port": None, "host": None, "certDir": None},
    "metrics": {"bindAddress": None, "certDir": None},
    "health": {"healthProbeBindAddress": None, "readinessEndpointName": None, "livenessEndpointName": None},
    "leaderElection": {
        "leaderElect": None,
        "leaseDuration": None,
        "renewDeadline": None,
        "retryPeriod": None,
        "resourceLock": None,
        "resourceName": None,
        "resourceNamespace": None,
    },
    "internalCertManagement": {"enable": None, "webhookServiceName": None, "webhookSecretName": None},
    "clientConnection": {"qps": None, "burst": None},
}
# v0.12.0's Configuration adds ``featureGates`` (its gates, ``trainer.features`` component
# ``jobset``) and ``tls``; v0.10.1's refuses both as unknown fields.
_SCHEMA_V0_12: dict[str, Any] = {
    **_SCHEMA,
    "featureGates": None,
    "tls": {"minVersion": None, "cipherSuites": None},
}
SCHEMAS: dict[str, dict[str, Any]] = {"v0.10.1": _SCHEMA, "v0.12.0": _SCHEMA_V0_12}
"""The fields of each JobSet release's Configuration, by release."""
DEFAULT_RELEASE = "v0.10.1"


class ConfigError(ValueError):
    """A Configuration that cannot be read, decoded or validated."""


def _unknown(data: Any, schema: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    if not isinstance(data, dict):
        return out
    for key, value in data.items():
        if key not in schema:
            out.append(f'unknown field "{prefix}{key}"')
        elif isinstance(schema[key], dict):
            out += _unknown(value, schema[key], f"{prefix}{key}.")
    return out


def decode(data: Object, release: str = DEFAULT_RELEASE) -> Object:
    """Strict decoding against ``release``'s fields: ``strict decoding error: unknown field
    "x"`` (apimachinery's words)."""
    unknown = _unknown(data, SCHEMAS[release])
    if unknown:
        raise ConfigError("strict decoding error: " + ", ".join(unknown))
    return copy.deepcopy(data)


def set_defaults(cfg: Object) -> Object:
    """Upstream's SetDefaults_Configuration, in place; returns ``cfg``."""
    cfg.setdefault("apiVersion", API_VERSION)
    cfg.setdefault("kind", KIND)
    cfg.setdefault("webhook", {}).setdefault("port", 9443)
    cfg.setdefault("metrics", {}).setdefault("bindAddress", ":8443")
    cfg.setdefault("health", {}).setdefault("healthProbeBindAddress", ":8081")
    election = cfg.setdefault("leaderElection", {})
    election.setdefault("leaderElect", True)
    election.setdefault("leaseDuration", "15s")
    election.setdefault("renewDeadline", "10s")
    election.setdefault("retryPeriod", "2s")
    election.setdefault("resourceLock", "leases")
    election.setdefault("resourceName", DEFAULT_LEADER_ELECTION_ID)
    election.setdefault("resourceNamespace", "")
    certs = cfg.setdefault("internalCertManagement", {})
    certs.setdefault("enable", True)
    if certs["enable"]:
        certs.setdefault("webhookServiceName", DEFAULT_WEBHOOK_SERVICE)
        certs.setdefault("webhookSecretName", DEFAULT_WEBHOOK_SECRET)
    connection = cfg.setdefault("clientConnection", {})
    connection.setdefault("qps", 500)
    connection.setdefault("burst", 500)
    return cfg


def validate(cfg: Object) -> list[str]:
    """Cert-management names are checked only when internal cert management is on."""
    certs = cfg.get("internalCertManagement") or {}
    if not certs.get("enable"):
        return []
    errs: list[str] = []
    service = certs.get("webhookServiceName")
    if service is not None:
        path = "internalCertManagement.webhookServiceName"
        errs += [str(FieldError.invalid(path, service, m)) for m in is_dns1035_label(str(service))]
    secret = certs.get("webhookSecretName")
    if secret is not None:
        path = "internalCertManagement.webhookSecretName"
        errs += [str(FieldError.invalid(path, secret, m)) for m in is_dns1123_subdomain(str(secret))]
    return errs


def parse_duration(text: str) -> float:
    """A Go duration (``15s``, ``1m30s``, ``500ms``) in seconds; Go's error texts."""
    try:
        return _parse_duration(text)
    except DurationError as err:
        raise ConfigError(str(err)) from None


@dataclass(frozen=True)
class ManagerSettings:
    """What upstream's ``apply`` turns the Configuration into (ctrl.Options)."""

    health_probe_bind_address: str
    metrics_bind_address: str
    metrics_cert_dir: str | None
    metrics_cert_name: str | None
    metrics_key_name: str | None
    leader_election: bool
    leader_election_id: str
    leader_election_namespace: str
    leader_election_resource_lock: str
    lease_duration: float
    renew_deadline: float
    retry_period: float
    readiness_endpoint_name: str | None
    liveness_endpoint_name: str | None
    webhook_port: int
    webhook_host: str | None
    webhook_cert_dir: str | None


def settings(cfg: Object) -> ManagerSettings:
    election = cfg["leaderElection"]
    metrics = cfg.get("metrics") or {}
    certs = cfg.get("internalCertManagement") or {}
    cert_dir: str | None = None
    if metrics.get("certDir") or not certs.get("enable"):
        cert_dir = metrics.get("certDir") or DEFAULT_METRICS_CERT_DIR
    health = cfg.get("health") or {}
    webhook = cfg.get("webhook") or {}
    return ManagerSettings(
        health_probe_bind_address=str(health.get("healthProbeBindAddress") or ""),
        metrics_bind_address=str(metrics.get("bindAddress") or ""),
        metrics_cert_dir=cert_dir,
        metrics_cert_name="tls.crt" if cert_dir else None,
        metrics_key_name="tls.key" if cert_dir else None,
        leader_election=bool(election.get("leaderElect")),
        leader_election_id=str(election.get("resourceName") or ""),
        leader_election_namespace=str(election.get("resourceNamespace") or ""),
        leader_election_resource_lock=str(election.get("resourceLock") or ""),
        lease_duration=parse_duration(str(election["leaseDuration"])),
        renew_deadline=parse_duration(str(election["renewDeadline"])),
        retry_period=parse_duration(str(election["retryPeriod"])),
        readiness_endpoint_name=health.get("readinessEndpointName"),
        liveness_endpoint_name=health.get("livenessEndpointName"),
        webhook_port=int(webhook.get("port") or 9443),
        webhook_host=webhook.get("host"),
        webhook_cert_dir=webhook.get("certDir"),
    )


def load(path: str | Path | None) -> tuple[ManagerSettings, Object]:
    """Read (when a path is given), decode strictly, default, validate; built-in defaults otherwise."""
    data: Object = {}
    if path:
        target = Path(path)
        if target.is_dir():
            raise ConfigError(f"read {path}: is a directory")
        try:
            text = target.read_text()
        except OSError as err:
            raise ConfigError(f"open {path}: {err.strerror.lower() if err.strerror else err}") from err
        data = yaml.safe_load(text) or {}
    cfg = set_defaults(decode(data))
    errs = validate(cfg)
    if errs:
        raise ConfigError(aggregate(errs))
    return settings(cfg), cfg


def render(data: Object, release: str = DEFAULT_RELEASE) -> str:
    """``data`` decoded strictly (``release``'s fields), defaulted and validated, as the YAML the
    Go manager of that release reads."""
    cfg = set_defaults(decode(data, release))
    errs = validate(cfg)
    if errs:
        raise ConfigError(aggregate(errs))
    settings(cfg)  # the durations parse
    return encode(cfg)


def encode(cfg: Object) -> str:
    """YAML of a Configuration: ``apiVersion``, ``kind``, then the sections, empty ones as ``{}``."""
    out: Object = {"apiVersion": cfg.get("apiVersion", API_VERSION), "kind": cfg.get("kind", KIND)}
    for key in ("webhook", "metrics", "health"):
        out[key] = copy.deepcopy(cfg.get(key) or {})
    for key in ("leaderElection", "internalCertManagement", "clientConnection", "featureGates", "tls"):
        if cfg.get(key) is not None:
            out[key] = copy.deepcopy(cfg[key])
    return yaml.safe_dump(out, sort_keys=False)


def user_agent(version: str = "v0.0.0", commit: str = "abcd01234567890", program: str = "jobset") -> str:
    """``jobset/<version up to its first '-'> (<os>/<arch>) <first 7 chars of commit>``."""
    os_name = platform.system().lower() or "unknown"
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine().lower(), platform.machine().lower())
    short_version = (version or "unknown").split("-", 1)[0]
    short_commit = (commit or "unknown")[:7]
    return f"{program}/{short_version} ({os_name}/{arch or 'unknown'}) {short_commit}"
