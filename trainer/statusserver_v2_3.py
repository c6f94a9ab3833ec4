"""The TrainJob status server of level v2.3: Trainer v2.3.0's ``pkg/statusserver`` (TrainJobStatus gate).

The level names this module (``ApiLevel.status_server``); level v2.1 keeps ``trainer/statusserver.py``.
docs/behaviour/trainer.md §12.12 describes what a reporting pod sees.

``POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status`` over
HTTPS on ``statusServer.port`` (10443), on every replica, with the webhook serving certificate.
Each request, in v2.3.0's order:

1. a ``Content-Length`` above 64 KiB: 413 ``Payload too large`` (any path, before routing);
2. any other method or path: 404 ``Not found``;
3. the ``Authorization: Bearer <token>`` header (exactly two fields, the scheme in any case) must
   hold an ID token of the issuer of the manager's own service-account token (read once at start
   from ``<service account dir>/token``; the provider's discovery document and JWKS are read
   from that issuer with the manager's API credentials), signed by one of its keys, not
   expired, with the audience ``trainer.kubeflow.org/v1alpha1/namespaces/<ns>/trainjobs/<name>/status``
   and the claim ``kubernetes.io.namespace`` equal to the TrainJob's namespace; anything else
   is 403 ``Forbidden`` (v2.3.0 checks no pod or service-account claim);
4. the body decoded as Go's ``encoding/json`` decodes ``UpdateTrainJobStatusRequest`` (first
   JSON value only, keys matched case-insensitively, unknown keys ignored, ``int32`` numbers,
   RFC 3339 ``lastUpdatedTime``); a body that does not decode is 422 ``Invalid payload``;
5. no ``trainerStatus``: 200 and ``{}``, nothing written;
6. ``status.trainerStatus`` server-side applied with field owner ``trainer-status`` (forced);
   the API server's 400/422 is answered 422 with its message, a missing TrainJob 404 ``Train job
   not found``, anything else 500 ``Internal error``; on success 200 and the request as Go
   encodes it back.

Failures are ``metav1.Status`` objects as Go's ``json.Encoder`` writes them
(``{"metadata":{},"status":"Failure","message":...,"reason":...,"code":...}`` and a newline).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, Unpack
from urllib.parse import unquote

import structlog
from aiohttp import web

from manager.client.errors import ApiError, NotFound
from manager.config import service_account_dir
from manager.meta.object import Json
from manager.oidc import Fetch, Provider, TokenInvalid
from manager.webhook.certwatcher import TLSOption
from manager.webhook.tlsserver import Serving, TLSServer
from trainer.runtime.plugins.trainjobstatus import status_path, token_audience

__all__ = [
    "FIELD_OWNER",
    "MAX_BODY",
    "Metric",
    "PayloadError",
    "ProjectedTokenAuthorizer",
    "StatusHandler",
    "StatusServer",
    "TokenAuthorizer",
    "TrainerStatus",
    "UpdateRequest",
    "apply_configuration",
    "decode_update",
    "encode_go_json",
    "extract_raw_token",
    "failure",
    "issuer_of",
    "setup_status_server",
]

log = structlog.get_logger("runtime-status")

FIELD_OWNER = "trainer-status"
MAX_BODY = 1 << 16
"""v2.3.0's ``maxBodySize`` (64 KiB)."""
ROUTE = status_path("{namespace}", "{name}")
"""The endpoint (``_ROUTE`` matches it)."""
INT32 = (-(2**31), 2**31 - 1)


# -- Go's encoding/json, for the answers -----------------------------------------------------------


def encode_go_json(value: Any) -> bytes:
    """``json.NewEncoder(w).Encode(value)``: compact, HTML-escaped, a trailing newline."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for char, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escaped)
    return (text + "\n").encode()


def failure(message: str, reason: str, code: int) -> Json:
    """v2.3.0's ``badRequest``: a ``metav1.Status`` without kind and apiVersion (omitempty)."""
    return {"metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}


# -- the request as Go decodes it -----------------------------------------------------------------


class PayloadError(ValueError):
    """The body does not decode into ``UpdateTrainJobStatusRequest`` (answered ``Invalid payload``)."""


@dataclass
class Metric:
    name: str = ""
    value: str = ""


@dataclass
class TrainerStatus:
    progress_percentage: int | None = None
    estimated_remaining_seconds: int | None = None
    metrics: list[Metric] | None = None
    last_updated_time: datetime | None = None
    """UTC, whole seconds kept by the encoding; None is Go's zero time (encoded ``null``)."""


@dataclass
class UpdateRequest:
    trainer_status: TrainerStatus | None = None


_SURROGATE = re.compile("[\ud800-\udfff]")
_GO_SPACE = " \t\r\n"


def _fold(name: str) -> str:
    """Go's case folding of a JSON key for field matching (ASCII case, plus the Kelvin sign and
    long s that fold onto ``k`` and ``s``)."""
    out = []
    for char in name:
        if char == "\u212a":
            out.append("k")
        elif char == "\u017f":
            out.append("s")
        elif char.isascii():
            out.append(char.lower())
        else:
            out.append(char)
    return "".join(out)


def _field(pairs: list[tuple[str, Any]], names: tuple[str, ...]) -> list[tuple[str, Any]]:
    """The object's pairs that land in one of ``names`` (exact match first, else folded), in order."""
    folded = {_fold(n): n for n in names}
    out = []
    for key, value in pairs:
        target = key if key in names else folded.get(_fold(key))
        if target is not None:
            out.append((target, value))
    return out


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as its key/value pairs (duplicates kept, as Go decodes them in order)."""


def _no_constant(name: str) -> Any:
    raise PayloadError(f"invalid character {name!r}")


def _string(value: Any) -> str | None:
    """A string field: None keeps what is there (JSON null)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise PayloadError("cannot unmarshal into a string field")
    return _SURROGATE.sub("\ufffd", value)


def _int32(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not INT32[0] <= value <= INT32[1]:
        raise PayloadError("cannot unmarshal into an int32 field")
    return value


_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{1,2}):(\d{2}):(\d{2})(?:[.,](\d+))?(Z|([+-])(\d{2}):(\d{2}))$"
)


def parse_rfc3339(text: str) -> datetime:
    """Go's ``time.Parse(time.RFC3339, text)`` as v1.26 accepts it, as a UTC instant."""
    match = _RFC3339.match(text)
    if match is None:
        raise PayloadError(f"parsing time {text!r} as RFC 3339")
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    fraction = match.group(7) or ""
    if not (1 <= month <= 12 and hour <= 23 and minute <= 59 and second <= 59):
        raise PayloadError(f"parsing time {text!r}: out of range")
    try:
        base = datetime(max(year, 1), month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:
        raise PayloadError(f"parsing time {text!r}: day out of range") from None
    if year == 0:
        raise PayloadError(f"parsing time {text!r}: year 0 is not supported here")
    micro = int((fraction[:9] + "000000000")[:6]) if fraction else 0
    instant = base + timedelta(microseconds=micro)
    if match.group(8) != "Z":
        offset = timedelta(hours=int(match.group(10)), minutes=int(match.group(11)))
        instant = instant - offset if match.group(9) == "+" else instant + offset
    return instant


def _time(value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise PayloadError("cannot unmarshal into metav1.Time")
    return parse_rfc3339(value)


def _metric(pairs: Any, into: Metric) -> Metric:
    if pairs is None:
        return into
    if not isinstance(pairs, _Pairs):
        raise PayloadError("cannot unmarshal into Metric")
    for key, value in _field(pairs, ("name", "value")):
        text = _string(value)
        if text is not None:
            setattr(into, key, text)
    return into


def _metrics(value: Any, before: list[Metric] | None) -> list[Metric] | None:
    if value is None:
        return None
    if not isinstance(value, list) or isinstance(value, _Pairs):
        raise PayloadError("cannot unmarshal into []Metric")
    old = list(before or [])
    return [_metric(item, old[i] if i < len(old) else Metric()) for i, item in enumerate(value)]


def _trainer_status(pairs: Any, into: TrainerStatus | None) -> TrainerStatus | None:
    if pairs is None:
        return None
    if not isinstance(pairs, _Pairs):
        raise PayloadError("cannot unmarshal into TrainerStatus")
    status = into if into is not None else TrainerStatus()
    names = ("progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime")
    for key, value in _field(pairs, names):
        if key == "progressPercentage":
            status.progress_percentage = _int32(value)
        elif key == "estimatedRemainingSeconds":
            status.estimated_remaining_seconds = _int32(value)
        elif key == "metrics":
            status.metrics = _metrics(value, status.metrics)
        else:
            status.last_updated_time = _time(value)
    return status


def decode_update(body: bytes) -> UpdateRequest:
    """``json.NewDecoder(body).Decode(&UpdateTrainJobStatusRequest{})``, or ``PayloadError``.

    Only the first JSON value is read (what follows it is not looked at); a pointer decoded twice
    (a repeated key) keeps what the first one set, as Go's decoder reuses it."""
    text = body.decode("utf-8", errors="replace")
    start = len(text) - len(text.lstrip(_GO_SPACE))
    decoder = json.JSONDecoder(object_pairs_hook=_Pairs, parse_constant=_no_constant)
    try:
        data, _ = decoder.raw_decode(text, start)
    except (ValueError, RecursionError) as err:
        raise PayloadError(str(err)) from None
    if data is None:
        return UpdateRequest()
    if not isinstance(data, _Pairs):
        raise PayloadError("cannot unmarshal into UpdateTrainJobStatusRequest")
    request = UpdateRequest()
    for _, value in _field(data, ("trainerStatus",)):
        request.trainer_status = _trainer_status(value, request.trainer_status)
    return request


def _go_time(value: datetime | None) -> str | None:
    """``metav1.Time`` as JSON: RFC 3339 in UTC, whole seconds; the zero time is null."""
    if value is None or value == datetime(1, 1, 1, tzinfo=UTC):
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def encode_request(request: UpdateRequest) -> Json:
    """The request as Go encodes ``UpdateTrainJobStatusRequest`` (the 200 answer)."""
    status = request.trainer_status
    if status is None:
        return {}
    out: Json = {}
    if status.progress_percentage is not None:
        out["progressPercentage"] = status.progress_percentage
    if status.estimated_remaining_seconds is not None:
        out["estimatedRemainingSeconds"] = status.estimated_remaining_seconds
    if status.metrics:
        metrics = []
        for metric in status.metrics:
            item: Json = {}
            if metric.name:
                item["name"] = metric.name
            if metric.value:
                item["value"] = metric.value
            metrics.append(item)
        out["metrics"] = metrics
    out["lastUpdatedTime"] = _go_time(status.last_updated_time)
    return {"trainerStatus": out}


def apply_configuration(namespace: str, name: str, status: TrainerStatus) -> Json:
    """v2.3.0's ``toApplyConfig``: the TrainJob apply configuration sent to the API server
    (every metric's name and value set, empty or not; ``lastUpdatedTime`` always, null when zero)."""
    trainer_status: Json = {}
    if status.progress_percentage is not None:
        trainer_status["progressPercentage"] = status.progress_percentage
    if status.estimated_remaining_seconds is not None:
        trainer_status["estimatedRemainingSeconds"] = status.estimated_remaining_seconds
    if status.metrics:
        trainer_status["metrics"] = [{"name": m.name, "value": m.value} for m in status.metrics]
    trainer_status["lastUpdatedTime"] = _go_time(status.last_updated_time)
    return {
        "kind": "TrainJob",
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "metadata": {"name": name, "namespace": namespace},
        "status": {"trainerStatus": trainer_status},
    }


# -- the token ------------------------------------------------------------------------------------


def extract_raw_token(header: str) -> str:
    """v2.3.0's ``extractRawToken``: the credential of ``Bearer <token>`` (the scheme in any
    case, any whitespace around and between), else ``""``."""
    parts = header.split()
    if len(parts) != 2 or not parts[0].isascii() or parts[0].lower() != "bearer":
        return ""
    return parts[1]


def issuer_of(token_file: Path) -> str:
    """v2.3.0's ``getClusterOIDCIssuerURL``: the ``iss`` claim of the manager's own token."""
    import base64

    parts = token_file.read_text().strip().split(".")
    if len(parts) != 3:
        raise ValueError("serviceaccount token is not a jwt")
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(payload)
    except ValueError as err:
        raise ValueError(f"serviceaccount token is not a jwt: {err}") from None
    issuer = claims.get("iss") if isinstance(claims, dict) else None
    if not issuer or not isinstance(issuer, str):
        raise ValueError("serviceaccount token missing issuer claim")
    return issuer


class TokenAuthorizer(Protocol):
    async def init(self) -> None: ...

    async def authorize(self, header: str, namespace: str, name: str) -> bool: ...


@dataclass
class ProjectedTokenAuthorizer:
    """v2.3.0's ``projectedServiceAccountTokenAuthorizer``: OIDC against the cluster's issuer."""

    fetch: Fetch
    token_file: Path = field(default_factory=lambda: service_account_dir() / "token")
    now: Callable[[], datetime] | None = None
    provider: Provider | None = None

    async def init(self) -> None:
        try:
            issuer = issuer_of(self.token_file)
        except (OSError, ValueError) as err:
            raise RuntimeError(f"failed to discover issuer URL: {err}") from err
        try:
            self.provider = await Provider.discover(issuer, self.fetch)
        except Exception as err:
            raise RuntimeError(f"failed to create OIDC provider: {err}") from err
        log.info("OIDC provider ready", issuer=issuer, jwks=self.provider.jwks_url)

    async def authorize(self, header: str, namespace: str, name: str) -> bool:
        if self.provider is None:
            raise RuntimeError("OIDC provider has not been initialized")
        verifier = self.provider.verifier(token_audience(namespace, name), self.now)
        try:
            token = await verifier.verify(extract_raw_token(header))
        except TokenInvalid as err:
            log.debug("status update token refused", namespace=namespace, name=name, reason=str(err))
            return False
        kubernetes = token.claims.get("kubernetes.io")
        claimed = kubernetes.get("namespace") if isinstance(kubernetes, dict) else None
        return claimed == namespace


# -- the handler ----------------------------------------------------------------------------------

Apply = Callable[[Json], Awaitable[Any]]


class StatusHandler:
    """One update after routing: authorise, decode, apply (no HTTP in here)."""

    def __init__(self, authorizer: TokenAuthorizer, apply: Apply) -> None:
        self.authorizer = authorizer
        self.apply = apply

    async def handle(self, namespace: str, name: str, authorization: str, body: bytes) -> tuple[int, Json]:
        try:
            authorized = await self.authorizer.authorize(authorization, namespace, name)
        except Exception as err:
            log.error("token authorization failed", error=str(err))
            return 500, failure("Internal error", "InternalError", 500)
        if not authorized:
            return 403, failure("Forbidden", "Forbidden", 403)
        try:
            request = decode_update(body)
        except PayloadError:
            return 422, failure("Invalid payload", "Invalid", 422)
        if request.trainer_status is None:
            return 200, encode_request(request)
        try:
            await self.apply(apply_configuration(namespace, name, request.trainer_status))
        except ApiError as err:
            if err.reason in ("Invalid", "BadRequest") or (not err.reason and err.status_code in (400, 422)):
                message = err.message or f"Validation failed: {err}"
                return 422, failure(message, "Invalid", 422)
            if isinstance(err, NotFound) or err.reason == "NotFound":
                return 404, failure("Train job not found", "NotFound", 404)
            log.error("Failed to update TrainJob", namespace=namespace, name=name, error=str(err))
            return 500, failure("Internal error", "InternalError", 500)
        except Exception as err:
            log.error("Failed to update TrainJob", namespace=namespace, name=name, error=str(err))
            return 500, failure("Internal error", "InternalError", 500)
        return 200, encode_request(request)


# -- the server -----------------------------------------------------------------------------------


def _response(code: int, payload: Json) -> web.Response:
    return web.Response(status=code, body=encode_go_json(payload), content_type="application/json")


class StatusServer(TLSServer):
    """The HTTPS listener (a Runnable on every replica); the authorizer is initialised first, and
    a failure there stops the manager, as v2.3.0's ``Start`` returning the error does."""

    def __init__(self, handler: StatusHandler, *, port: int = 10443, **serving: Unpack[Serving]) -> None:
        super().__init__(port=port, **serving)
        self.handler = handler
        self.closers: list[Callable[[], Awaitable[None]]] = []

    def app(self) -> web.Application:
        # the body is read here, at most MAX_BODY bytes (a larger announced one is refused first)
        app = web.Application(client_max_size=MAX_BODY + 1, middlewares=[self._body_limit])
        app.router.add_route("*", "/{tail:.*}", self._route)
        return app

    @web.middleware
    async def _body_limit(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.content_length is not None and request.content_length > MAX_BODY:
            return _response(413, failure("Payload too large", "RequestEntityTooLarge", 413))
        response: web.StreamResponse = await handler(request)
        return response

    async def _route(self, request: web.Request) -> web.Response:
        # matched on the escaped path, the two segments unescaped (Go's ServeMux and PathValue)
        match = _ROUTE.match(request.rel_url.raw_path) if request.method == "POST" else None
        if match is None:
            return _response(404, failure("Not found", "NotFound", 404))
        body = await request.content.read(MAX_BODY)
        namespace, name = unquote(match.group("namespace")), unquote(match.group("name"))
        code, payload = await self.handler.handle(
            namespace, name, request.headers.get("Authorization", ""), body
        )
        return _response(code, payload)

    def listening(self, port: int) -> None:
        log.info("Starting runtime status server with TLS", port=port)

    async def start(self, started: asyncio.Event) -> None:
        try:
            log.info("Initializing token authorizer")
            try:
                await self.handler.authorizer.init()
            except Exception as err:
                raise RuntimeError(f"token authorizer initialization failed: {err}") from err
            await super().start(started)
        finally:
            for close in self.closers:
                await close()


_ROUTE = re.compile(
    r"^/apis/trainer\.kubeflow\.org/v1alpha1/namespaces/(?P<namespace>[^/]+)/trainjobs/(?P<name>[^/]+)/status$"
)
"""v2.3.0's ``POST `` + ``StatusUrl("{namespace}", "{name}")``: each wildcard one non-empty segment."""


def rest_fetch(transport: Any) -> Fetch:
    """GET an absolute URL with the manager's API credentials and CA (v2.3.0's
    ``rest.HTTPClientFor(mgr.GetConfig())``), for the issuer's discovery document and JWKS."""
    import aiohttp

    async def fetch(url: str) -> tuple[int, bytes]:
        headers = {"Accept": "*/*", "Cache-Control": "no-cache"}  # Go's client names no type
        auth = await transport.config.authorization()
        if auth:
            headers["Authorization"] = auth
        async with transport.session.get(
            url, headers=headers, timeout=aiohttp.ClientTimeout(total=30)
        ) as resp:
            return resp.status, await resp.read()

    return fetch


def setup_status_server(
    mgr: Any,
    *,
    port: int,
    qps: float,
    burst: int,
    cert_dir: Path | str,
    host: str = "",
    tls_opts: tuple[TLSOption, ...] = (),
) -> StatusServer:
    """v2.3.0's ``SetupServer``: its own API client with ``statusServer.qps/burst``, the OIDC
    authorizer over the manager's own REST config."""
    from manager.client.client import Client
    from manager.client.rest import RestTransport
    from manager.client.restmapper import RESTMapper

    rest = replace(mgr.cluster.config, qps=float(qps) or None, burst=int(burst))
    transport = RestTransport(rest)
    client = Client(transport, RESTMapper(transport), field_owner=FIELD_OWNER)

    async def apply(obj: Json) -> Any:
        return await client.status.apply(obj, field_owner=FIELD_OWNER, force=True)

    oidc_transport = RestTransport(mgr.cluster.config)
    handler = StatusHandler(ProjectedTokenAuthorizer(rest_fetch(oidc_transport)), apply)
    server = StatusServer(handler, host=host, port=port, cert_dir=cert_dir, tls_opts=tls_opts)
    server.closers = [transport.aclose, oidc_transport.aclose]
    return server
