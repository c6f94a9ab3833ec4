"""OpenID Connect ID-token verification, as ``github.com/coreos/go-oidc/v3`` v3.20.0 (with
``go-jose/v4`` v4.1.4) does it, on ``cryptography``.

Why our own and not a JWT library: what matters is answering exactly as go-oidc does (which
algorithms a token may use, when the key set is fetched again, which claims are checked and
how), and that is a page of code over ``cryptography``'s RSA, ECDSA and Ed25519 verification;
a JWT library brings its own rules (leeway on ``exp``, required claims, ``iat`` checks) that
would have to be switched off one by one.

* ``Provider.discover(issuer, fetch)`` reads ``<issuer>/.well-known/openid-configuration``
  (``NewProvider``): HTTP 200, a JSON document whose ``issuer`` is exactly ``issuer``; its
  ``jwks_uri`` and the supported ones of ``id_token_signing_alg_values_supported`` are kept.
* ``Provider.verifier(client_id).verify(raw)`` (``IDTokenVerifier.Verify``): a compact JWS
  (three base64url parts) whose header ``alg`` is one of the provider's algorithms (RS256 when it
  names none), signed by a key of the provider's JWKS with the token's ``kid`` (any key when the
  token names none): the cached keys first, then once fetched again (concurrent fetches
  shared); then ``iss`` equal to the issuer, ``client_id`` among ``aud``, ``exp`` not passed
  (no leeway; a missing ``exp`` is expired) and ``nbf`` at most 5 minutes ahead.

Every failure is a ``TokenInvalid`` whose message is go-oidc's.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from manager.errors import Error

__all__ = [
    "SUPPORTED_ALGORITHMS",
    "DiscoveryError",
    "Fetch",
    "IDToken",
    "JSONWebKey",
    "Provider",
    "TokenInvalid",
    "Verifier",
    "parse_jwks",
]

SUPPORTED_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "ES256",
    "ES384",
    "ES512",
    "PS256",
    "PS384",
    "PS512",
    "EdDSA",
)
"""go-oidc's ``supportedAlgorithms`` (and ``supportedJOSEAlgs`` for the keys)."""
NBF_LEEWAY = timedelta(minutes=5)

Fetch = Callable[[str], Awaitable[tuple[int, bytes]]]
"""``GET url`` -> (HTTP status, body); a transport failure raises ``OSError``-like errors."""

_B64URL = re.compile(r"^[A-Za-z0-9_-]*$")
_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "256": hashes.SHA256,
    "384": hashes.SHA384,
    "512": hashes.SHA512,
}
_EC_CURVES: dict[str, tuple[ec.EllipticCurve, int]] = {
    "P-256": (ec.SECP256R1(), 32),
    "P-384": (ec.SECP384R1(), 48),
    "P-521": (ec.SECP521R1(), 66),
}
_EC_SIGNATURE_SIZE = {"ES256": 32, "ES384": 48, "ES512": 66}


class TokenInvalid(Error):
    """The token is not a valid ID token of this provider for this audience."""


class DiscoveryError(Error):
    """The provider's discovery document could not be read or does not name the issuer."""


def _b64decode(value: str) -> bytes:
    """Go's ``base64.RawURLEncoding.DecodeString``: no padding, the URL alphabet only."""
    if not _B64URL.match(value) or len(value) % 4 == 1:
        raise ValueError("illegal base64 data")
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError) as err:
        raise ValueError("illegal base64 data") from err


def _int_from_b64(value: Any) -> int:
    if not isinstance(value, str):
        raise ValueError("missing key value")
    raw = _b64decode(value)
    if not raw:
        raise ValueError("missing key value")
    return int.from_bytes(raw, "big")


@dataclass(frozen=True)
class JSONWebKey:
    """One public key of a JWKS."""

    kid: str
    key: rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey

    @classmethod
    def from_json(cls, data: Any) -> JSONWebKey:
        if not isinstance(data, dict):
            raise ValueError("key is not an object")
        kty, kid = data.get("kty"), data.get("kid", "")
        if not isinstance(kid, str):
            raise ValueError("kid is not a string")
        if kty == "RSA":
            key: Any = rsa.RSAPublicNumbers(
                _int_from_b64(data.get("e")), _int_from_b64(data.get("n"))
            ).public_key()
        elif kty == "EC":
            curve = _EC_CURVES.get(str(data.get("crv")))
            if curve is None:
                raise ValueError(f"unsupported elliptic curve {data.get('crv')!r}")
            x, y = data.get("x"), data.get("y")
            if not isinstance(x, str) or not isinstance(y, str):
                raise ValueError("invalid EC key, missing x/y values")
            xb, yb = _b64decode(x), _b64decode(y)
            if len(xb) != curve[1] or len(yb) != curve[1]:
                raise ValueError("invalid EC public key, wrong length for x/y")
            key = ec.EllipticCurvePublicNumbers(
                int.from_bytes(xb, "big"), int.from_bytes(yb, "big"), curve[0]
            ).public_key()
        elif kty == "OKP" and data.get("crv") == "Ed25519":
            x = data.get("x")
            raw = _b64decode(x) if isinstance(x, str) else b""
            if len(raw) != 32:
                raise ValueError("invalid Ed25519 public key")
            key = ed25519.Ed25519PublicKey.from_public_bytes(raw)
        else:
            raise ValueError(f"unknown json web key type {kty!r}")
        return cls(kid=kid, key=key)

    def verifies(self, alg: str, signing_input: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is this key's ``alg`` signature of ``signing_input`` (go-jose's
        ``verifyPayload``: the key's type decides which algorithms it can verify)."""
        key = self.key
        try:
            if isinstance(key, rsa.RSAPublicKey) and alg[:2] in ("RS", "PS"):
                digest = _HASHES[alg[2:]]()
                if alg.startswith("RS"):
                    key.verify(signature, signing_input, padding.PKCS1v15(), digest)
                else:
                    pss = padding.PSS(mgf=padding.MGF1(_HASHES[alg[2:]]()), salt_length=padding.PSS.AUTO)
                    key.verify(signature, signing_input, pss, digest)
                return True
            if isinstance(key, ec.EllipticCurvePublicKey) and alg in _EC_SIGNATURE_SIZE:
                size = _EC_SIGNATURE_SIZE[alg]
                if len(signature) != 2 * size:
                    return False
                r = int.from_bytes(signature[:size], "big")
                s = int.from_bytes(signature[size:], "big")
                if r == 0 or s == 0:
                    return False
                key.verify(encode_dss_signature(r, s), signing_input, ec.ECDSA(_HASHES[alg[2:]]()))
                return True
            if isinstance(key, ed25519.Ed25519PublicKey) and alg == "EdDSA":
                key.verify(signature, signing_input)
                return True
        except (InvalidSignature, ValueError):
            return False
        return False


def parse_jwks(body: bytes) -> list[JSONWebKey]:
    """go-oidc's ``jwkJSON``: keys advertising an unsupported ``alg`` are skipped, any other key
    that does not parse fails the whole set."""
    data = json.loads(body)
    if not isinstance(data, dict):
        raise ValueError("key set is not an object")
    keys = []
    for raw in data.get("keys") or []:
        if not isinstance(raw, dict):
            raise ValueError("key is not an object")
        alg = raw.get("alg", "")
        if not isinstance(alg, str):
            raise ValueError("alg is not a string")
        if alg and alg not in SUPPORTED_ALGORITHMS:
            continue
        keys.append(JSONWebKey.from_json(raw))
    return keys


@dataclass(frozen=True)
class IDToken:
    issuer: str
    subject: str
    audience: tuple[str, ...]
    expiry: datetime
    claims: dict[str, Any]


def _json_time(value: Any, name: str) -> datetime | None:
    """go-oidc's ``jsonTime``: a JSON number of seconds (fractions kept)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenInvalid(f"oidc: failed to unmarshal claims: {name} is not a number")
    try:
        return datetime.fromtimestamp(float(value), UTC)
    except (OverflowError, OSError, ValueError):
        return datetime.max.replace(tzinfo=UTC) if value > 0 else datetime.min.replace(tzinfo=UTC)


def _audience(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise TokenInvalid("oidc: failed to unmarshal claims: aud is neither a string nor a list of strings")


@dataclass
class Provider:
    """An OpenID provider's issuer, key set URL, algorithms and cached keys."""

    issuer: str
    jwks_url: str
    algorithms: tuple[str, ...]
    fetch: Fetch
    keys: list[JSONWebKey] = field(default_factory=list)
    _inflight: asyncio.Future[list[JSONWebKey]] | None = None

    @classmethod
    async def discover(cls, issuer: str, fetch: Fetch) -> Provider:
        well_known = issuer.removesuffix("/") + "/.well-known/openid-configuration"
        status, body = await fetch(well_known)
        if status != 200:
            raise DiscoveryError(f"{status}: {body.decode(errors='replace')}")
        try:
            doc = json.loads(body)
            if not isinstance(doc, dict):
                raise ValueError("not an object")
        except ValueError as err:
            raise DiscoveryError(f"oidc: failed to decode provider discovery object: {err}") from None
        if doc.get("issuer") != issuer:
            raise DiscoveryError(
                f"oidc: issuer did not match the issuer returned by provider, expected {issuer!r} "
                f"got {doc.get('issuer')!r}"
            )
        algs = tuple(
            a for a in doc.get("id_token_signing_alg_values_supported") or () if a in SUPPORTED_ALGORITHMS
        )
        return cls(issuer=issuer, jwks_url=str(doc.get("jwks_uri") or ""), algorithms=algs, fetch=fetch)

    def verifier(self, client_id: str, now: Callable[[], datetime] | None = None) -> Verifier:
        return Verifier(self, client_id, self.algorithms or ("RS256",), now or (lambda: datetime.now(UTC)))

    async def refresh_keys(self) -> list[JSONWebKey]:
        """The key set fetched again (one fetch at a time; waiters share it); kept on success."""
        if self._inflight is None:
            self._inflight = asyncio.ensure_future(self._fetch_keys())
        inflight = self._inflight
        try:
            keys = await asyncio.shield(inflight)
        finally:
            if self._inflight is inflight and inflight.done():
                self._inflight = None
        self.keys = keys
        return keys

    async def _fetch_keys(self) -> list[JSONWebKey]:
        try:
            status, body = await self.fetch(self.jwks_url)
        except Exception as err:
            raise TokenInvalid(f"fetching keys oidc: get keys failed {err}") from err
        if status != 200:
            raise TokenInvalid(
                f"fetching keys oidc: get keys failed: {status} {body.decode(errors='replace')}"
            )
        try:
            return parse_jwks(body)
        except ValueError as err:
            raise TokenInvalid(f"fetching keys oidc: failed to decode keys: {err}") from None


@dataclass(frozen=True)
class Verifier:
    provider: Provider
    client_id: str
    algorithms: Sequence[str]
    now: Callable[[], datetime]

    async def verify(self, raw: str) -> IDToken:
        payload = await self._verify_jws(raw)
        try:
            claims = json.loads(payload)
        except ValueError as err:
            raise TokenInvalid(f"oidc: failed to unmarshal claims: {err}") from None
        if not isinstance(claims, dict):
            raise TokenInvalid("oidc: failed to unmarshal claims: not an object")
        issuer, subject = claims.get("iss", ""), claims.get("sub", "")
        if not isinstance(issuer, str) or not isinstance(subject, str):
            raise TokenInvalid("oidc: failed to unmarshal claims: iss and sub must be strings")
        audience = _audience(claims.get("aud"))
        expiry = _json_time(claims.get("exp"), "exp") or datetime(1, 1, 1, tzinfo=UTC)
        not_before = _json_time(claims.get("nbf"), "nbf")
        _json_time(claims.get("iat"), "iat")
        if issuer != self.provider.issuer:
            raise TokenInvalid(
                f"oidc: id token issued by a different provider, expected {self.provider.issuer!r} got {issuer!r}"
            )
        if self.client_id not in audience:
            raise TokenInvalid(f"oidc: expected audience {self.client_id!r} got {list(audience)!r}")
        now = self.now()
        if expiry < now:
            raise TokenInvalid(f"oidc: token is expired (Token Expiry: {expiry.isoformat()})")
        if not_before is not None and now + NBF_LEEWAY < not_before:
            raise TokenInvalid(f"oidc: current time {now} before the nbf (not before) time: {not_before}")
        return IDToken(issuer, subject, audience, expiry, claims)

    async def _verify_jws(self, raw: str) -> bytes:
        parts = raw.split(".")
        if len(parts) != 3:
            raise TokenInvalid(
                "oidc: malformed jwt: go-jose/go-jose: compact JWS format must have three parts"
            )
        try:
            header = json.loads(_b64decode(parts[0]))
            payload = _b64decode(parts[1])
            signature = _b64decode(parts[2])
        except ValueError as err:
            raise TokenInvalid(f"oidc: malformed jwt: {err}") from None
        if not isinstance(header, dict):
            raise TokenInvalid("oidc: malformed jwt: header is not an object")
        alg, kid = header.get("alg"), header.get("kid", "")
        if alg not in self.algorithms:
            raise TokenInvalid(
                f"oidc: malformed jwt: go-jose/go-jose: unexpected signature algorithm {alg!r}; "
                f"expected {list(self.algorithms)!r}"
            )
        if "crit" in header:
            raise TokenInvalid("oidc: malformed jwt: go-jose/go-jose: unsupported crit header")
        if not isinstance(kid, str):
            raise TokenInvalid("oidc: malformed jwt: kid is not a string")
        signing_input = f"{parts[0]}.{parts[1]}".encode()

        def signed(keys: list[JSONWebKey]) -> bool:
            return any(
                (not kid or key.kid == kid) and key.verifies(str(alg), signing_input, signature)
                for key in keys
            )

        if signed(self.provider.keys) or signed(await self.provider.refresh_keys()):
            return payload
        raise TokenInvalid("failed to verify signature: failed to verify id token signature")
