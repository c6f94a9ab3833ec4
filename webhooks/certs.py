"""Self-managed webhook certificates (docs/behaviour/trainer.md §6.4), as open-policy-agent's cert-controller
does it.

Why: the API server only calls webhooks over TLS it trusts. Without cert-manager the manager
keeps its own CA and serving certificate in the pre-created Secret
``<namespace>/kubeflow-trainer-webhook-cert`` (keys ``ca.crt``, ``ca.key``, ``tls.crt``,
``tls.key``), waits until the kubelet has mounted that Secret into the webhook server's
certificate directory, and injects the CA into every webhook of every webhook configuration
the running components serve (``validator.trainer.kubeflow.org`` for the trainer component, and
at level v2.3 its ``defaulter.trainer.kubeflow.org`` too, as v2.3.0's rotator does; the JobSet
mutating and validating configurations for the jobset component; upstream injects only the
Trainer's because JobSet runs its own manager). Only then are the certificates "ready":
readiness reports ``certificates are not ready`` until that moment, and the webhook server is
started once they are. A configuration of a component that is switched off is left alone.

Subjects, key types, usages and validity are upstream's: CA RSA-2048 ``CN=kubeflow-trainer-ca,
O=kubeflow-trainer`` valid 10 years; serving certificate RSA-2048 for
``<service>.<namespace>.svc``, serial 1, valid 1 year; both from one hour ago; PKCS#1 keys. A
certificate is renewed when it is invalid or expires within 90 days, checked at start and
every 12 hours. The rotator runs on every replica (no leader election).
"""

from __future__ import annotations

import asyncio
import base64
import datetime
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from manager.client.errors import RequestError
from manager.config import service_account_dir
from manager.meta.gvk import SECRET as SECRET_GVK
from manager.meta.object import Json
from manager.scheme import GroupVersionKind
from trainer.runtime.levels import RuntimeLevel

log = structlog.get_logger("trainer.certs")

__all__ = [
    "CA_NAME",
    "CA_ORGANIZATION",
    "CertConfig",
    "CertRotator",
    "CertsNotReadyError",
    "KeyMaterial",
    "WebhookConfiguration",
    "ca_valid",
    "generate_ca",
    "generate_serving_cert",
    "inject_ca_bundle",
    "level_trainer_webhook_configurations",
    "refresh_secret_data",
    "service_namespace",
    "serving_cert_valid",
]

CA_NAME = "kubeflow-trainer-ca"
CA_ORGANIZATION = "kubeflow-trainer"
VWC_NAME = "validator.trainer.kubeflow.org"
DEFAULT_NAMESPACE = "kubeflow-system"

CA_VALIDITY = datetime.timedelta(days=3650)
CERT_VALIDITY = datetime.timedelta(days=365)
CLOCK_SKEW = datetime.timedelta(hours=1)
LOOKAHEAD = datetime.timedelta(days=90)
ROTATION_CHECK_INTERVAL = 12 * 3600.0

CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"

VWC_GVK = GroupVersionKind("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration")
MWC_GVK = GroupVersionKind("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")


class CertsNotReadyError(Exception):
    """Certificates could not be mounted or injected; the manager exits with this message."""


def service_namespace(path: Path | None = None) -> str:
    """The pod's namespace from its service-account mount, else ``kubeflow-system``.

    The mount is read where in-cluster config reads the token (``KUBERNETES_SERVICE_ACCOUNT_DIR``
    overrides ``/var/run/secrets/kubernetes.io/serviceaccount``, see ``manager.config``).
    """
    if path is None:
        path = service_account_dir() / "namespace"
    try:
        return path.read_text().strip() or DEFAULT_NAMESPACE
    except OSError:
        return DEFAULT_NAMESPACE


# -- key material --------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyMaterial:
    """PEM certificate and PEM PKCS#1 private key."""

    cert: bytes
    key: bytes


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _key_pem(key: rsa.RSAPrivateKey) -> bytes:
    # PKCS#1: PEM block type "RSA PRIVATE KEY", as upstream writes it.
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=True,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )


def generate_ca(now: datetime.datetime) -> KeyMaterial:
    """A self-signed CA: CN and DNS SAN ``kubeflow-trainer-ca``, O ``kubeflow-trainer``, 10 years.

    Upstream uses serial 0, which ``cryptography`` refuses; we use a random serial (divergence).
    """
    key = _new_key()
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, CA_ORGANIZATION),
        ]
    )
    serial = x509.random_serial_number()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(serial if serial != 1 else 2)
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(CA_NAME)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyMaterial(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def generate_serving_cert(ca: KeyMaterial, dns_name: str, now: datetime.datetime) -> KeyMaterial:
    """The webhook serving certificate for ``dns_name``, serial 1, server auth, 1 year, signed by ``ca``."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    if not isinstance(ca_key, rsa.RSAPrivateKey):
        raise ValueError("the CA key is not an RSA key")
    key = _new_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + CERT_VALIDITY)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(dns_name)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return KeyMaterial(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _load_pair(pair: KeyMaterial) -> tuple[x509.Certificate, rsa.RSAPrivateKey] | None:
    try:
        cert = x509.load_pem_x509_certificate(pair.cert)
        key = serialization.load_pem_private_key(pair.key, password=None)
    except (ValueError, TypeError):
        return None
    if not isinstance(key, rsa.RSAPrivateKey) or cert.public_key() != key.public_key():
        return None
    return cert, key


def _valid_at(cert: x509.Certificate, at: datetime.datetime) -> bool:
    return cert.not_valid_before_utc <= at <= cert.not_valid_after_utc


def ca_valid(ca: KeyMaterial, now: datetime.datetime) -> bool:
    """A parseable CA whose key matches, marked CA, still valid 90 days from now."""
    loaded = _load_pair(ca)
    if loaded is None:
        return False
    cert, _ = loaded
    try:
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return False
    return is_ca and _valid_at(cert, now + LOOKAHEAD)


def serving_cert_valid(ca: KeyMaterial, pair: KeyMaterial, dns_name: str, now: datetime.datetime) -> bool:
    """Signed by ``ca``, for ``dns_name``, for server auth, key matching, valid 90 days from now."""
    loaded = _load_pair(pair)
    if loaded is None:
        return False
    cert, _ = loaded
    try:
        ca_cert = x509.load_pem_x509_certificate(ca.cert)
    except ValueError:
        return False
    ca_public = ca_cert.public_key()
    if cert.issuer != ca_cert.subject or not isinstance(ca_public, rsa.RSAPublicKey):
        return False
    hash_algorithm = cert.signature_hash_algorithm
    if hash_algorithm is None:
        return False
    try:
        ca_public.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), hash_algorithm)
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except (InvalidSignature, x509.ExtensionNotFound):
        return False
    return (
        dns_name in names.get_values_for_type(x509.DNSName)
        and ExtendedKeyUsageOID.SERVER_AUTH in usages
        and _valid_at(cert, now + LOOKAHEAD)
    )


def _decode(data: Json, key: str) -> bytes:
    value = data.get(key) or ""
    try:
        return base64.b64decode(value)
    except ValueError:
        return b""


def refresh_secret_data(data: Json, dns_name: str, now: datetime.datetime) -> Json | None:
    """The Secret's new ``data`` (base64 values) if anything must be regenerated, else ``None``.

    An invalid or expiring CA regenerates everything; otherwise an invalid or expiring serving
    certificate is re-issued with the existing CA.
    """
    ca = KeyMaterial(_decode(data, CA_CERT), _decode(data, CA_KEY))
    if not ca_valid(ca, now):
        ca = generate_ca(now)
    elif serving_cert_valid(ca, KeyMaterial(_decode(data, TLS_CERT), _decode(data, TLS_KEY)), dns_name, now):
        return None
    serving = generate_serving_cert(ca, dns_name, now)
    encoded = {CA_CERT: ca.cert, CA_KEY: ca.key, TLS_CERT: serving.cert, TLS_KEY: serving.key}
    return {**data, **{k: base64.b64encode(v).decode() for k, v in encoded.items()}}


def inject_ca_bundle(vwc: Json, ca_pem: bytes) -> bool:
    """Set ``clientConfig.caBundle`` of every webhook to the CA; True if anything changed."""
    bundle = base64.b64encode(ca_pem).decode()
    changed = False
    for hook in vwc.get("webhooks") or ():
        client_config = hook.setdefault("clientConfig", {})
        if client_config.get("caBundle") != bundle:
            client_config["caBundle"] = bundle
            changed = True
    return changed


# -- the runnable --------------------------------------------------------------------------------


@dataclass(frozen=True)
class WebhookConfiguration:
    """A cluster-scoped admission webhook configuration whose CA bundles the rotator keeps."""

    name: str
    mutating: bool = False

    @property
    def gvk(self) -> GroupVersionKind:
        return MWC_GVK if self.mutating else VWC_GVK

    def __str__(self) -> str:
        return f"{self.gvk.kind}/{self.name}"


TRAINER_WEBHOOK_CONFIGURATIONS = (WebhookConfiguration(VWC_NAME),)


def level_trainer_webhook_configurations(level: RuntimeLevel) -> tuple[WebhookConfiguration, ...]:
    """The trainer component's configurations that only some levels have: the TrainJob
    defaulter's MutatingWebhookConfiguration (v2.3: ``defaulter.trainer.kubeflow.org``)."""
    if level.trainjob_defaulter is None:
        return ()
    return (WebhookConfiguration(level.trainjob_defaulter, mutating=True),)


@dataclass
class CertConfig:
    """Where the certificates live; names default to the shipped deployment's."""

    secret_name: str = "kubeflow-trainer-webhook-cert"
    service_name: str = "kubeflow-trainer-controller-manager"
    namespace: str = field(default_factory=service_namespace)
    cert_dir: Path = Path("/tmp/k8s-webhook-server/serving-certs")
    webhook_configurations: tuple[WebhookConfiguration, ...] = TRAINER_WEBHOOK_CONFIGURATIONS
    """Every configuration whose webhooks get the CA (those of the components that run)."""
    mount_backoff: tuple[float, int] = (1.0, 10)
    """First delay and number of checks while waiting for ``tls.crt`` to be mounted (doubling)."""
    write_backoff: tuple[float, int] = (0.01, 10)
    """First delay and number of attempts for Secret and webhook-configuration writes (doubling)."""
    rotation_check_interval: float = ROTATION_CHECK_INTERVAL
    injection_check_interval: float = 60.0
    """How often the CA injection is re-checked (someone may re-apply the configuration)."""

    @property
    def dns_name(self) -> str:
        return f"{self.service_name}.{self.namespace}.svc"


Clock = Callable[[], datetime.datetime]


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class CertRotator:
    """Runnable (no leader election): keeps the Secret's certificates valid and the CA injected.

    ``ready`` is set once the certificates are in the Secret, mounted and injected; the
    ``on_ready`` callbacks then run once (the entry point starts the webhook server there).
    """

    needs_leader_election = False

    def __init__(self, client: Any, config: CertConfig, *, clock: Clock = _utcnow) -> None:
        self.client = client
        self.config = config
        self.clock = clock
        self.ready = asyncio.Event()
        self._on_ready: list[Callable[[], Awaitable[None] | None]] = []

    def on_ready(self, callback: Callable[[], Awaitable[None] | None]) -> None:
        self._on_ready.append(callback)

    def is_ready(self) -> bool:
        return self.ready.is_set()

    async def start(self, started: asyncio.Event) -> None:
        started.set()
        ca_pem = await self.ensure_certs()
        await self.wait_mounted()
        await self.inject(ca_pem)
        self.ready.set()
        log.info("certificates are ready", secret=f"{self.config.namespace}/{self.config.secret_name}")
        for callback in self._on_ready:
            result = callback()
            if result is not None:
                await result
        await self._maintain()

    async def _maintain(self) -> None:
        """Re-check the injection often and the rotation every 12 hours, until cancelled."""
        since_rotation = 0.0
        interval = min(self.config.injection_check_interval, self.config.rotation_check_interval)
        while True:
            await asyncio.sleep(interval)
            since_rotation += interval
            try:
                if since_rotation >= self.config.rotation_check_interval:
                    since_rotation = 0.0
                    ca_pem = await self.ensure_certs()
                else:
                    ca_pem = await self._current_ca()
                await self.inject(ca_pem)
            except (RequestError, CertsNotReadyError) as err:
                log.error("certificate maintenance failed; retrying later", error=str(err))

    async def _secret(self) -> Json:
        secret: Json = await self.client.get(SECRET_GVK, self.config.secret_name, self.config.namespace)
        secret.setdefault("apiVersion", "v1")
        secret.setdefault("kind", "Secret")
        return secret

    async def _current_ca(self) -> bytes:
        return _decode((await self._secret()).get("data") or {}, CA_CERT)

    async def ensure_certs(self) -> bytes:
        """Regenerate what is missing, invalid or expiring and write the Secret; returns the CA PEM."""
        delay, attempts = self.config.write_backoff
        for attempt in range(attempts):
            try:
                secret = await self._secret()
                data = secret.get("data") or {}
                fresh = refresh_secret_data(data, self.config.dns_name, self.clock())
                if fresh is None:
                    return _decode(data, CA_CERT)
                secret["data"] = fresh
                await self.client.update(secret)
                log.info("refreshed webhook certificates", secret=self.config.secret_name)
                return _decode(fresh, CA_CERT)
            except RequestError as err:  # a missing Secret, a conflict with another replica, ...
                log.error("refreshing the webhook certificates failed", error=str(err), attempt=attempt + 1)
                if attempt + 1 < attempts:
                    await asyncio.sleep(delay * 2**attempt)
        raise CertsNotReadyError("could not refresh cert")

    async def wait_mounted(self) -> None:
        """Wait (doubling delays) until the kubelet has put ``tls.crt`` into the certificate dir."""
        delay, checks = self.config.mount_backoff
        target = self.config.cert_dir / TLS_CERT
        for attempt in range(checks):
            if target.exists():
                return
            if attempt + 1 < checks:
                await asyncio.sleep(delay * 2**attempt)
        raise CertsNotReadyError("could not mount certs")

    async def inject(self, ca_pem: bytes) -> None:
        """Put the CA into every webhook of every configuration (retrying conflicts).

        All configurations must be injected before the certificates count as ready: a webhook
        left without the CA refuses every request it sees (``failurePolicy: Fail``).
        """
        for configuration in self.config.webhook_configurations:
            await self._inject_one(configuration, ca_pem)

    async def _inject_one(self, configuration: WebhookConfiguration, ca_pem: bytes) -> None:
        delay, attempts = self.config.write_backoff
        gvk = configuration.gvk
        for attempt in range(attempts):
            try:
                obj: Json = await self.client.get(gvk, configuration.name)
                obj.setdefault("apiVersion", gvk.api_version)
                obj.setdefault("kind", gvk.kind)
                if inject_ca_bundle(obj, ca_pem):
                    await self.client.update(obj)
                    log.info("injected the CA bundle", webhook_configuration=str(configuration))
                return
            except RequestError as err:
                log.error(
                    "injecting the CA bundle failed",
                    webhook_configuration=str(configuration),
                    error=str(err),
                    attempt=attempt + 1,
                )
                if attempt + 1 < attempts:
                    await asyncio.sleep(delay * 2**attempt)
        raise CertsNotReadyError("could not inject certs to webhooks")
