"""``config.trainer.kubeflow.org/v1alpha1`` Configuration: the manager's config file.

Unlike the cluster APIs, the file is decoded strictly (an unknown field is an error, as in
upstream), then defaulted and validated with upstream's messages. The model itself still keeps
unknown fields, so ``load`` is where strictness lives.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field, StrictFloat, StrictInt, ValidationError

from trainer import features
from trainer.api import config_constants as c
from trainer.api import config_tls
from trainer.api.base import Bool, Int32, KindModel, Model, Str


class ControllerWebhook(Model):
    port: Int32 | None = None
    host: Str | None = None


class ControllerMetrics(Model):
    bind_address: Str | None = None
    secure_serving: Bool | None = None


class ControllerHealth(Model):
    health_probe_bind_address: Str | None = None
    readiness_endpoint_name: Str | None = None
    liveness_endpoint_name: Str | None = None


class LeaderElectionConfiguration(Model):
    """component-base LeaderElectionConfiguration; durations are Go duration strings."""

    leader_elect: Bool | None = None
    lease_duration: Str | None = None
    renew_deadline: Str | None = None
    retry_period: Str | None = None
    resource_lock: Str | None = None
    resource_name: Str | None = None
    resource_namespace: Str | None = None


class ControllerConfigurationSpec(Model):
    group_kind_concurrency: dict[str, Int32] | None = None


class CertManagement(Model):
    enable: Bool | None = None
    webhook_service_name: Str | None = None
    webhook_secret_name: Str | None = None


class ClientConnection(Model):
    qps: StrictFloat | StrictInt | None = Field(default=None, alias="qps")
    burst: Int32 | None = None


class StatusServer(Model):
    """Upstream v2.2 ``statusServer``: the TrainJobStatus endpoint's port and client limits."""

    port: Int32 | None = None
    qps: StrictFloat | StrictInt | None = Field(default=None, alias="qps")
    burst: Int32 | None = None


class TLSOptions(Model):
    """Trainer v2.3.0 ``tls``: the TLS of the metrics, webhook and status servers (trainer.api.config_tls)."""

    min_version: Str | None = None
    cipher_suites: list[Str] | None = None
    next_protos: list[Str] | None = None


class Configuration(KindModel):
    api_version: ClassVar[str] = c.API_VERSION
    kind: ClassVar[str] = c.KIND
    plural: ClassVar[str] = "configurations"
    singular: ClassVar[str] = "configuration"

    webhook: ControllerWebhook | None = None
    leader_election: LeaderElectionConfiguration | None = None
    metrics: ControllerMetrics | None = None
    health: ControllerHealth | None = None
    controller: ControllerConfigurationSpec | None = None
    cert_management: CertManagement | None = None
    client_connection: ClientConnection | None = None
    # Upstream v2.2 fields (read only with the TrainJobStatus gate on; see trainer.features).
    status_server: StatusServer | None = None
    feature_gates: dict[str, Bool] | None = None
    # Upstream v2.3 field, read at both levels (docs/divergences.md, "The Configuration's tls").
    tls: TLSOptions | None = None
    # Third-party runtime plugins to run, in order (entry-point group trainer.runtime.plugins;
    # docs/plugins.md). Not in upstream.
    runtime_plugins: list[Str] | None = None
    # How Pods are cached (trainer.controllers.podcache, docs/scale.md): "Minimal" (default)
    # keeps only the Pods and fields the controllers read; "Full" every Pod whole. Not in upstream.
    pod_cache: Str | None = None
    # The upstream line whose API and behaviour the manager has (trainer/levels, docs/levels.md):
    # "v2.1" (Trainer v2.1.0 + JobSet v0.10.1, the default) or "v2.3". Not in upstream.
    api_level: Str | None = None


class ConfigurationError(ValueError):
    """A config file that cannot be decoded or fails validation; the text is upstream's."""


def _unknown_fields(model: BaseModel, path: str) -> list[str]:
    found = [f"{path}{key}" for key in (model.__pydantic_extra__ or {}) if key not in ("apiVersion", "kind")]
    for name in type(model).model_fields:
        value = getattr(model, name)
        alias = type(model).model_fields[name].alias or name
        if isinstance(value, BaseModel):
            found.extend(_unknown_fields(value, f"{path}{alias}."))
    return found


def load(data: dict[str, Any] | None) -> Configuration:
    """Decode strictly, then default and validate, as the manager does at start-up."""
    try:
        cfg = Configuration.model_validate(data or {})
    except ValidationError as err:
        raise ConfigurationError(c.DecodeErrorPrefix + str(err)) from err
    unknown = _unknown_fields(cfg, "")
    if unknown:
        # The text of apimachinery's strict decoder.
        fields = ", ".join(f'unknown field "{u}"' for u in unknown)
        raise ConfigurationError(f"{c.DecodeErrorPrefix}strict decoding error: {fields}")
    cfg = set_defaults(cfg)
    errors = validate(cfg)
    if errors:
        raise ConfigurationError(c.InvalidConfigurationPrefix + _aggregate(errors))
    return cfg


def set_defaults(cfg: Configuration) -> Configuration:
    """Upstream's ``SetDefaults_Configuration`` on a copy. ``webhook.host`` missing means ``""``."""
    out = cfg.model_copy(deep=True)
    out.webhook = out.webhook or ControllerWebhook()
    if out.webhook.port is None:
        out.webhook.port = c.DefaultWebhookPort
    if out.webhook.host is None:
        out.webhook.host = ""
    out.metrics = out.metrics or ControllerMetrics()
    if not out.metrics.bind_address:
        out.metrics.bind_address = c.DefaultMetricsBindAddress
    if out.metrics.secure_serving is None:
        out.metrics.secure_serving = True
    out.health = out.health or ControllerHealth()
    if not out.health.health_probe_bind_address:
        out.health.health_probe_bind_address = c.DefaultHealthProbeBindAddress
    if not out.health.readiness_endpoint_name:
        out.health.readiness_endpoint_name = c.DefaultReadinessEndpointName
    if not out.health.liveness_endpoint_name:
        out.health.liveness_endpoint_name = c.DefaultLivenessEndpointName
    out.cert_management = out.cert_management or CertManagement()
    if out.cert_management.enable is None:
        out.cert_management.enable = True
    if not out.cert_management.webhook_service_name:
        out.cert_management.webhook_service_name = c.DefaultWebhookServiceName
    if not out.cert_management.webhook_secret_name:
        out.cert_management.webhook_secret_name = c.DefaultWebhookSecretName
    out.client_connection = out.client_connection or ClientConnection()
    if out.client_connection.qps is None:
        out.client_connection.qps = c.DefaultClientConnectionQPS
    if out.client_connection.burst is None:
        out.client_connection.burst = c.DefaultClientConnectionBurst
    return out


def status_server_defaults(cfg: Configuration) -> StatusServer:
    """``statusServer`` with upstream v2.2's defaults (port 10443, qps 5, burst 10).

    Kept out of ``set_defaults`` so the defaulted Configuration of a v2.1 user is unchanged;
    only the TrainJobStatus gate reads it.
    """
    given = cfg.status_server or StatusServer()
    return StatusServer(
        port=given.port if given.port is not None else c.DefaultStatusServerPort,
        qps=given.qps if given.qps is not None else c.DefaultStatusServerQPS,
        burst=given.burst if given.burst is not None else c.DefaultStatusServerBurst,
    )


def _go_number(value: float) -> str:
    """How Go's ``%v`` prints the number (``50``, ``-0.5``)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _port_errors(path: str, port: int | None) -> list[str]:
    if port is not None and not 1 <= port <= 65535:
        return [f"{path}: Invalid value: {port}: must be between 1 and 65535"]
    return []


def _rate_limit_errors(path: str, qps: float | None, burst: int | None) -> list[str]:
    """A client rate limit's ``qps`` and ``burst``: neither may be negative."""
    errors: list[str] = []
    if qps is not None and qps < 0:
        errors.append(f"{path}.qps: Invalid value: {_go_number(qps)}: must be greater than or equal to 0")
    if burst is not None and burst < 0:
        errors.append(f"{path}.burst: Invalid value: {burst}: must be greater than or equal to 0")
    return errors


def validate(cfg: Configuration) -> list[str]:
    """Upstream's field errors, in its order."""
    errors = _port_errors("webhook.port", cfg.webhook.port if cfg.webhook else None)
    if (conn := cfg.client_connection) is not None:
        errors += _rate_limit_errors("clientConnection", conn.qps, conn.burst)
    if cfg.pod_cache is not None and cfg.pod_cache not in ("Full", "Minimal"):
        errors.append(f'podCache: Unsupported value: "{cfg.pod_cache}": supported values: "Full", "Minimal"')
    if cfg.api_level is not None and cfg.api_level not in c.ApiLevels:
        supported = ", ".join(f'"{name}"' for name in c.ApiLevels)
        errors.append(f'apiLevel: Unsupported value: "{cfg.api_level}": supported values: {supported}')
    if (status := cfg.status_server) is not None:
        errors += _port_errors("statusServer.port", status.port)
        errors += _rate_limit_errors("statusServer", status.qps, status.burst)
    errors.extend(features.validate(cfg.feature_gates or {}))
    if (tls := cfg.tls) is not None:
        errors += config_tls.validate(tls.min_version, tls.cipher_suites, tls.next_protos)
    concurrency = (cfg.controller.group_kind_concurrency if cfg.controller else None) or {}
    for group_kind in sorted(concurrency):
        value = concurrency[group_kind]
        if value <= 0:
            errors.append(
                f"controller.groupKindConcurrency[{group_kind}]: Invalid value: {value}: must be greater than 0"
            )
    return errors


def _aggregate(errors: list[str]) -> str:
    """k8s ``utilerrors.Aggregate`` text: one error bare, several as ``[a, b]``."""
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
