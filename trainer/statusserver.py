"""The TrainJob status server (KEP-2779, upstream v2.2 ``pkg/statusserver``), TrainJobStatus gate only.

Trainer pods ``POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status``
with ``{"trainerStatus": {"progressPercentage", "estimatedRemainingSeconds", "metrics": [{"name",
"value"}], "lastUpdatedTime"}}`` (what the ``kubeflow`` SDK's ``update_trainjob_status()`` sends)
and the manager server-side applies it to ``status.trainerStatus`` (field manager
``trainer-status``). It listens with HTTPS on its own port (``statusServer.port``, 10443, as
upstream), with the webhook serving certificate, on every replica (no leader election).

Each request, in this order:

1. ``Authorization: Bearer <token>`` is required (none or malformed: 401). The token is checked
   with a TokenReview asking for the TrainJob's own audience
   ``trainer.kubeflow.org/v1alpha1/namespaces/<ns>/trainjobs/<name>/status`` (not authenticated,
   e.g. expired or minted for another TrainJob: 401). Reviews are cached for a minute (by the
   token's SHA-256), so a reporting pod costs about one API call a minute.
2. The token must be a pod-bound service-account token of the TrainJob's namespace
   (``extra`` ``authentication.kubernetes.io/pod-name``/``pod-uid``), and that Pod must exist
   with that uid, be controlled by a Job and carry ``jobset.sigs.k8s.io/jobset-name: <name>``:
   a pod of the TrainJob's own JobSet (otherwise 403).
3. At most ``burst`` updates at once and ``rate`` per second per TrainJob (else 429 with
   ``Retry-After``); limiter and token caches are bounded, so memory stays flat however many
   updates and TrainJobs there are.
4. The body must be JSON of that shape (64 KiB at most): any other field, type or range is a 400
   whose message names the field (upstream answers 422 "Invalid payload").
5. A missing TrainJob is 404; a TrainJob CRD without ``status.trainerStatus`` (the v2.1 CRD:
   apply ``config/progress/crd``) is a 500 saying so rather than a silent no-op.

Errors are ``metav1.Status`` JSON objects, as upstream's ``badRequest``.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Unpack

import structlog
from aiohttp import web

from manager.client.errors import ApiError, NotFound, RequestError
from manager.clock import REAL_CLOCK, Clock
from manager.meta.gvk import POD
from manager.meta.object import Json
from manager.meta.times import format_time
from manager.metrics.filters import DelegatingAuth, ReviewError
from manager.tokenbucket import TokenBucket
from manager.webhook.certwatcher import TLSOption
from manager.webhook.tlsserver import Serving, TLSServer
from trainer.api import jobset_constants as jc
from trainer.api.trainjob_progress_v1alpha1 import METRIC_FIELD_MAX_LENGTH, METRICS_MAX_ITEMS
from trainer.runtime.plugins.trainjobstatus import status_path, token_audience

__all__ = [
    "FIELD_OWNER",
    "MAX_BODY",
    "BodyError",
    "ProgressHandler",
    "StatusServer",
    "UpdateRateLimiter",
    "parse_update",
]

log = structlog.get_logger("runtime-status")

FIELD_OWNER = "trainer-status"
MAX_BODY = 1 << 16
INT32_MAX = 2**31 - 1
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
ROUTE = status_path("{namespace}", "{name}")
DEFAULT_RATE = 1.0
"""Updates per second per TrainJob (the SDK sends at most one per 5 s per pod)."""
DEFAULT_BURST = 10
LIMITER_SIZE = 4096


def status_body(code: int, reason: str, message: str) -> Json:
    """A ``metav1.Status`` failure, as upstream's ``badRequest`` writes it."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


@dataclass
class UpdateRateLimiter:
    """A token bucket per key (namespace, TrainJob); the least recently used key goes when
    ``size`` are tracked."""

    rate: float = DEFAULT_RATE
    burst: int = DEFAULT_BURST
    clock: Clock = REAL_CLOCK
    size: int = LIMITER_SIZE
    _buckets: OrderedDict[tuple[str, str], TokenBucket] = field(default_factory=OrderedDict)

    def allow(self, key: tuple[str, str]) -> float:
        """0 if the update may go now (and takes a token), else the seconds until one is free."""
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(self.rate, self.burst, self.clock.now)
        self._buckets.move_to_end(key)
        while len(self._buckets) > self.size:
            self._buckets.popitem(last=False)
        return bucket.take()

    def __len__(self) -> int:
        return len(self._buckets)


class BodyError(ValueError):
    """A request body that is not an update; the message names the field."""


_TRAINER_STATUS_FIELDS = ("progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime")


def _int_field(status: Json, name: str, low: int, high: int) -> int | None:
    value = status.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BodyError(f"trainerStatus.{name}: Invalid value: {json.dumps(value)}: must be an integer")
    if not low <= value <= high:
        raise BodyError(f"trainerStatus.{name}: Invalid value: {value}: must be between {low} and {high}")
    return value


def _time_field(status: Json) -> str:
    value = status.get("lastUpdatedTime")
    if value is None:
        raise BodyError("trainerStatus.lastUpdatedTime: Required value: lastUpdatedTime is required")
    if not isinstance(value, str):
        raise BodyError(
            f"trainerStatus.lastUpdatedTime: Invalid value: {json.dumps(value)}: must be an RFC 3339 time"
        )
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None or "T" not in value.upper():
        raise BodyError(
            f"trainerStatus.lastUpdatedTime: Invalid value: {json.dumps(value)}: "
            "must be an RFC 3339 time with a time zone"
        )
    return format_time(parsed)


def _metrics_field(status: Json) -> list[Json] | None:
    metrics = status.get("metrics")
    if metrics is None:
        return None
    if not isinstance(metrics, list):
        raise BodyError("trainerStatus.metrics: Invalid value: must be a list of {name, value}")
    if len(metrics) > METRICS_MAX_ITEMS:
        raise BodyError(
            f"trainerStatus.metrics: Too many: {len(metrics)}: must have at most {METRICS_MAX_ITEMS} items"
        )
    out = []
    for i, metric in enumerate(metrics):
        where = f"trainerStatus.metrics[{i}]"
        if not isinstance(metric, dict):
            raise BodyError(f"{where}: Invalid value: must be an object with name and value")
        unknown = sorted(set(metric) - {"name", "value"})
        if unknown:
            raise BodyError(f'{where}.{unknown[0]}: unknown field "{unknown[0]}"')
        for key in ("name", "value"):
            value = metric.get(key)
            if value is None:
                raise BodyError(f"{where}.{key}: Required value")
            if not isinstance(value, str):
                raise BodyError(f"{where}.{key}: Invalid value: {json.dumps(value)}: must be a string")
            if not 1 <= len(value) <= METRIC_FIELD_MAX_LENGTH:
                raise BodyError(
                    f"{where}.{key}: Invalid value: {json.dumps(value)[:80]}: "
                    f"must be 1 to {METRIC_FIELD_MAX_LENGTH} characters"
                )
        out.append({"name": metric["name"], "value": metric["value"]})
    return out


def parse_update(body: bytes) -> Json | None:
    """The ``trainerStatus`` to apply (None: nothing to apply), or ``BodyError`` naming the field."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise BodyError(f"body: Invalid value: request body is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise BodyError("body: Invalid value: must be a JSON object with trainerStatus")
    unknown = sorted(set(data) - {"trainerStatus"})
    if unknown:
        raise BodyError(f'{unknown[0]}: unknown field "{unknown[0]}"')
    status = data.get("trainerStatus")
    if status is None:
        return None
    if not isinstance(status, dict):
        raise BodyError("trainerStatus: Invalid value: must be an object")
    unknown = sorted(set(status) - set(_TRAINER_STATUS_FIELDS))
    if unknown:
        raise BodyError(f'trainerStatus.{unknown[0]}: unknown field "{unknown[0]}"')
    out: Json = {}
    progress = _int_field(status, "progressPercentage", 0, 100)
    if progress is not None:
        out["progressPercentage"] = progress
    remaining = _int_field(status, "estimatedRemainingSeconds", 0, INT32_MAX)
    if remaining is not None:
        out["estimatedRemainingSeconds"] = remaining
    metrics = _metrics_field(status)
    if metrics is not None:
        out["metrics"] = metrics
    out["lastUpdatedTime"] = _time_field(status)
    return out


PodGetter = Callable[[str, str], Awaitable[Json | None]]
"""``(namespace, name)`` -> the Pod, or None when there is none."""


class StatusApplier:
    """Server-side applies ``status.trainerStatus`` with the ``trainer-status`` field manager."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def __call__(self, namespace: str, name: str, trainer_status: Json) -> Json:
        obj = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name, "namespace": namespace},
            "status": {"trainerStatus": trainer_status},
        }
        result = await self.client.status.apply(obj, field_owner=FIELD_OWNER, force=True)
        return result if isinstance(result, dict) else dict(result)


class ProgressHandler:
    """Authenticates, authorises, limits, validates and applies one update (no HTTP in here)."""

    def __init__(
        self,
        auth: DelegatingAuth,
        get_pod: PodGetter,
        apply: Callable[[str, str, Json], Awaitable[Json]],
        limiter: UpdateRateLimiter | None = None,
    ) -> None:
        self.auth = auth
        self.get_pod = get_pod
        self.apply = apply
        self.limiter = limiter if limiter is not None else UpdateRateLimiter()

    async def _authorize(self, token: str, namespace: str, name: str) -> tuple[int, str] | None:
        try:
            user = await self.auth.authenticate(token, (token_audience(namespace, name),))
        except ReviewError as err:
            log.error("TokenReview failed", error=str(err))
            return 500, "Authentication failed: the API server could not review the token"
        if user is None:
            return 401, "Unauthorized: the token is not valid for this TrainJob's audience"
        sa_namespace = user.name.removeprefix(SERVICE_ACCOUNT_PREFIX).split(":", 1)[0]
        if not user.name.startswith(SERVICE_ACCOUNT_PREFIX) or sa_namespace != namespace:
            return 403, f"Forbidden: {user.name} is not a service account of namespace {namespace}"
        extra = user.extra_dict()
        pod_name = next(iter(extra.get(POD_NAME_EXTRA) or ()), "")
        pod_uid = next(iter(extra.get(POD_UID_EXTRA) or ()), "")
        if not pod_name or not pod_uid:
            return 403, "Forbidden: the token is not bound to a pod"
        pod = await self.get_pod(namespace, pod_name)
        meta = (pod or {}).get("metadata") or {}
        if pod is None or meta.get("uid") != pod_uid:
            return 403, f"Forbidden: pod {namespace}/{pod_name} of the token does not exist"
        labels = meta.get("labels") or {}
        controlled_by_job = any(
            ref.get("controller") and ref.get("kind") == "Job" for ref in meta.get("ownerReferences") or ()
        )
        if labels.get(jc.JobSetNameKey) != name or not controlled_by_job:
            return (
                403,
                f"Forbidden: pod {namespace}/{pod_name} does not belong to TrainJob {namespace}/{name}",
            )
        return None

    async def handle(self, namespace: str, name: str, authorization: str, body: bytes) -> tuple[int, Json]:
        """The HTTP status and JSON body of the answer."""
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return 401, status_body(401, "Unauthorized", "Unauthorized: a Bearer token is required")
        denied = await self._authorize(token, namespace, name)
        if denied is not None:
            code, message = denied
            reason = {401: "Unauthorized", 403: "Forbidden"}.get(code, "InternalError")
            return code, status_body(code, reason, message)
        wait = self.limiter.allow((namespace, name))
        if wait > 0:
            message = f"Too many status updates for TrainJob {namespace}/{name}: retry in {math.ceil(wait)}s"
            return 429, {**status_body(429, "TooManyRequests", message), "retryAfterSeconds": math.ceil(wait)}
        try:
            trainer_status = parse_update(body)
        except BodyError as err:
            return 400, status_body(400, "BadRequest", str(err))
        if trainer_status is None:
            return 200, {}
        try:
            result = await self.apply(namespace, name, trainer_status)
        except NotFound:
            return 404, status_body(404, "NotFound", f"Train job {namespace}/{name} not found")
        except RequestError as err:
            if isinstance(err, ApiError) and err.status_code in (400, 422):
                return 400, status_body(400, "BadRequest", str(err))
            log.error("Failed to update TrainJob", namespace=namespace, name=name, error=str(err))
            return 500, status_body(500, "InternalError", "Internal error")
        if "trainerStatus" not in ((result.get("status") or {}) if isinstance(result, dict) else {}):
            message = (
                "the TrainJob CRD has no status.trainerStatus: install the TrainJobStatus CRD "
                "(config/progress/crd)"
            )
            log.error(message, namespace=namespace, name=name)
            return 500, status_body(500, "InternalError", message)
        return 200, {"trainerStatus": trainer_status}


class StatusServer(TLSServer):
    """The HTTPS listener (a Runnable on every replica)."""

    def __init__(self, handler: ProgressHandler, *, port: int = 10443, **serving: Unpack[Serving]) -> None:
        super().__init__(port=port, **serving)
        self.handler = handler

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post(ROUTE, self._serve)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        return app

    def listening(self, port: int) -> None:
        log.info("Starting runtime status server with TLS", port=port)

    async def _not_found(self, _request: web.Request) -> web.Response:
        return web.json_response(status_body(404, "NotFound", "Not found"), status=404)

    async def _serve(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return web.json_response(
                status_body(413, "RequestEntityTooLarge", f"Payload too large: at most {MAX_BODY} bytes"),
                status=413,
            )
        code, payload = await self.handler.handle(
            namespace, name, request.headers.get("Authorization", ""), body
        )
        headers = {"Retry-After": str(payload["retryAfterSeconds"])} if code == 429 else None
        return web.json_response(payload, status=code, headers=headers)


def pod_getter(cached: Any, live: Any) -> PodGetter:
    """Pods from the manager's cache, a miss confirmed live (the pod may be seconds old)."""
    gvk = POD

    async def get(namespace: str, name: str) -> Json | None:
        for reader in (cached, live):
            try:
                pod = await reader.get(gvk, name, namespace)
            except NotFound:
                continue
            return pod if isinstance(pod, dict) else dict(pod)
        return None

    return get


class _ClosingServer(StatusServer):
    """Closes the status server's own API connection when it stops."""

    transport: Any = None

    async def start(self, started: asyncio.Event) -> None:
        try:
            await super().start(started)
        finally:
            if self.transport is not None:
                await self.transport.aclose()


def setup_status_server(
    mgr: Any,
    *,
    port: int,
    qps: float,
    burst: int,
    cert_dir: Path | str,
    host: str = "",
    rate: float = DEFAULT_RATE,
    update_burst: int = DEFAULT_BURST,
    tls_opts: tuple[TLSOption, ...] = (),
) -> StatusServer:
    """The status server for ``mgr`` (to be added once certificates exist): its own API client with ``statusServer.qps/burst``
    (upstream's separate client, so reporting pods cannot starve the reconcilers), pods read
    from the manager's cache."""
    from dataclasses import replace

    from manager.client.client import Client
    from manager.client.rest import RestTransport
    from manager.client.restmapper import RESTMapper

    rest = replace(mgr.cluster.config, qps=float(qps) or None, burst=int(burst))
    transport = RestTransport(rest)
    client = Client(transport, RESTMapper(transport), field_owner=FIELD_OWNER)
    handler = ProgressHandler(
        DelegatingAuth(client),
        pod_getter(mgr.client, client),
        StatusApplier(client),
        UpdateRateLimiter(rate=rate, burst=update_burst),
    )
    server = _ClosingServer(handler, host=host, port=port, cert_dir=cert_dir, tls_opts=tls_opts)
    server.transport = transport
    return server
