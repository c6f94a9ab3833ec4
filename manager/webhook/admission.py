"""AdmissionReview v1 (and v1beta1) decoding and encoding, and the response helpers.

A handler gets an ``AdmissionRequest`` and returns an ``AdmissionResponse``; the server echoes
the request ``uid`` and the review's apiVersion, and encodes patches as a base64 JSON Patch.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from manager import _json
from manager.meta.field import FieldError, aggregate
from manager.meta.object import Json as Object
from manager.webhook import jsonpatch

# What a caller sees when a handler fails unexpectedly; the details go to the log only.
INTERNAL_ERROR_MESSAGE = "internal error in the admission webhook; see the webhook server's log"


class AdmissionDecodeError(ValueError):
    """The body is not an AdmissionReview with a request."""


class DecodeError(ValueError):
    """The object does not decode into the handler's typed shape (answered 400 with this text)."""


class Denied(Exception):
    """Raised by a defaulter or validator to deny the request: 403 Forbidden with ``message``.

    The one way a handler denies (controller-runtime's ``admission.Denied``); ``warnings`` are
    returned with the denial, as a Go validator returns warnings and an error together. Any
    other exception is an internal error (500), never a denial.
    """

    def __init__(self, message: str, *, warnings: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.warnings = list(warnings)

    @classmethod
    def from_field_errors(cls, errors: Iterable[FieldError | str], *, warnings: Sequence[str] = ()) -> Denied:
        """``ErrorList.ToAggregate()`` of ``errors`` as the message (Go's validator return)."""
        return cls(aggregate(errors), warnings=warnings)


@dataclass
class AdmissionRequest:
    uid: str
    kind: dict[str, str]
    resource: dict[str, str]
    operation: str  # CREATE, UPDATE, DELETE, CONNECT
    name: str = ""
    namespace: str = ""
    sub_resource: str = ""
    object: Object | None = None
    old_object: Object | None = None
    user_info: dict[str, Any] = field(default_factory=dict)
    dry_run: bool = False
    options: Object | None = None
    raw: Object = field(default_factory=dict)


@dataclass
class AdmissionResponse:
    allowed: bool
    code: int = 200
    message: str = ""
    reason: str = ""
    warnings: list[str] = field(default_factory=list)
    patches: list[jsonpatch.Operation] = field(default_factory=list)
    causes: list[dict[str, str]] = field(default_factory=list)

    def with_warnings(self, *warnings: str) -> AdmissionResponse:
        self.warnings.extend(warnings)
        return self


def allowed(message: str = "") -> AdmissionResponse:
    return AdmissionResponse(True, 200, message)


def denied(message: str, *, code: int = 403, reason: str = "Forbidden") -> AdmissionResponse:
    return AdmissionResponse(False, code, message, reason)


def errored(code: int, err: BaseException | str) -> AdmissionResponse:
    return AdmissionResponse(False, code, str(err))


def patch_response(original: Object, modified: Object) -> AdmissionResponse:
    """Allowed, with the JSON Patch from ``original`` to ``modified``."""
    return AdmissionResponse(True, 200, patches=jsonpatch.diff(original, modified))


def decode_review(body: bytes) -> tuple[str, AdmissionRequest]:
    """Returns the review apiVersion and the request."""
    try:
        review = _json.loads(body)
    except _json.JSONDecodeError as err:
        raise AdmissionDecodeError(f"body is not JSON: {err}") from None
    if not isinstance(review, dict) or review.get("kind") != "AdmissionReview":
        raise AdmissionDecodeError("body is not an AdmissionReview")
    api_version = review.get("apiVersion", "")
    if api_version not in ("admission.k8s.io/v1", "admission.k8s.io/v1beta1"):
        raise AdmissionDecodeError(f"unsupported AdmissionReview version {api_version!r}")
    req = review.get("request")
    if not isinstance(req, dict) or not req.get("uid"):
        raise AdmissionDecodeError("AdmissionReview has no request or no request.uid")
    return api_version, AdmissionRequest(
        uid=req["uid"],
        kind=req.get("kind") or {},
        resource=req.get("resource") or {},
        operation=req.get("operation", ""),
        name=req.get("name", ""),
        namespace=req.get("namespace", ""),
        sub_resource=req.get("subResource", ""),
        object=req.get("object"),
        old_object=req.get("oldObject"),
        user_info=req.get("userInfo") or {},
        dry_run=bool(req.get("dryRun")),
        options=req.get("options"),
        raw=req,
    )


def encode_review(api_version: str, uid: str, response: AdmissionResponse) -> bytes:
    out: dict[str, Any] = {"uid": uid, "allowed": response.allowed}
    if not response.allowed or response.message or response.code != 200:
        status: dict[str, Any] = {"code": response.code}
        if response.message:
            status["message"] = response.message
        if response.reason:
            status["reason"] = response.reason
        if response.causes:
            status["details"] = {"causes": response.causes}
        if not response.allowed:
            status["status"] = "Failure"
        out["status"] = status
    if response.warnings:
        out["warnings"] = list(response.warnings)
    if response.patches:
        out["patchType"] = "JSONPatch"
        out["patch"] = base64.b64encode(_json.dumps(response.patches)).decode()
    return _json.dumps({"apiVersion": api_version, "kind": "AdmissionReview", "response": out})
