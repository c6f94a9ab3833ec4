"""Webhook certificate rotation (docs/behaviour/trainer.md §6.4): key material, renewal decisions, injection, rotator steps."""

from __future__ import annotations

import asyncio
import base64
import datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from manager.testing.eventually import eventually
from manager.testing.fake import FakeClient
from trainer.components import COMPONENTS
from webhooks.certs import (
    MWC_GVK,
    SECRET_GVK,
    VWC_GVK,
    CertConfig,
    CertRotator,
    CertsNotReadyError,
    KeyMaterial,
    WebhookConfiguration,
    ca_valid,
    generate_ca,
    generate_serving_cert,
    inject_ca_bundle,
    refresh_secret_data,
    service_namespace,
    serving_cert_valid,
)

Json = dict[str, Any]
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
DNS = "kubeflow-trainer-controller-manager.kubeflow-system.svc"


def _cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def _b64(data: Json, key: str) -> bytes:
    return base64.b64decode(data[key])


def test_ca_has_upstream_subject_key_usage_and_validity() -> None:
    ca = generate_ca(NOW)
    cert = _cert(ca.cert)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "kubeflow-trainer-ca"
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "kubeflow-trainer"
    assert cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    ) == ["kubeflow-trainer-ca"]
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert (usage.digital_signature, usage.key_encipherment, usage.key_cert_sign) == (True, True, True)
    assert cert.not_valid_before_utc == NOW - datetime.timedelta(hours=1)
    assert cert.not_valid_after_utc == NOW + datetime.timedelta(days=3650)
    key = cert.public_key()
    assert isinstance(key, rsa.RSAPublicKey) and key.key_size == 2048
    assert ca.key.startswith(b"-----BEGIN RSA PRIVATE KEY-----\n")
    assert cert.serial_number not in (0, 1)  # upstream: 0, which cryptography refuses (divergence)


def test_serving_cert_is_for_the_service_and_signed_by_the_ca() -> None:
    ca = generate_ca(NOW)
    serving = generate_serving_cert(ca, DNS, NOW)
    cert = _cert(serving.cert)
    assert cert.serial_number == 1
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == DNS
    assert cert.issuer == _cert(ca.cert).subject
    assert cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    ) == [DNS]
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH
    ]
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert (usage.digital_signature, usage.key_encipherment, usage.key_cert_sign) == (True, True, False)
    assert cert.not_valid_after_utc == NOW + datetime.timedelta(days=365)
    assert serving.key.startswith(b"-----BEGIN RSA PRIVATE KEY-----\n")
    assert serving_cert_valid(ca, serving, DNS, NOW)
    assert not serving_cert_valid(ca, serving, "other.svc", NOW)
    assert not serving_cert_valid(generate_ca(NOW), serving, DNS, NOW)  # another CA


def test_validity_looks_90_days_ahead() -> None:
    ca = generate_ca(NOW)
    serving = generate_serving_cert(ca, DNS, NOW)
    assert serving_cert_valid(ca, serving, DNS, NOW + datetime.timedelta(days=274))
    assert not serving_cert_valid(ca, serving, DNS, NOW + datetime.timedelta(days=276))
    assert ca_valid(ca, NOW + datetime.timedelta(days=3650 - 91))
    assert not ca_valid(ca, NOW + datetime.timedelta(days=3650 - 89))
    assert not ca_valid(KeyMaterial(b"", b""), NOW)
    assert not ca_valid(KeyMaterial(ca.cert, serving.key), NOW)  # key does not match


def test_empty_secret_gets_all_four_keys_and_valid_data_is_kept() -> None:
    data = refresh_secret_data({}, DNS, NOW)
    assert data is not None and sorted(data) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    ca = KeyMaterial(_b64(data, "ca.crt"), _b64(data, "ca.key"))
    assert serving_cert_valid(ca, KeyMaterial(_b64(data, "tls.crt"), _b64(data, "tls.key")), DNS, NOW)
    assert refresh_secret_data(data, DNS, NOW + datetime.timedelta(days=100)) is None


def test_expiring_serving_cert_is_reissued_with_the_same_ca() -> None:
    data = refresh_secret_data({}, DNS, NOW)
    assert data is not None
    later = NOW + datetime.timedelta(days=300)
    renewed = refresh_secret_data(data, DNS, later)
    assert renewed is not None
    assert renewed["ca.crt"] == data["ca.crt"] and renewed["ca.key"] == data["ca.key"]
    assert renewed["tls.crt"] != data["tls.crt"]


def test_expiring_ca_regenerates_everything() -> None:
    data = refresh_secret_data({}, DNS, NOW)
    assert data is not None
    renewed = refresh_secret_data(data, DNS, NOW + datetime.timedelta(days=3600))
    assert (
        renewed is not None and renewed["ca.crt"] != data["ca.crt"] and renewed["tls.crt"] != data["tls.crt"]
    )


def test_inject_sets_every_webhook_once() -> None:
    vwc: Json = {"webhooks": [{"name": "a", "clientConfig": {"caBundle": "old"}}, {"name": "b"}]}
    assert inject_ca_bundle(vwc, b"CA")
    assert [h["clientConfig"]["caBundle"] for h in vwc["webhooks"]] == [base64.b64encode(b"CA").decode()] * 2
    assert not inject_ca_bundle(vwc, b"CA")


def test_namespace_comes_from_the_service_account_mount(tmp_path: Path) -> None:
    mounted = tmp_path / "namespace"
    mounted.write_text("trainers\n")
    assert service_namespace(mounted) == "trainers"
    assert service_namespace(tmp_path / "missing") == "kubeflow-system"
    assert CertConfig(namespace="trainers").dns_name == "kubeflow-trainer-controller-manager.trainers.svc"


def _secret() -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "kubeflow-trainer-webhook-cert", "namespace": "kubeflow-system"},
    }


def _vwc() -> Json:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "validator.trainer.kubeflow.org"},
        "webhooks": [{"name": "validator.trainjob.trainer.kubeflow.org", "clientConfig": {}}],
    }


def _config(tmp_path: Path) -> CertConfig:
    return CertConfig(
        namespace="kubeflow-system", cert_dir=tmp_path, mount_backoff=(0.001, 3), write_backoff=(0.001, 3)
    )


def _fake(*objects: Json) -> FakeClient:
    return FakeClient(list(objects), cluster_scoped=[VWC_GVK, MWC_GVK])


def _jobset_configurations() -> list[Json]:
    """The JobSet configurations as shipped: one mutating, one validating, two webhooks each."""
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": name},
            "webhooks": [{"name": hook, "clientConfig": {"service": {"name": "svc"}}} for hook in hooks],
        }
        for kind, name, hooks in (
            (
                "MutatingWebhookConfiguration",
                "jobset-mutating-webhook-configuration",
                ["mjobset.kb.io", "mpod.kb.io"],
            ),
            (
                "ValidatingWebhookConfiguration",
                "jobset-validating-webhook-configuration",
                ["vjobset.kb.io", "vpod.kb.io"],
            ),
        )
    ]


def _bundles(obj: Json) -> list[str | None]:
    return [h["clientConfig"].get("caBundle") for h in obj["webhooks"]]


def _configurations(*names: str) -> tuple[WebhookConfiguration, ...]:
    """The configurations the named components declare (as the entry point collects them)."""
    return tuple(c for comp in COMPONENTS if comp.name in names for c in comp.webhook_configurations)


async def test_rotator_fills_the_secret_once_and_injects_the_ca(tmp_path: Path) -> None:
    client = _fake(_secret(), _vwc())
    rotator = CertRotator(client, _config(tmp_path), clock=lambda: NOW)
    ca_pem = await rotator.ensure_certs()
    secret = await client.get(SECRET_GVK, "kubeflow-trainer-webhook-cert", "kubeflow-system")
    assert _b64(secret["data"], "ca.crt") == ca_pem
    assert await rotator.ensure_certs() == ca_pem
    assert client.requests["update"] == 1  # the second check found valid certificates
    await rotator.inject(ca_pem)
    vwc = await client.get(VWC_GVK, "validator.trainer.kubeflow.org")
    assert vwc["webhooks"][0]["clientConfig"]["caBundle"] == base64.b64encode(ca_pem).decode()


async def test_rotator_gives_up_with_upstream_messages(tmp_path: Path) -> None:
    rotator = CertRotator(_fake(_secret()), _config(tmp_path), clock=lambda: NOW)
    with pytest.raises(CertsNotReadyError, match=r"^could not refresh cert$"):
        await CertRotator(_fake(), _config(tmp_path), clock=lambda: NOW).ensure_certs()  # no Secret
    with pytest.raises(CertsNotReadyError, match=r"^could not mount certs$"):
        await rotator.wait_mounted()
    with pytest.raises(CertsNotReadyError, match=r"^could not inject certs to webhooks$"):
        await rotator.inject(b"CA")  # no webhook configuration


async def test_rotator_becomes_ready_after_mount_and_injection(tmp_path: Path) -> None:
    client = _fake(_secret(), _vwc())
    rotator = CertRotator(client, _config(tmp_path), clock=lambda: NOW)
    (tmp_path / "tls.crt").write_text("mounted")
    called: list[str] = []
    rotator.on_ready(lambda: called.append("ready"))
    started = asyncio.Event()
    task = asyncio.create_task(rotator.start(started))
    try:
        await asyncio.wait_for(rotator.ready.wait(), 10)
        assert started.is_set() and rotator.is_ready()
        await asyncio.sleep(0)
        assert called == ["ready"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_maintenance_re_injects_a_removed_ca(tmp_path: Path) -> None:
    client = _fake(_secret(), _vwc())
    config = _config(tmp_path)
    config.injection_check_interval = 0.01
    rotator = CertRotator(client, config, clock=lambda: NOW)
    ca_pem = await rotator.ensure_certs()
    await rotator.inject(ca_pem)
    vwc = await client.get(VWC_GVK, "validator.trainer.kubeflow.org")
    vwc["webhooks"][0]["clientConfig"].pop("caBundle")  # someone re-applied the configuration
    await client.update(vwc)
    task = asyncio.create_task(rotator._maintain())
    try:

        async def reinjected() -> None:
            current = await client.get(VWC_GVK, "validator.trainer.kubeflow.org")
            assert current["webhooks"][0]["clientConfig"].get("caBundle") == base64.b64encode(ca_pem).decode()

        await eventually(reinjected, timeout=10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_components_declare_the_shipped_webhook_configurations() -> None:
    declared = {c.name: [str(w) for w in c.webhook_configurations] for c in COMPONENTS}
    assert declared == {
        "jobset": [
            "MutatingWebhookConfiguration/jobset-mutating-webhook-configuration",
            "ValidatingWebhookConfiguration/jobset-validating-webhook-configuration",
        ],
        "scheduling": [],
        "trainer": ["ValidatingWebhookConfiguration/validator.trainer.kubeflow.org"],
    }


async def test_rotator_injects_mutating_and_validating_configurations_of_every_component(
    tmp_path: Path,
) -> None:
    client = _fake(_secret(), _vwc(), *_jobset_configurations())
    config = _config(tmp_path)
    config.webhook_configurations = _configurations("trainer", "jobset", "scheduling")
    rotator = CertRotator(client, config, clock=lambda: NOW)
    ca_pem = await rotator.ensure_certs()
    await rotator.inject(ca_pem)
    bundle = base64.b64encode(ca_pem).decode()
    mutating = await client.get(MWC_GVK, "jobset-mutating-webhook-configuration")
    validating = await client.get(VWC_GVK, "jobset-validating-webhook-configuration")
    trainer = await client.get(VWC_GVK, "validator.trainer.kubeflow.org")
    assert _bundles(mutating) == _bundles(validating) == [bundle, bundle]
    assert _bundles(trainer) == [bundle]
    assert mutating["webhooks"][0]["clientConfig"]["service"] == {"name": "svc"}  # only the CA changes
    updates = client.requests["update"]
    await rotator.inject(ca_pem)
    assert client.requests["update"] == updates, "an injected configuration is written again"


async def test_a_switched_off_component_keeps_its_configurations_untouched(tmp_path: Path) -> None:
    client = _fake(_secret(), _vwc(), *_jobset_configurations())
    config = _config(tmp_path)
    config.webhook_configurations = _configurations("trainer")  # --controllers=-jobset
    (tmp_path / "tls.crt").write_text("mounted")
    rotator = CertRotator(client, config, clock=lambda: NOW)
    task = asyncio.create_task(rotator.start(asyncio.Event()))
    try:
        await asyncio.wait_for(rotator.ready.wait(), 10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert _bundles(await client.get(VWC_GVK, "validator.trainer.kubeflow.org"))[0]
    assert _bundles(await client.get(MWC_GVK, "jobset-mutating-webhook-configuration")) == [None, None]
    assert _bundles(await client.get(VWC_GVK, "jobset-validating-webhook-configuration")) == [None, None]


async def test_readiness_waits_for_every_configuration(tmp_path: Path) -> None:
    """A missing JobSet configuration keeps the rotator unready and fails it with upstream's text."""
    client = _fake(_secret(), _vwc(), _jobset_configurations()[1])  # no mutating configuration
    config = _config(tmp_path)
    config.webhook_configurations = _configurations("trainer", "jobset")
    (tmp_path / "tls.crt").write_text("mounted")
    rotator = CertRotator(client, config, clock=lambda: NOW)
    with pytest.raises(CertsNotReadyError, match=r"^could not inject certs to webhooks$"):
        await rotator.start(asyncio.Event())
    assert not rotator.is_ready()
