"""The leak search of the live security test finds secret material in every form it can be copied in,
and nothing in text that holds none (test/secret_leaks.py, used by
test/integration/security/test_rbac_and_secrets_live.py)."""

from __future__ import annotations

import base64
import datetime
import json
import uuid

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID
from secret_leaks import PIECE, leaks, private_key_forms, token_forms


def pem_of(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey, fmt: serialization.PrivateFormat) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption())


@pytest.mark.parametrize(
    ("key", "fmt"),
    [
        (
            ec.generate_private_key(ec.SECP521R1()),
            serialization.PrivateFormat.TraditionalOpenSSL,
        ),  # MPI SSH key
        (rsa.generate_private_key(65537, 2048), serialization.PrivateFormat.PKCS8),
        (ec.generate_private_key(ec.SECP256R1()), serialization.PrivateFormat.PKCS8),
    ],
    ids=["ssh-p521", "rsa-pkcs8", "p256-pkcs8"],
)
def test_a_private_key_is_found_in_each_form(
    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey, fmt: serialization.PrivateFormat
) -> None:
    pem = pem_of(key, fmt)
    forms = {"key": private_key_forms(pem)}
    lines = pem.decode().splitlines()
    stored = base64.b64encode(pem).decode()  # a Secret's data value
    der = base64.b64decode("".join(lines[1:-1]))
    number = (
        key.private_numbers().private_value
        if isinstance(key, ec.EllipticCurvePrivateKey)
        else key.private_numbers().d
    )
    middle = (
        der.find(number.to_bytes((number.bit_length() + 7) // 8, "big")) + 8
    )  # a byte of the private number
    line = lines[1 + middle * 4 // 3 // 64]  # the PEM line encoding it
    for leaked in (
        json.dumps({"msg": "applied", "object": {"data": {"ssh-privatekey": stored}}}),
        json.dumps({"object": pem.decode()}).replace("PRIVATE KEY", "P. K."),  # JSON-escaped, header hidden
        f"truncated {stored[: len(stored) * 2 // 3]}...",
        f"from the middle {stored[len(stored) // 6 : len(stored) // 2]}...",
        f"line {line} end",
        f"bytes {der.hex()}",
        f"d={number}",
        f"d=0x{number:x}",
    ):
        assert leaks(leaked, forms), leaked
    # pieces are short enough that a run of twice their length in a private region is found
    assert forms["key"] and all(len(f) == PIECE for f in forms["key"])


def test_a_token_is_found_by_its_claims_or_signature_and_any_bearer_header() -> None:
    claims = base64.urlsafe_b64encode(uuid.uuid4().bytes * 4).decode().rstrip("=")
    signature = base64.urlsafe_b64encode(uuid.uuid4().bytes * 4).decode().rstrip("=")
    token = f"eyJhbGciOiJFUzI1NiJ9.{claims}.{signature}"
    forms = {"token": token_forms(token)}
    assert leaks(f"authorization: {token.split('.', 1)[1]}", forms)
    assert leaks(f"sig={signature}", forms)
    assert leaks(f"stored {base64.b64encode(token.encode()).decode()}", forms)
    assert leaks('{"headers": {"Authorization": "Bearer abcdefgh12"}}', {})
    assert leaks("token=eyJhbGciOiJSUzI1NiJ9.e30.x", {})  # anyone's JWT


def test_text_without_secret_material_is_clean() -> None:
    """What a log may show: the public key, the certificate (also in base64, as a caBundle),
    names; none of it is private, though the certificate and the key share the public key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "webhook")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    for fmt in (serialization.PrivateFormat.TraditionalOpenSSL, serialization.PrivateFormat.PKCS8):
        forms = {"key": private_key_forms(pem_of(key, fmt))}
        text = json.dumps(
            {
                "msg": "reconciled",
                "name": "mpi-mpi-ssh-auth",
                "caBundle": base64.b64encode(cert_pem).decode(),
                "cert": cert_pem.decode(),
                "der": cert.public_bytes(serialization.Encoding.DER).hex(),
                "public": public.decode(),
            }
        )
        assert leaks(text, forms) == []
