"""Searching text (a manager's log, a dump of Events) for secret material (the leak check).

The secret is searched as its material, not by its name: a PEM private key as its PEM body
(the DER in base64), the DER in hex, the PEM in base64 (how a Secret stores it) and its
private number; a ServiceAccount token (a JWT) as its claims and signature, raw and in base64.
Each form is cut into overlapping pieces of ``PIECE`` characters, so a truncated copy (a log
line cut at a length, a message quoting part of an object) is found as long as it is
``PIECE + STEP - 1`` characters or more of private material. A few shapes are searched too, whoever's secret they hold: a PEM private
key header, a bearer token, the start of a JWT.

Importable by its module name from every test (``test/`` is on ``sys.path``).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

PIECE, STEP = 16, 4  # a piece every STEP characters: a copied run of PIECE + STEP - 1 holds one


def pieces(text: str, mask: list[bool] | None = None) -> list[str]:
    """``text`` cut into PIECE-long pieces, one every STEP characters (the whole text when
    shorter); with ``mask`` (one flag per character) only pieces whose characters are all
    flagged."""
    if len(text) <= PIECE:
        return [text] if mask is None or all(mask) else []
    return [
        text[i : i + PIECE]
        for i in range(0, len(text) - PIECE + 1, STEP)
        if mask is None or all(mask[i : i + PIECE])
    ]


def _private_numbers(key: object) -> list[int]:
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return [key.private_numbers().private_value]
    if isinstance(key, rsa.RSAPrivateKey):
        n = key.private_numbers()
        return [n.d, n.p, n.q, n.dmp1, n.dmq1, n.iqmp]
    raise TypeError(f"unsupported key type {type(key).__name__}")


def _private_mask(der: bytes, numbers: list[int]) -> list[bool]:
    """Which DER bytes belong to a private number. The rest (ASN.1 framing, the curve, the
    public key that SEC1 and PKCS#8 embed, an RSA modulus) is shared with other keys or with the
    certificate, which may be shown anywhere."""
    mask = [False] * len(der)
    for number in numbers:
        size = (number.bit_length() + 7) // 8  # inside any zero-padded or sign-padded encoding
        at = der.find(number.to_bytes(size, "big"))
        assert at >= 0, "a private number is not in the DER"
        mask[at : at + size] = [True] * size
    return mask


def _base64_mask(encoded: str, source_mask: list[bool]) -> list[bool]:
    """Flags per character of ``encoded`` (the base64 of bytes flagged by ``source_mask``):
    set where the character's group of 3 bytes is all flagged."""
    return [all(source_mask[i // 4 * 3 : i // 4 * 3 + 3]) for i in range(len(encoded))]


def private_key_forms(pem: bytes) -> list[str]:
    """A PEM private key as it could be copied into a log or an event, each form only where it
    encodes private bytes: the private numbers in decimal and hex (the DER in hex holds the
    latter), the PEM body lines (the DER in base64, as the PEM shows it or joined), and the whole
    PEM in base64 (how a Secret stores it: what a dump of the Secret's data shows)."""
    numbers = _private_numbers(serialization.load_pem_private_key(pem, password=None))
    lines = pem.decode().splitlines(keepends=True)
    body_lines = [line.strip() for line in lines if not line.startswith("-----")]
    body = "".join(body_lines)
    der_mask = _private_mask(base64.b64decode(body), numbers)
    body_mask = _base64_mask(body, der_mask)
    forms = [piece for n in numbers for piece in (*pieces(str(n)), *pieces(format(n, "x")))]
    forms += pieces(body, body_mask)
    pem_mask: list[bool] = []  # per PEM character: a private body character
    at = 0
    for line in lines:
        if line.startswith("-----"):
            pem_mask += [False] * len(line)
            continue
        stripped = line.strip()
        forms += pieces(stripped, body_mask[at : at + len(stripped)])
        pem_mask += body_mask[at : at + len(stripped)] + [False] * (len(line) - len(stripped))
        at += len(stripped)
    stored = base64.b64encode(pem).decode()
    forms += pieces(stored, _base64_mask(stored, pem_mask))
    return sorted(set(forms))


def token_forms(token: str) -> list[str]:
    """A JWT's own parts (claims and signature; the header is the same for every token of the
    issuer), raw and base64-encoded as a Secret would hold it."""
    _, claims, signature = token.split(".")
    stored = base64.b64encode(token.encode()).decode()
    return sorted({*pieces(claims), *pieces(signature), *pieces(stored[len(stored) // 4 :])})


SECRET_SHAPES = [
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"PRIVATE KEY"),
    re.compile(r"Bearer\s+[A-Za-z0-9._-]{8,}"),
    re.compile(r"eyJhbGciOi"),  # the start of every JWT (a token of any ServiceAccount)
    # the base64 of "-----BEGIN [EC |RSA ]PRIVATE KEY": any private key as a Secret stores it
    re.compile(r"LS0tLS1CRUdJTiB(FQyBQUklWQVRFIEtFW|QUklWQVRFIEtFW|SU0EgUFJJVkFURSBLRV)"),
]


def leaks(text: str, secrets: dict[str, Iterable[str]]) -> list[str]:
    found = [f"{p.pattern!r} matches {m.group(0)[:40]!r}" for p in SECRET_SHAPES if (m := p.search(text))]
    for name, forms in secrets.items():
        hits = [f for f in forms if f in text]
        if hits:
            found.append(f"{name}: {len(hits)} pieces, e.g. {hits[0]!r}")
    return found
