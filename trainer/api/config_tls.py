"""The Configuration's ``tls`` (Trainer v2.3.0 ``TLSOptions``) in terms of Python's ``ssl``.

Upstream's ``pkg/util/tlsconfig.Apply`` turns ``minVersion``, ``cipherSuites`` (Go's
``crypto/tls`` names, which are the IANA names) and ``nextProtos`` into the ``*tls.Config`` of the
metrics, webhook and status servers. Here the same three fields become an ``ssl.SSLContext``
change: the minimum version, an OpenSSL cipher string (each Go name mapped to OpenSSL's name of
the same suite) and the ALPN list.

Where upstream logs a warning and carries on with a bad value (an unknown version or suite name),
this manager refuses to start and names the field (docs/divergences.md, "The Configuration's
``tls``"): a misspelt suite would otherwise leave Go's defaults in place unnoticed. Suites Go
knows but the linked OpenSSL cannot negotiate (RC4, 3DES) are refused the same way. The length
limits are upstream's kubebuilder markers, worded as apimachinery words them.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

# Upstream's TLSVersion10..13 and the ssl versions they select.
TLS_VERSIONS: dict[str, ssl.TLSVersion] = {
    "1.0": ssl.TLSVersion.TLSv1,
    "1.1": ssl.TLSVersion.TLSv1_1,
    "1.2": ssl.TLSVersion.TLSv1_2,
    "1.3": ssl.TLSVersion.TLSv1_3,
}

MAX_CIPHER_SUITES = 100  # +kubebuilder:validation:MaxItems=100
MAX_CIPHER_SUITE_LENGTH = 100  # +kubebuilder:validation:items:MaxLength=100
MAX_NEXT_PROTOS = 10  # +kubebuilder:validation:MaxItems=10
MAX_NEXT_PROTO_LENGTH = 32  # +kubebuilder:validation:items:MaxLength=32

# The ALPN protocol of HTTP/2, which the manager's servers (aiohttp) cannot speak.
HTTP2 = "h2"
HTTP11 = "http/1.1"


@dataclass(frozen=True)
class CipherSuite:
    """One suite of Go's ``tls.CipherSuites()`` or ``tls.InsecureCipherSuites()``."""

    go_name: str
    openssl_name: str | None
    """OpenSSL's name for TLS 1.0-1.2; ``None`` for a TLS 1.3 suite (not set by a cipher string)."""
    insecure: bool = False


# Go 1.26's crypto/tls, in its own order: tls.CipherSuites() then tls.InsecureCipherSuites().
CIPHER_SUITES: tuple[CipherSuite, ...] = (
    CipherSuite("TLS_AES_128_GCM_SHA256", None),
    CipherSuite("TLS_AES_256_GCM_SHA384", None),
    CipherSuite("TLS_CHACHA20_POLY1305_SHA256", None),
    CipherSuite("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA-AES128-SHA"),
    CipherSuite("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA-AES256-SHA"),
    CipherSuite("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA"),
    CipherSuite("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA-AES256-SHA"),
    CipherSuite("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256"),
    CipherSuite("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"),
    CipherSuite("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256"),
    CipherSuite("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"),
    CipherSuite("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305"),
    CipherSuite("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"),
    CipherSuite("TLS_RSA_WITH_RC4_128_SHA", "RC4-SHA", insecure=True),
    CipherSuite("TLS_RSA_WITH_3DES_EDE_CBC_SHA", "DES-CBC3-SHA", insecure=True),
    CipherSuite("TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA", insecure=True),
    CipherSuite("TLS_RSA_WITH_AES_256_CBC_SHA", "AES256-SHA", insecure=True),
    CipherSuite("TLS_RSA_WITH_AES_128_CBC_SHA256", "AES128-SHA256", insecure=True),
    CipherSuite("TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256", insecure=True),
    CipherSuite("TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384", insecure=True),
    CipherSuite("TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", "ECDHE-ECDSA-RC4-SHA", insecure=True),
    CipherSuite("TLS_ECDHE_RSA_WITH_RC4_128_SHA", "ECDHE-RSA-RC4-SHA", insecure=True),
    CipherSuite("TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", "ECDHE-RSA-DES-CBC3-SHA", insecure=True),
    CipherSuite("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "ECDHE-ECDSA-AES128-SHA256", insecure=True),
    CipherSuite("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "ECDHE-RSA-AES128-SHA256", insecure=True),
)
BY_GO_NAME: dict[str, CipherSuite] = {suite.go_name: suite for suite in CIPHER_SUITES}

# Go's default TLS 1.0-1.2 suites when cipherSuites is empty (defaultCipherSuites: the preference
# order without the disabled CBC-SHA256/RC4 ones, RSA key exchange and 3DES), with AES-GCM hardware.
GO_DEFAULT_SUITES: tuple[str, ...] = (
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
)


def openssl_available(openssl_name: str) -> bool:
    """Whether the linked OpenSSL can negotiate the suite (RC4 and 3DES are gone from OpenSSL 3)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.set_ciphers(openssl_name + ":@SECLEVEL=0")
    except ssl.SSLError:
        return False
    return any(cipher["name"] == openssl_name for cipher in context.get_ciphers())


def cipher_string(go_names: list[str] | tuple[str, ...], min_version: str) -> str:
    """The OpenSSL cipher string of ``go_names`` (already validated); "" when only TLS 1.3 suites.

    Below TLS 1.2 the string drops OpenSSL's security level to 0: at its default level OpenSSL 3
    refuses the SHA-1 signatures TLS 1.0 and 1.1 handshakes need, which Go still makes.
    """
    names = [n for n in (BY_GO_NAME[g].openssl_name for g in go_names) if n]
    if not names:
        return ""
    return ":".join(names) + (":@SECLEVEL=0" if min_version in ("1.0", "1.1") else "")


def _quoted(values: list[str] | tuple[str, ...]) -> str:
    return ", ".join(f'"{v}"' for v in values)


def validate(
    min_version: str | None, cipher_suites: list[str] | None, next_protos: list[str] | None
) -> list[str]:
    """The field errors of a ``tls`` block, in field order (apimachinery's wording)."""
    errors: list[str] = []
    if min_version and min_version not in TLS_VERSIONS:
        errors.append(
            f'tls.minVersion: Unsupported value: "{min_version}": supported values: {_quoted(tuple(TLS_VERSIONS))}'
        )
    suites = cipher_suites or []
    if len(suites) > MAX_CIPHER_SUITES:
        errors.append(
            f"tls.cipherSuites: Too many: {len(suites)}: must have at most {MAX_CIPHER_SUITES} items"
        )
    for index, name in enumerate(suites):
        path = f"tls.cipherSuites[{index}]"
        if len(name.encode()) > MAX_CIPHER_SUITE_LENGTH:
            errors.append(f"{path}: Too long: may not be more than {MAX_CIPHER_SUITE_LENGTH} bytes")
            continue
        suite = BY_GO_NAME.get(name)
        if suite is None:
            errors.append(
                f'{path}: Unsupported value: "{name}": supported values: '
                + _quoted(tuple(s.go_name for s in CIPHER_SUITES))
            )
        elif suite.openssl_name is not None and not openssl_available(suite.openssl_name):
            errors.append(
                f'{path}: Invalid value: "{name}": not available in the TLS library of this manager '
                f"({ssl.OPENSSL_VERSION})"
            )
    protos = next_protos or []
    if len(protos) > MAX_NEXT_PROTOS:
        errors.append(f"tls.nextProtos: Too many: {len(protos)}: must have at most {MAX_NEXT_PROTOS} items")
    for index, proto in enumerate(protos):
        path = f"tls.nextProtos[{index}]"
        if len(proto.encode()) > MAX_NEXT_PROTO_LENGTH:
            errors.append(f"{path}: Too long: may not be more than {MAX_NEXT_PROTO_LENGTH} bytes")
        elif not proto:
            errors.append(f'{path}: Invalid value: "": an ALPN protocol name may not be empty')
    return errors
