"""The request error tree: one exception class per outcome the framework reacts to differently.

::

    manager.Error
    └── RequestError                 a request to the API server failed
        ├── TransportError           no HTTP answer at all (refused, reset, timed out)
        └── ApiError                 a non-success answer (a metav1.Status)
            ├── ClientError          4xx: the request was wrong; retrying the same one will not help
            │   BadRequest, Unauthorized, Forbidden, NotFound, MethodNotAllowed,
            │   Conflict (stale resourceVersion), AlreadyExists (name taken), Gone, Invalid
            └── ServerError          5xx and 429: the server could not serve it now; retry later
                InternalError, ServiceUnavailable, Timeout, TooManyRequests

``AlreadyExists`` is not a ``Conflict``: a conflict is cured by re-reading and retrying, a taken
name is not (``retry_on_conflict`` retries only ``Conflict``). ``ApiError.from_status`` maps an
HTTP status and a ``metav1.Status`` body to the right class, so callers write ``except NotFound``
instead of comparing codes.
"""

from __future__ import annotations

from manager.errors import Error
from manager.meta.object import Json


class RequestError(Error):
    """A request to the API server failed, with an answer (``ApiError``) or without one
    (``TransportError``)."""


class TransportError(RequestError):
    """The request never got an HTTP answer (connection refused, reset, timeout)."""


class ApiError(RequestError):
    """A non-success answer from the Kubernetes API."""

    status_code: int = 0

    def __init__(self, message: str, *, status: Json | None = None, code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status or {}
        if code is not None:
            self.status_code = code

    @property
    def reason(self) -> str:
        return str(self.status.get("reason", ""))

    @property
    def causes(self) -> list[Json]:
        """Field-level causes of an Invalid error: ``[{"field": ..., "message": ..., "reason": ...}]``."""
        details = self.status.get("details") or {}
        return list(details.get("causes") or [])

    @classmethod
    def from_status(cls, code: int, body: Json | None, *, retry_after: float | None = None) -> ApiError:
        body = body or {}
        message = str(body.get("message") or f"HTTP {code}")
        reason = body.get("reason", "")
        error_class = _BY_REASON.get(reason) or _BY_CODE.get(code) or _by_range(code)
        if error_class is TooManyRequests:
            return TooManyRequests(message, status=body, code=code, retry_after=retry_after)
        return error_class(message, status=body, code=code)


class ClientError(ApiError):
    """A 4xx answer: the request itself is wrong (missing object, stale version, invalid field,
    no permission); sending it again unchanged gives the same answer."""


class ServerError(ApiError):
    """A 5xx or 429 answer: the server could not serve the request now; it may succeed later."""


class BadRequest(ClientError):
    status_code = 400


class Unauthorized(ClientError):
    status_code = 401


class Forbidden(ClientError):
    status_code = 403


class NotFound(ClientError):
    status_code = 404


class MethodNotAllowed(ClientError):
    status_code = 405


class Conflict(ClientError):
    """The object changed since it was read (stale resourceVersion): re-read and retry."""

    status_code = 409


class AlreadyExists(ClientError):
    """A create found an object of the same name (a 409 with reason AlreadyExists). Not a
    ``Conflict``: re-reading does not free the name."""

    status_code = 409


class Gone(ClientError):
    """The requested resourceVersion is too old (410): a watch must relist."""

    status_code = 410


class Invalid(ClientError):
    """The object failed validation (422); ``causes`` names each field and why."""

    status_code = 422


class TooManyRequests(ServerError):
    """Throttled (429); wait ``retry_after`` seconds before retrying."""

    status_code = 429

    def __init__(
        self,
        message: str,
        *,
        status: Json | None = None,
        code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status=status, code=code)
        self.retry_after = retry_after


class InternalError(ServerError):
    status_code = 500


class ServiceUnavailable(ServerError):
    status_code = 503


class Timeout(ServerError):
    status_code = 504


def is_transient(err: BaseException) -> bool:
    """Whether a request may succeed if sent again unchanged: no HTTP answer at all, a 429, or a
    5xx (an API server restarting, overloaded, or a proxy in front of it failing)."""
    return isinstance(err, TransportError) or (
        isinstance(err, ApiError) and (err.status_code == 429 or err.status_code >= 500)
    )


def _by_range(code: int) -> type[ApiError]:
    if 400 <= code < 500:
        return ClientError
    if code >= 500:
        return ServerError
    return ApiError


_BY_CODE: dict[int, type[ApiError]] = {
    c.status_code: c
    for c in (
        BadRequest,
        Unauthorized,
        Forbidden,
        NotFound,
        MethodNotAllowed,
        Conflict,
        Gone,
        Invalid,
        TooManyRequests,
        InternalError,
        ServiceUnavailable,
        Timeout,
    )
}
_BY_REASON: dict[str, type[ApiError]] = {"AlreadyExists": AlreadyExists, "Expired": Gone}
