"""A throwaway certificate authority for local control planes and webhook servers.

Every control plane gets fresh CAs: one signs the apiserver's serving certificate, one signs
client certificates (user = CN, groups = O), one signs service-account tokens. Keys are ECDSA
P-256, as envtest's TinyCA uses; certificates carry an IP SAN because Python's ``ssl``
verifies ``https://127.0.0.1`` against IP SANs only.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = timedelta(days=7)
_CLOCK_SKEW = timedelta(hours=1)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def public_key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate and its PEM private key."""

    cert: bytes
    key: bytes

    def write(self, cert_path: Path, key_path: Path) -> None:
        cert_path.write_bytes(self.cert)
        key_path.write_bytes(self.key)
        key_path.chmod(0o600)


class TinyCA:
    """A self-signed CA that issues short-lived server and client certificates."""

    def __init__(self, common_name: str) -> None:
        self.key = _new_key()
        now = datetime.now(UTC)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _CLOCK_SKEW)
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        return cert_pem(self.cert)

    @property
    def key_pem(self) -> bytes:
        return key_pem(self.key)

    def issue_server(self, common_name: str, *, ips: list[str], dns: list[str]) -> KeyPair:
        sans: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        sans += [x509.DNSName(d) for d in dns]
        return self._issue(common_name, [], ExtendedKeyUsageOID.SERVER_AUTH, sans)

    def issue_client(self, user: str, groups: list[str] | None = None) -> KeyPair:
        return self._issue(user, groups or [], ExtendedKeyUsageOID.CLIENT_AUTH, [])

    def _issue(
        self,
        common_name: str,
        organizations: list[str],
        usage: x509.ObjectIdentifier,
        sans: list[x509.GeneralName],
    ) -> KeyPair:
        key = _new_key()
        now = datetime.now(UTC)
        subject = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        subject += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(subject))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _CLOCK_SKEW)
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return KeyPair(cert_pem(builder.sign(self.key, hashes.SHA256())), key_pem(key))
