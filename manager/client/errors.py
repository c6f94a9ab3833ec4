"""The API error tree: one exception class per status the framework reacts to differently.

``ApiError.from_status`` maps an HTTP status and a ``metav1.Status`` body to the right class,
so callers write ``except NotFound`` instead of comparing codes.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A non-success answer from the Kubernetes API."""

    status_code: int = 0

    def __init__(
        self, message: str, *, status: dict[str, Any] | None = None, code: int | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status or {}
        if code is not None:
            self.status_code = code

    @property
    def reason(self) -> str:
        return str(self.status.get("reason", ""))

    @property
    def causes(self) -> list[dict[str, Any]]:
        """Field-level causes of an Invalid error: ``[{"field": ..., "message": ..., "reason": ...}]``."""
        details = self.status.get("details") or {}
        return list(details.get("causes") or [])

    @classmethod
    def from_status(
        cls, code: int, body: dict[str, Any] | None, *, retry_after: float | None = None
    ) -> ApiError:
        body = body or {}
        message = str(body.get("message") or f"HTTP {code}")
        reason = body.get("reason", "")
        error_class = _BY_REASON.get(reason) or _BY_CODE.get(code) or ApiError
        if error_class is TooManyRequests:
            return TooManyRequests(message, status=body, code=code, retry_after=retry_after)
        return error_class(message, status=body, code=code)


class BadRequest(ApiError):
    status_code = 400


class Unauthorized(ApiError):
    status_code = 401


class Forbidden(ApiError):
    status_code = 403


class NotFound(ApiError):
    status_code = 404


class MethodNotAllowed(ApiError):
    status_code = 405


class Conflict(ApiError):
    """The object changed since it was read (stale resourceVersion): re-read and retry."""

    status_code = 409


class AlreadyExists(Conflict):
    """A create found an object of the same name (also a 409, reason AlreadyExists)."""


class Gone(ApiError):
    """The requested resourceVersion is too old (410): a watch must relist."""

    status_code = 410


class Invalid(ApiError):
    """The object failed validation (422); ``causes`` names each field and why."""

    status_code = 422


class TooManyRequests(ApiError):
    """Throttled (429); wait ``retry_after`` seconds before retrying."""

    status_code = 429

    def __init__(
        self,
        message: str,
        *,
        status: dict[str, Any] | None = None,
        code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status=status, code=code)
        self.retry_after = retry_after


class InternalError(ApiError):
    status_code = 500


class ServiceUnavailable(ApiError):
    status_code = 503


class Timeout(ApiError):
    status_code = 504


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
