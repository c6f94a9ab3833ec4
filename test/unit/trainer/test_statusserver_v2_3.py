"""Level v2.3's status server (trainer/statusserver_v2_3.py) answer by answer, and its OIDC
verification (manager/oidc.py), as Trainer v2.3.0's ``pkg/statusserver`` with go-oidc v3.20.0."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from manager.client.errors import ApiError, Conflict, Invalid, NotFound
from manager.oidc import Provider, TokenInvalid
from trainer.levels import get as api_level
from trainer.statusserver_v2_3 import (
    MAX_BODY,
    PayloadError,
    ProjectedTokenAuthorizer,
    StatusHandler,
    StatusServer,
    apply_configuration,
    decode_update,
    encode_go_json,
    encode_request,
    extract_raw_token,
)

ISSUER = "https://127.0.0.1:6443/"
JWKS_URL = "https://127.0.0.1:6443/openid/v1/jwks"
NS, NAME = "team-a", "mnist"
AUDIENCE = f"trainer.kubeflow.org/v1alpha1/namespaces/{NS}/trainjobs/{NAME}/status"
PATH = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NS}/trainjobs/{NAME}/status"
Json = dict[str, Any]


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Issuer:
    """The API server's token signer: an EC P-256 key (envtest's) or an RSA one, a JWKS, a discovery doc."""

    def __init__(self, kid: str = "key-1", kind: str = "EC") -> None:
        self.kid = kid
        self.kind = kind
        self.key: Any = (
            ec.generate_private_key(ec.SECP256R1()) if kind == "EC" else rsa.generate_private_key(65537, 2048)
        )
        self.alg = "ES256" if kind == "EC" else "RS256"
        self.fetches: list[str] = []

    def jwk(self) -> Json:
        pub = self.key.public_key().public_numbers()
        if self.kind == "EC":
            return {
                "use": "sig",
                "kty": "EC",
                "kid": self.kid,
                "crv": "P-256",
                "alg": "ES256",
                "x": b64(pub.x.to_bytes(32, "big")),
                "y": b64(pub.y.to_bytes(32, "big")),
            }
        return {
            "use": "sig",
            "kty": "RSA",
            "kid": self.kid,
            "alg": "RS256",
            "n": b64(pub.n.to_bytes((pub.n.bit_length() + 7) // 8, "big")),
            "e": b64(pub.e.to_bytes(3, "big")),
        }

    def token(self, claims: Json | None = None, header: Json | None = None, **overrides: Any) -> str:
        now = datetime.now(UTC).timestamp()
        body: Json = {
            "aud": [AUDIENCE],
            "exp": int(now) + 3600,
            "iat": int(now),
            "nbf": int(now),
            "iss": ISSUER,
            "sub": f"system:serviceaccount:{NS}:default",
            "kubernetes.io": {
                "namespace": NS,
                "pod": {"name": "mnist-node-0-0-abcde", "uid": "u1"},
                "serviceaccount": {"name": "default", "uid": "u2"},
            },
        }
        body.update(claims or {})
        for key, value in overrides.items():
            if value is None:
                body.pop(key, None)
            else:
                body[key] = value
        head = {"alg": self.alg, "kid": self.kid} | (header or {})
        signing_input = f"{b64(json.dumps(head).encode())}.{b64(json.dumps(body).encode())}".encode()
        if self.kind == "EC":
            r, s = decode_dss_signature(self.key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
            signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        else:
            signature = self.key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input.decode()}.{b64(signature)}"


class Discovery:
    """What the API server answers on its discovery and JWKS endpoints."""

    def __init__(self, *issuers: Issuer, issuer: str = ISSUER) -> None:
        self.issuers = list(issuers)
        self.issuer = issuer
        self.fetched: list[str] = []

    async def __call__(self, url: str) -> tuple[int, bytes]:
        self.fetched.append(url)
        if url == ISSUER.rstrip("/") + "/.well-known/openid-configuration":
            doc = {
                "issuer": self.issuer,
                "jwks_uri": JWKS_URL,
                "response_types_supported": ["id_token"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": sorted({i.alg for i in self.issuers}),
            }
            return 200, json.dumps(doc).encode()
        if url == JWKS_URL:
            return 200, json.dumps({"keys": [i.jwk() for i in self.issuers]}).encode()
        return 404, b"not found"


def manager_token_file(tmp_path: Path, issuer: str = ISSUER) -> Path:
    """The manager's own service-account token: only its ``iss`` is read."""
    payload = b64(
        json.dumps({"iss": issuer, "sub": "system:serviceaccount:kubeflow-system:trainer"}).encode()
    )
    path = tmp_path / "token"
    path.write_text(f"{b64(b'{}')}.{payload}.sig\n")
    return path


async def authorizer_for(tmp_path: Path, discovery: Discovery) -> ProjectedTokenAuthorizer:
    authorizer = ProjectedTokenAuthorizer(discovery, token_file=manager_token_file(tmp_path))
    await authorizer.init()
    return authorizer


# -- the level seam ---------------------------------------------------------------------------------


def test_each_level_names_its_status_server_module() -> None:
    assert api_level("v2.3").status_server == "trainer.statusserver_v2_3"
    assert api_level("v2.1").status_server == "trainer.statusserver"


# -- the body, as Go's encoding/json decodes UpdateTrainJobStatusRequest ------------------------------


def test_the_sdk_body_decodes_and_is_applied_as_go_builds_the_apply_configuration() -> None:
    body = {
        "trainerStatus": {
            "lastUpdatedTime": "2026-12-03T07:40:00.123456+01:00",
            "progressPercentage": 77,
            "estimatedRemainingSeconds": 600,
            "metrics": [{"name": "loss", "value": "0.125"}],
        }
    }
    request = decode_update(json.dumps(body).encode())
    assert request.trainer_status is not None
    assert apply_configuration(NS, NAME, request.trainer_status) == {
        "kind": "TrainJob",
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "metadata": {"name": NAME, "namespace": NS},
        "status": {
            "trainerStatus": {
                "progressPercentage": 77,
                "estimatedRemainingSeconds": 600,
                "metrics": [{"name": "loss", "value": "0.125"}],
                "lastUpdatedTime": "2026-12-03T06:40:00Z",
            }
        },
    }
    # the answer: the request as Go encodes it back (UTC, whole seconds)
    assert encode_request(request) == {
        "trainerStatus": {
            "progressPercentage": 77,
            "estimatedRemainingSeconds": 600,
            "metrics": [{"name": "loss", "value": "0.125"}],
            "lastUpdatedTime": "2026-12-03T06:40:00Z",
        }
    }


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"   ",
        b"garbage",
        b"[]",
        b'"text"',
        b"12",
        b'{"trainerStatus": []}',
        b'{"trainerStatus": {"progressPercentage": 1.0}}',
        b'{"trainerStatus": {"progressPercentage": 1e2}}',
        b'{"trainerStatus": {"progressPercentage": "5"}}',
        b'{"trainerStatus": {"progressPercentage": true}}',
        b'{"trainerStatus": {"estimatedRemainingSeconds": 2147483648}}',
        b'{"trainerStatus": {"metrics": {"name": "loss"}}}',
        b'{"trainerStatus": {"metrics": ["loss"]}}',
        b'{"trainerStatus": {"metrics": [{"name": "loss", "value": 0.5}]}}',
        b'{"trainerStatus": {"lastUpdatedTime": "2026-12-03 07:40:00Z"}}',
        b'{"trainerStatus": {"lastUpdatedTime": "2026-12-03T07:40:00"}}',
        b'{"trainerStatus": {"lastUpdatedTime": "2026-12-03T07:40:00z"}}',
        b'{"trainerStatus": {"lastUpdatedTime": "2026-02-30T07:40:00Z"}}',
        b'{"trainerStatus": {"lastUpdatedTime": 1700000000}}',
        b'{"trainerStatus": {"progressPercentage": NaN}}',
        b'{"trainerStatus": {"progressPercentage": 1',
    ],
)
def test_bodies_go_cannot_decode_are_payload_errors(raw: bytes) -> None:
    with pytest.raises(PayloadError):
        decode_update(raw)


def test_go_decoding_rules_that_differ_from_python() -> None:
    # only the first value is read: what follows is not looked at
    request = decode_update(b'{"trainerStatus": {"progressPercentage": 5}} trailing garbage')
    assert request.trainer_status is not None and request.trainer_status.progress_percentage == 5
    # keys match case-insensitively, unknown keys are ignored
    request = decode_update(b'{"TRAINERSTATUS": {"ProgressPercentage": 6, "other": [1]}, "x": {}}')
    assert request.trainer_status is not None and request.trainer_status.progress_percentage == 6
    # a repeated trainerStatus decodes into the same struct (Go reuses the pointer)
    request = decode_update(b'{"trainerStatus": {"progressPercentage": 7}, "trainerStatus": {"metrics": []}}')
    assert request.trainer_status is not None and request.trainer_status.progress_percentage == 7
    # null is "not set"; a negative number decodes (the API server refuses it)
    assert decode_update(b"null").trainer_status is None
    assert decode_update(b'{"trainerStatus": null}').trainer_status is None
    status = decode_update(b'{"trainerStatus": {"progressPercentage": -1}}').trainer_status
    assert status is not None and status.progress_percentage == -1
    # no lastUpdatedTime: Go's zero time, sent and answered as null
    assert apply_configuration(NS, NAME, status)["status"]["trainerStatus"] == {
        "progressPercentage": -1,
        "lastUpdatedTime": None,
    }
    # an empty metric is sent as Go sends it (the API server refuses it); the answer omits it
    status = decode_update(
        b'{"trainerStatus": {"metrics": [{}], "lastUpdatedTime": "2026-01-01T00:00:00Z"}}'
    ).trainer_status
    assert status is not None
    assert apply_configuration(NS, NAME, status)["status"]["trainerStatus"]["metrics"] == [
        {"name": "", "value": ""}
    ]


def test_answers_are_encoded_as_gos_json_encoder_writes_them() -> None:
    assert encode_go_json({"message": "a<b>&c\u2028"}) == b'{"message":"a\\u003cb\\u003e\\u0026c\\u2028"}\n'
    assert encode_go_json({}) == b"{}\n"


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("  BEARER \t abc  ", "abc"),
        ("Bearer", ""),
        ("Bearer a b", ""),
        ("Basic abc", ""),
        ("", ""),
    ],
)
def test_the_bearer_token_is_extracted_as_upstream_does(header: str, token: str) -> None:
    assert extract_raw_token(header) == token


# -- OIDC ---------------------------------------------------------------------------------------------


async def test_a_token_of_the_issuer_for_the_trainjob_in_its_namespace_is_authorised(tmp_path: Path) -> None:
    issuer = Issuer()
    discovery = Discovery(issuer)
    authorizer = await authorizer_for(tmp_path, discovery)
    assert await authorizer.authorize(f"Bearer {issuer.token()}", NS, NAME)
    # the key set is fetched once and cached
    assert await authorizer.authorize(f"Bearer {issuer.token()}", NS, NAME)
    assert discovery.fetched.count(JWKS_URL) == 1


async def test_rsa_keys_verify_too(tmp_path: Path) -> None:
    issuer = Issuer(kind="RSA")
    authorizer = await authorizer_for(tmp_path, Discovery(issuer))
    assert await authorizer.authorize(f"Bearer {issuer.token()}", NS, NAME)


@pytest.mark.parametrize(
    "case",
    [
        "another namespace claim",
        "another trainjob's audience",
        "expired",
        "no exp",
        "not yet valid",
        "another issuer",
        "no namespace claim",
        "signed by another key",
        "another algorithm",
        "unsigned",
        "not a jwt",
        "no token",
    ],
)
async def test_tokens_upstream_refuses_are_refused(tmp_path: Path, case: str) -> None:
    issuer = Issuer()
    authorizer = await authorizer_for(tmp_path, Discovery(issuer))
    now = int(datetime.now(UTC).timestamp())
    makers: dict[str, Callable[[], str]] = {
        "another namespace claim": lambda: issuer.token({"kubernetes.io": {"namespace": "team-b"}}),
        "another trainjob's audience": lambda: issuer.token(aud=[AUDIENCE.replace(NAME, "other")]),
        "expired": lambda: issuer.token(exp=now - 1),
        "no exp": lambda: issuer.token(exp=None),
        "not yet valid": lambda: issuer.token(nbf=now + 600),
        "another issuer": lambda: issuer.token(iss="https://elsewhere/"),
        "no namespace claim": lambda: issuer.token({"kubernetes.io": {}}),
        "signed by another key": lambda: Issuer().token(),
        "another algorithm": lambda: issuer.token(header={"alg": "HS256"}),
        "unsigned": lambda: issuer.token().rsplit(".", 1)[0] + ".",
        "not a jwt": lambda: "abc.def",
        "no token": lambda: "",
    }
    token = makers[case]()
    assert not await authorizer.authorize(f"Bearer {token}", NS, NAME)


async def test_a_token_within_the_nbf_leeway_is_accepted(tmp_path: Path) -> None:
    issuer = Issuer()
    authorizer = await authorizer_for(tmp_path, Discovery(issuer))
    soon = int(datetime.now(UTC).timestamp()) + 120
    assert await authorizer.authorize(f"Bearer {issuer.token(nbf=soon)}", NS, NAME)


async def test_a_rotated_key_is_fetched_when_the_cached_ones_do_not_verify(tmp_path: Path) -> None:
    old, new = Issuer("old"), Issuer("new")
    discovery = Discovery(old)
    authorizer = await authorizer_for(tmp_path, discovery)
    assert await authorizer.authorize(f"Bearer {old.token()}", NS, NAME)
    discovery.issuers = [old, new]
    assert await authorizer.authorize(f"Bearer {new.token()}", NS, NAME)
    assert discovery.fetched.count(JWKS_URL) == 2


async def test_init_fails_without_the_managers_token_or_with_another_issuer(tmp_path: Path) -> None:
    missing = ProjectedTokenAuthorizer(Discovery(Issuer()), token_file=tmp_path / "absent")
    with pytest.raises(RuntimeError, match="failed to discover issuer URL"):
        await missing.init()
    mismatch = ProjectedTokenAuthorizer(
        Discovery(Issuer(), issuer="https://other/"), token_file=manager_token_file(tmp_path)
    )
    with pytest.raises(RuntimeError, match="failed to create OIDC provider: oidc: issuer did not match"):
        await mismatch.init()
    with pytest.raises(RuntimeError, match="has not been initialized"):
        await ProjectedTokenAuthorizer(Discovery()).authorize("Bearer x", NS, NAME)


async def test_verifier_messages_are_go_oidcs(tmp_path: Path) -> None:
    issuer = Issuer()
    provider = await Provider.discover(ISSUER, Discovery(issuer))
    with pytest.raises(TokenInvalid, match="oidc: expected audience"):
        await provider.verifier("other").verify(issuer.token())
    later = datetime.now(UTC) + timedelta(hours=2)
    with pytest.raises(TokenInvalid, match="oidc: token is expired"):
        await provider.verifier(AUDIENCE, lambda: later).verify(issuer.token())


# -- the answers --------------------------------------------------------------------------------------


class Applied:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.objects: list[Json] = []

    async def __call__(self, obj: Json) -> Json:
        if self.error is not None:
            raise self.error
        self.objects.append(obj)
        return obj


SDK_BODY = json.dumps(
    {
        "trainerStatus": {
            "lastUpdatedTime": "2026-12-03T07:40:00.5+00:00",
            "progressPercentage": 42,
            "estimatedRemainingSeconds": 1800,
            "metrics": [{"name": "loss", "value": "0.25"}],
        }
    }
).encode()


@pytest.fixture
async def served(
    tmp_path: Path,
) -> AsyncIterator[tuple[aiohttp.ClientSession, str, Issuer, Applied, StatusServer]]:
    issuer = Issuer()
    applied = Applied()
    server = StatusServer(StatusHandler(await authorizer_for(tmp_path, Discovery(issuer)), applied))
    test_server = TestServer(server.app())
    await test_server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            yield session, str(test_server.make_url("")), issuer, applied, server
    finally:
        await test_server.close()


async def post(
    session: aiohttp.ClientSession, base: str, token: str, body: bytes, path: str = PATH
) -> tuple[int, bytes]:
    async with session.post(base + path, data=body, headers={"Authorization": f"Bearer {token}"}) as resp:
        assert resp.headers["Content-Type"].startswith("application/json")
        return resp.status, await resp.read()


async def test_200_the_update_is_applied_and_echoed(served: Any) -> None:
    session, base, issuer, applied, _ = served
    code, body = await post(session, base, issuer.token(), SDK_BODY)
    assert code == 200
    assert body == (
        b'{"trainerStatus":{"progressPercentage":42,"estimatedRemainingSeconds":1800,'
        b'"metrics":[{"name":"loss","value":"0.25"}],"lastUpdatedTime":"2026-12-03T07:40:00Z"}}\n'
    )
    [obj] = applied.objects
    assert obj["status"]["trainerStatus"]["lastUpdatedTime"] == "2026-12-03T07:40:00Z"


async def test_200_without_trainer_status_nothing_is_applied(served: Any) -> None:
    session, base, issuer, applied, _ = served
    assert await post(session, base, issuer.token(), b"{}") == (200, b"{}\n")
    assert await post(session, base, issuer.token(), b'{"trainerStatus": null, "other": 1}') == (200, b"{}\n")
    assert applied.objects == []


async def test_403_forbidden_for_any_token_problem(served: Any) -> None:
    session, base, issuer, applied, _ = served
    forbidden = b'{"metadata":{},"status":"Failure","message":"Forbidden","reason":"Forbidden","code":403}\n'
    assert await post(session, base, "", SDK_BODY) == (403, forbidden)
    assert await post(session, base, issuer.token({"kubernetes.io": {"namespace": "x"}}), SDK_BODY) == (
        403,
        forbidden,
    )
    other = PATH.replace(NAME, "other")
    assert await post(session, base, issuer.token(), SDK_BODY, other) == (403, forbidden)
    # authorisation comes before the body: a bad body with a bad token is 403
    assert await post(session, base, "", b"garbage") == (403, forbidden)
    assert applied.objects == []


async def test_422_invalid_payload(served: Any) -> None:
    session, base, issuer, applied, _ = served
    invalid = (
        b'{"metadata":{},"status":"Failure","message":"Invalid payload","reason":"Invalid","code":422}\n'
    )
    assert await post(session, base, issuer.token(), b"garbage") == (422, invalid)
    assert await post(session, base, issuer.token(), b'{"trainerStatus": {"progressPercentage": "5"}}') == (
        422,
        invalid,
    )
    assert applied.objects == []


async def test_413_payload_too_large_before_anything_else(served: Any) -> None:
    session, base, _, _, _ = served
    too_large = (
        b'{"metadata":{},"status":"Failure","message":"Payload too large",'
        b'"reason":"RequestEntityTooLarge","code":413}\n'
    )
    big = b" " * (MAX_BODY + 1)
    assert await post(session, base, "", big) == (413, too_large)
    assert await post(session, base, "", big, "/anything") == (413, too_large)
    # exactly the limit is read
    code, _ = await post(session, base, "", b" " * MAX_BODY)
    assert code == 403


async def test_a_chunked_body_past_the_limit_is_read_to_the_limit(served: Any) -> None:
    session, base, issuer, _, _ = served

    async def chunks(first: bytes) -> AsyncIterator[bytes]:
        yield first
        yield b" " * MAX_BODY

    headers = {"Authorization": f"Bearer {issuer.token()}"}
    async with session.post(base + PATH, data=chunks(b'{"trainerStatus": null}'), headers=headers) as resp:
        assert resp.status == 200  # the value ended within the first 64 KiB
    async with session.post(base + PATH, data=chunks(b'{"trainerStatus": '), headers=headers) as resp:
        assert resp.status == 422
        assert (await resp.json())["message"] == "Invalid payload"


async def test_404_for_other_paths_and_methods(served: Any) -> None:
    session, base, issuer, _, _ = served
    not_found = b'{"metadata":{},"status":"Failure","message":"Not found","reason":"NotFound","code":404}\n'
    async with session.get(base + PATH) as resp:
        assert (resp.status, await resp.read()) == (404, not_found)
    assert await post(session, base, issuer.token(), SDK_BODY, PATH + "/") == (404, not_found)
    assert await post(session, base, issuer.token(), SDK_BODY, "/healthz") == (404, not_found)
    path = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NS}/trainjobs//status"
    assert await post(session, base, issuer.token(), SDK_BODY, path) == (404, not_found)


@pytest.mark.parametrize(
    ("error", "code", "body"),
    [
        (
            NotFound(
                'trainjobs.trainer.kubeflow.org "mnist" not found', status={"reason": "NotFound"}, code=404
            ),
            404,
            b'{"metadata":{},"status":"Failure","message":"Train job not found","reason":"NotFound","code":404}\n',
        ),
        (
            Invalid(
                'TrainJob.trainer.kubeflow.org "mnist" is invalid: status.trainerStatus.progressPercentage: '
                "Invalid value: 150: status.trainerStatus.progressPercentage in body should be less than or equal to 100",
                status={"reason": "Invalid"},
                code=422,
            ),
            422,
            b'{"metadata":{},"status":"Failure","message":"TrainJob.trainer.kubeflow.org \\"mnist\\" is invalid: '
            b"status.trainerStatus.progressPercentage: Invalid value: 150: status.trainerStatus.progressPercentage "
            b'in body should be less than or equal to 100","reason":"Invalid","code":422}\n',
        ),
        (
            ApiError(
                "the body of the request was in an unknown format", status={"reason": "BadRequest"}, code=400
            ),
            422,
            b'{"metadata":{},"status":"Failure","message":"the body of the request was in an unknown format",'
            b'"reason":"Invalid","code":422}\n',
        ),
        (
            Conflict("conflict", status={"reason": "Conflict"}, code=409),
            500,
            b'{"metadata":{},"status":"Failure","message":"Internal error","reason":"InternalError","code":500}\n',
        ),
    ],
)
async def test_api_server_answers_to_the_apply(served: Any, error: Exception, code: int, body: bytes) -> None:
    session, base, issuer, applied, _ = served
    applied.error = error
    assert await post(session, base, issuer.token(), SDK_BODY) == (code, body)


async def test_500_when_the_authorizer_fails(tmp_path: Path) -> None:
    handler = StatusHandler(ProjectedTokenAuthorizer(Discovery()), Applied())
    code, body = await handler.handle(NS, NAME, "Bearer x", SDK_BODY)
    assert (code, body) == (
        500,
        {
            "metadata": {},
            "status": "Failure",
            "message": "Internal error",
            "reason": "InternalError",
            "code": 500,
        },
    )


async def test_the_server_does_not_start_when_the_authorizer_cannot_initialise(tmp_path: Path) -> None:
    import asyncio

    handler = StatusHandler(ProjectedTokenAuthorizer(Discovery(), token_file=tmp_path / "absent"), Applied())
    server = StatusServer(handler, port=0)
    with pytest.raises(
        RuntimeError, match="token authorizer initialization failed: failed to discover issuer URL"
    ):
        await server.start(asyncio.Event())
