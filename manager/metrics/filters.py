"""Authentication and authorisation for the metrics endpoint (controller-runtime's pkg/metrics/filters).

``with_authentication_and_authorization(client)`` returns a filter the metrics server wraps around
``/metrics`` and every extra handler. Each request must carry ``Authorization: Bearer <token>``;
the token is authenticated with a TokenReview and the user it names is authorised with a
SubjectAccessReview on the non-resource URL (the request path) and verb (the lower-case method):

* no token, a malformed header, or a token the TokenReview does not authenticate: 401
* a SubjectAccessReview that does not allow the request: 403
* the API server cannot be asked (after retries): 500
* otherwise the wrapped handler answers

As the delegating authenticator and authorizer controller-runtime configures, results are
cached: a token's review for 1 minute (authenticated or not), an allowed decision for 5 minutes
and a denied one for 30 seconds, so a Prometheus scrape costs no API call most of the time.
Tokens are cached only as SHA-256 digests and never logged.

RBAC the manager needs: ``create`` on ``tokenreviews`` (authentication.k8s.io) and
``subjectaccessreviews`` (authorization.k8s.io). A scraper needs ``get`` on the non-resource URL
``/metrics``.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypedDict, TypeVar, Unpack

import aiohttp
import structlog
from aiohttp import web

from manager.client.errors import ApiError
from manager.clock import REAL_CLOCK, Clock
from manager.errors import Error
from manager.meta.object import Json

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
"""An HTTP endpoint of the metrics server."""
Filter = Callable[[Handler], Handler]
"""Wrapped around ``/metrics`` and every extra handler (``with_authentication_and_authorization``)."""
"""Wraps a handler of the metrics server (Go's ``metricsserver.Filter``)."""

AUTHN_CACHE_TTL = 60.0
AUTHZ_ALLOW_CACHE_TTL = 300.0
AUTHZ_DENY_CACHE_TTL = 30.0
REVIEW_TIMEOUT = 10.0
# the webhook retry back-off controller-runtime copies from k8s.io/apiserver (jitter left out)
RETRY_DELAYS = (0.5, 0.75, 1.125, 1.6875)
CACHE_SIZE = 4096

AUTHENTICATED_GROUP = "system:authenticated"

log = structlog.get_logger("manager.metrics.filters")


class ReviewClient(Protocol):
    """What the filter needs of the framework's client: ``create`` returning the created object."""

    async def create(self, obj: Json) -> Json: ...


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def extra_dict(self) -> dict[str, list[str]]:
        return {key: list(values) for key, values in self.extra}


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass
class TTLCache(Generic[K, V]):
    """A bounded map whose entries expire; the oldest entry goes when it is full."""

    clock: Clock = REAL_CLOCK
    size: int = CACHE_SIZE
    _entries: OrderedDict[K, tuple[float, V]] = field(default_factory=OrderedDict)

    def get(self, key: K) -> tuple[bool, V | None]:
        entry = self._entries.get(key)
        if entry is None:
            return False, None
        expires, value = entry
        if self.clock.now() >= expires:
            del self._entries[key]
            return False, None
        return True, value

    def put(self, key: K, value: V, ttl: float) -> None:
        if ttl <= 0:
            return
        self._entries[key] = (self.clock.now() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class ReviewError(Error):
    """The API server could not be asked (it answered an error, or not at all)."""


def bearer_token(request: web.Request) -> str | None:
    """The token of ``Authorization: Bearer <token>`` (scheme case-insensitive), else None."""
    header = request.headers.get("Authorization", "")
    parts = header.split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
        return None
    return parts[1]


def _retryable(err: BaseException) -> bool:
    if isinstance(err, ApiError):
        return err.status_code >= 500 or err.status_code == 429
    return isinstance(err, aiohttp.ClientError | asyncio.TimeoutError | OSError)


class DelegatingAuth:
    """TokenReview authentication and SubjectAccessReview authorisation with caches."""

    def __init__(
        self,
        client: ReviewClient,
        *,
        authn_ttl: float = AUTHN_CACHE_TTL,
        allow_ttl: float = AUTHZ_ALLOW_CACHE_TTL,
        deny_ttl: float = AUTHZ_DENY_CACHE_TTL,
        timeout: float = REVIEW_TIMEOUT,
        retry_delays: tuple[float, ...] = RETRY_DELAYS,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self.client = client
        self.authn_ttl = authn_ttl
        self.allow_ttl = allow_ttl
        self.deny_ttl = deny_ttl
        self.timeout = timeout
        self.retry_delays = retry_delays
        self.clock = clock
        self.tokens: TTLCache[bytes, UserInfo | None] = TTLCache(clock)
        self.decisions: TTLCache[tuple[UserInfo, str, str], tuple[bool, str]] = TTLCache(clock)
        self.reviews = 0
        """TokenReviews and SubjectAccessReviews sent (what the caches save)."""

    async def _create(self, body: Json) -> Json:
        attempt = 0
        while True:
            self.reviews += 1
            try:
                async with asyncio.timeout(self.timeout):
                    return await self.client.create(body)
            except Exception as err:
                if attempt >= len(self.retry_delays) or not _retryable(err):
                    raise ReviewError(f"{body['kind']} failed: {err}") from err
                delay = self.retry_delays[attempt]
                await (self.clock.sleep(delay) if delay > 0 else asyncio.sleep(0))
                attempt += 1

    async def authenticate(self, token: str, audiences: tuple[str, ...] = ()) -> UserInfo | None:
        """The user the token belongs to, or None when the API server does not authenticate it.

        With ``audiences`` the TokenReview asks for them (a token minted for another audience is
        not authenticated) and the answer must name at least one of them.
        """
        key = hashlib.sha256("\x00".join((token, *audiences)).encode()).digest()
        hit, cached = self.tokens.get(key)
        if hit:
            return cached
        spec: Json = {"token": token}
        if audiences:
            spec["audiences"] = list(audiences)
        review = await self._create(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
        )
        status = review.get("status") or {}
        user: UserInfo | None = None
        granted = set(status.get("audiences") or ())
        if audiences and not granted.intersection(audiences):
            status = {**status, "authenticated": False, "error": "token audiences do not match"}
        if status.get("authenticated"):
            info = status.get("user") or {}
            groups = tuple(info.get("groups") or ())
            if AUTHENTICATED_GROUP not in groups:
                groups = (*groups, AUTHENTICATED_GROUP)
            extra = tuple(sorted((k, tuple(v or ())) for k, v in (info.get("extra") or {}).items()))
            user = UserInfo(
                name=str(info.get("username") or ""),
                uid=str(info.get("uid") or ""),
                groups=groups,
                extra=extra,
            )
        else:
            log.debug("token not authenticated", error=str(status.get("error") or ""))
        self.tokens.put(key, user, self.authn_ttl)
        return user

    async def authorize(self, user: UserInfo, verb: str, path: str) -> tuple[bool, str]:
        """Whether ``user`` may ``verb`` the non-resource URL ``path``, and the reason given."""
        key = (user, verb, path)
        hit, cached = self.decisions.get(key)
        if hit and cached is not None:
            return cached
        spec: Json = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = user.extra_dict()
        review = await self._create(
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        )
        status = review.get("status") or {}
        allowed = bool(status.get("allowed")) and not status.get("denied")
        reason = str(status.get("reason") or status.get("evaluationError") or "")
        decision = (allowed, reason)
        self.decisions.put(key, decision, self.allow_ttl if allowed else self.deny_ttl)
        return decision


def _text(status: int, message: str) -> web.Response:
    # Go's http.Error: the message and a newline, as plain text, not sniffable
    return web.Response(
        status=status,
        text=message + "\n",
        content_type="text/plain",
        charset="utf-8",
        headers={"X-Content-Type-Options": "nosniff"},
    )


class AuthFilter:
    """A ``Filter``: wraps handlers so that they answer only authenticated, authorised requests."""

    def __init__(self, auth: DelegatingAuth) -> None:
        self.auth = auth

    def __call__(self, handler: Handler) -> Handler:
        auth = self.auth

        async def filtered(request: web.Request) -> web.StreamResponse:
            token = bearer_token(request)
            try:
                user = await auth.authenticate(token) if token is not None else None
            except ReviewError as err:
                log.error("Authentication failed", error=str(err), path=request.path)
                return _text(500, "Authentication failed")
            if user is None:
                log.debug("Authentication failed", path=request.path)
                return _text(401, "Unauthorized")
            try:
                allowed, reason = await auth.authorize(user, request.method.lower(), request.path)
            except ReviewError as err:
                message = f"Authorization for user {user.name} failed"
                log.error(message, error=str(err), path=request.path)
                return _text(500, message)
            if not allowed:
                message = f"Authorization denied for user {user.name}"
                log.debug(f"{message}: {reason}", path=request.path)
                return _text(403, message)
            return await handler(request)

        return filtered


class AuthOptions(TypedDict, total=False):
    """``DelegatingAuth``'s keyword options (each defaults to the module constant)."""

    authn_ttl: float
    allow_ttl: float
    deny_ttl: float
    timeout: float
    retry_delays: tuple[float, ...]
    clock: Clock


def with_authentication_and_authorization(client: ReviewClient, **options: Unpack[AuthOptions]) -> AuthFilter:
    """The filter: every request authenticated (TokenReview) and authorised (SubjectAccessReview).

    Pass it as the manager's ``metrics_filter_provider`` (it is called with the manager's client).
    ``options`` are ``DelegatingAuth``'s (cache TTLs, timeout, retry delays, clock).
    """
    return AuthFilter(DelegatingAuth(client, **options))
