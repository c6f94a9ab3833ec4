"""The throwaway CA issues certificates that TLS clients and servers actually accept."""

from __future__ import annotations

import ssl
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from manager.envtest.certs import TinyCA


def test_server_certificate_verifies_for_ip_and_name(tmp_path: Path) -> None:
    ca = TinyCA("test-ca")
    pair = ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"])
    cert = x509.load_pem_x509_certificate(pair.cert)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]
    # The pair loads into a real TLS server context, and clients trust the CA.
    pair.write(tmp_path / "tls.crt", tmp_path / "tls.key")
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    ssl.create_default_context(cadata=ca.cert_pem.decode())
    assert (tmp_path / "tls.key").stat().st_mode & 0o777 == 0o600


def test_client_certificate_carries_user_and_groups() -> None:
    pair = TinyCA("clients").issue_client("admin", ["system:masters"])
    subject = x509.load_pem_x509_certificate(pair.cert).subject
    assert subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "admin"
    assert [a.value for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ["system:masters"]
