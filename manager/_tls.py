"""TLS for the metrics endpoint: files from a cert dir, else an in-memory self-signed pair.

As controller-runtime's secure metrics serving: TLS 1.2 minimum, ALPN ``http/1.1`` only (HTTP/2
stays off, the CVE-2023-44487 mitigation upstream applies by default), then the server's
``TLSOption`` functions (controller-runtime's ``TLSOpts``) applied in order, and when no
``tls.crt``/``tls.key`` exist a self-signed certificate for ``localhost``/``127.0.0.1`` is made
at start. Python's ``ssl`` only loads key material from files, so the generated pair is written
to a private temporary directory, loaded and deleted.
"""

from __future__ import annotations

import ipaddress
import ssl
import tempfile
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

TLSOption = Callable[[ssl.SSLContext], None]
"""Changes a server's context before it serves (controller-runtime's ``func(*tls.Config)``)."""


def new_server_context(tls_opts: Iterable[TLSOption] = ()) -> ssl.SSLContext:
    """A server context with the secure defaults (TLS 1.2 minimum, ALPN ``http/1.1``), then ``tls_opts``."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    for option in tls_opts:
        option(context)
    return context


def self_signed_pair(
    hosts: tuple[str, ...] = ("localhost",), ips: tuple[str, ...] = ("127.0.0.1",), *, days: int = 365
) -> tuple[bytes, bytes]:
    """A PEM certificate and PEM key (ECDSA P-256) valid for ``hosts`` and ``ips``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, f"{hosts[0]}@{int(datetime.now(UTC).timestamp())}")]
    )
    now = datetime.now(UTC)
    sans: list[x509.GeneralName] = [x509.DNSName(h) for h in hosts]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def server_ssl_context(
    cert_dir: str | Path | None = None,
    *,
    cert_name: str = "tls.crt",
    key_name: str = "tls.key",
    tls_opts: Iterable[TLSOption] = (),
) -> ssl.SSLContext:
    """A server context from ``cert_dir`` if both files exist there, else from a fresh self-signed pair."""
    context = new_server_context(tls_opts)
    if cert_dir is not None:
        cert_path, key_path = Path(cert_dir) / cert_name, Path(cert_dir) / key_name
        if cert_path.is_file() and key_path.is_file():
            context.load_cert_chain(cert_path, key_path)
            return context
    cert, key = self_signed_pair()
    with tempfile.TemporaryDirectory(prefix="metrics-serving-cert-") as tmp:
        cert_path, key_path = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert_path.write_bytes(cert)
        key_path.touch(mode=0o600)
        key_path.write_bytes(key)
        context.load_cert_chain(cert_path, key_path)
    return context
