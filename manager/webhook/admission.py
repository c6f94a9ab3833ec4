"""AdmissionReview v1 (and v1beta1) decoding and encoding, and the response helpers.

A handler gets an ``AdmissionRequest`` and returns an ``AdmissionResponse``; the server echoes
the request ``uid`` and the review's apiVersion, and encodes patches as a base64 JSON Patch.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from manager import _json
from manager.meta.field import FieldError, aggregate
from manager.meta.gotext import go_quote
from manager.meta.object import Json as Object
from manager.meta.object import json_kind
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
    other exception is an internal error (500), never a denial. A Go handler that returns an
    ``apierrors.APIStatus`` error is answered with that Status instead: ``code``, ``reason`` and
    ``details`` say which (``Denied.invalid`` builds ``apierrors.NewInvalid``'s).
    """

    def __init__(
        self,
        message: str,
        *,
        warnings: Sequence[str] = (),
        code: int = 403,
        reason: str = "Forbidden",
        details: Object | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.warnings = list(warnings)
        self.code = code
        self.reason = reason
        self.details = details

    @classmethod
    def from_field_errors(cls, errors: Iterable[FieldError | str], *, warnings: Sequence[str] = ()) -> Denied:
        """``ErrorList.ToAggregate()`` of ``errors`` as the message (Go's validator return)."""
        return cls(aggregate(errors), warnings=warnings)

    @classmethod
    def invalid(
        cls, group: str, kind: str, name: str, errors: Sequence[FieldError], *, warnings: Sequence[str] = ()
    ) -> Denied:
        """``apierrors.NewInvalid(GroupKind{group, kind}, name, errors)``: 422 ``Invalid``, the message
        ``<Kind>.<group> "<name>" is invalid: <aggregate>`` and one cause per error (duplicates
        included, as Go lists them)."""
        qualified = f"{kind}.{group}" if group else kind
        message = f"{qualified} {go_quote(name)} is invalid"
        if errors:
            message += f": {aggregate(errors)}"
        causes = [{"reason": e.cause_type, "message": e.error_body(), "field": e.field} for e in errors]
        # metav1.StatusDetails: every field omitempty
        details: Object = {
            key: value
            for key, value in (("name", name), ("group", group), ("kind", kind), ("causes", causes))
            if value
        }
        return cls(message, warnings=warnings, code=422, reason="Invalid", details=details)


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
    user_info: Object = field(default_factory=dict)
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
    details: Object | None = None
    """The Status's ``details`` whole (name, group, kind, causes); without it, ``causes`` alone."""

    def with_warnings(self, *warnings: str) -> AdmissionResponse:
        self.warnings.extend(warnings)
        return self


Handler = Callable[[AdmissionRequest], Awaitable[AdmissionResponse]]
"""What the webhook server calls for one path: a request in, the answer out."""


def allowed(message: str = "") -> AdmissionResponse:
    return AdmissionResponse(True, 200, message)


def denied(message: str, *, code: int = 403, reason: str = "Forbidden") -> AdmissionResponse:
    return AdmissionResponse(False, code, message, reason)


def errored(code: int, err: BaseException | str) -> AdmissionResponse:
    return AdmissionResponse(False, code, str(err))


def patch_response(original: Object, modified: Object) -> AdmissionResponse:
    """Allowed, with the JSON Patch from ``original`` to ``modified``."""
    return AdmissionResponse(True, 200, patches=jsonpatch.diff(original, modified))


# The Go types of the AdmissionRequest fields controller-runtime decodes (k8s.io/api/admission/v1),
# for encoding/json's words when a field has the wrong JSON type. A dict is a struct: its Go name
# and its fields; RawExtension fields (object, oldObject, options) take any JSON.
_STRING, _RAW = "string", "raw"
_STRINGS = frozenset((_STRING, "types.UID", "v1.Operation"))
_GVK = ("v1.GroupVersionKind", {"group": _STRING, "version": _STRING, "kind": _STRING})
_GVR = ("v1.GroupVersionResource", {"group": _STRING, "version": _STRING, "resource": _STRING})
_USER_INFO = (
    "v1.UserInfo",
    {"username": _STRING, "uid": _STRING, "groups": "[]string", "extra": "map[string]v1.ExtraValue"},
)
_REQUEST = (
    "v1.AdmissionRequest",
    {
        "uid": "types.UID",
        "kind": _GVK,
        "resource": _GVR,
        "subResource": _STRING,
        "requestKind": _GVK,
        "requestResource": _GVR,
        "requestSubResource": _STRING,
        "name": _STRING,
        "namespace": _STRING,
        "operation": "v1.Operation",
        "userInfo": _USER_INFO,
        "object": _RAW,
        "oldObject": _RAW,
        "dryRun": "bool",
        "options": _RAW,
    },
)
_GO_TYPE_META = (
    'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'
)


def _type_error(value: Any, struct: str, field_path: str, go_type: str) -> str:
    return f"json: cannot unmarshal {json_kind(value)} into Go struct field {struct}.{field_path} of type {go_type}"


def _check(value: Any, spec: Any, struct: str, field_path: str) -> str | None:
    """The first type error decoding ``value`` into the Go type ``spec`` (None: it decodes)."""
    if value is None or spec == _RAW:
        return None
    if isinstance(spec, tuple):
        name, fields = spec
        if not isinstance(value, dict):
            return _type_error(value, struct, field_path, name)
        for key, item in value.items():
            item_spec = fields.get(key)
            if item_spec is None or item is None or item_spec == _RAW:
                continue
            if type(item) is str and isinstance(item_spec, str) and item_spec in _STRINGS:
                continue  # the commonest field, checked without building its path
            # encoding/json names the struct without its package, the type with it
            err = _check(item, item_spec, name.rsplit(".", 1)[-1], f"{field_path}.{key}")
            if err:
                return err
        return None
    if spec in _STRINGS:
        return None if isinstance(value, str) else _type_error(value, struct, field_path, spec)
    if spec == "bool":
        return None if isinstance(value, bool) else _type_error(value, struct, field_path, spec)
    if spec == "[]string":
        if not isinstance(value, list):
            return _type_error(value, struct, field_path, spec)
        bad = next((v for v in value if v is not None and not isinstance(v, str)), None)
        return None if bad is None else _type_error(bad, struct, field_path, _STRING)
    # map[string]v1.ExtraValue
    if not isinstance(value, dict):
        return _type_error(value, struct, field_path, spec)
    for item in value.values():
        err = _check(item, "[]string", struct, field_path)
        if err:
            return err.replace("of type []string", "of type v1.ExtraValue")
    return None


def decode_review(body: bytes, *, embedded_in_error_path: bool = False) -> tuple[str, AdmissionRequest]:
    """Returns the review apiVersion and the request, decoded as controller-runtime decodes it.

    Go's universal deserializer first reads apiVersion/kind (a body that is not a JSON object is
    refused with "couldn't get version/kind"), then unmarshals into the v1 struct: a field of the
    wrong JSON type is refused with encoding/json's words, unknown fields and a missing request
    are not errors (the handler then sees an empty request).
    """
    try:
        review = _json.loads(body)
    except _json.JSONDecodeError as err:
        raise AdmissionDecodeError(f"couldn't get version/kind; json parse error: {err}") from None
    if not isinstance(review, dict):
        raise AdmissionDecodeError(
            "couldn't get version/kind; json parse error: json: cannot unmarshal "
            f"{json_kind(review)} into Go value of type {_GO_TYPE_META}"
        )
    for key in ("apiVersion", "kind"):
        value = review.get(key)
        if value is not None and not isinstance(value, str):
            raise AdmissionDecodeError(
                f"couldn't get version/kind; json parse error: {_type_error(value, '', key, 'string')}"
            )
    api_version = review.get("apiVersion") or "admission.k8s.io/v1"  # Go answers v1 when it is unset
    req = review.get("request")
    # the struct controller-runtime decodes into embeds v1.AdmissionReview, which newer
    # sigs.k8s.io/json (controller-runtime v0.24's managers) names in a type error's path
    field_path = "AdmissionReview.request" if embedded_in_error_path else "request"
    type_error = _check(req, _REQUEST, "unversionedAdmissionReview", field_path)
    if type_error:
        raise AdmissionDecodeError(type_error)
    req = req or {}

    def text(key: str) -> str:
        value = req.get(key)
        return value if isinstance(value, str) else ""

    def raw(key: str) -> Object | None:
        value = req.get(key)
        return value  # any JSON: the handler's typed decode judges it

    return api_version, AdmissionRequest(
        uid=text("uid"),
        kind=req.get("kind") or {},
        resource=req.get("resource") or {},
        operation=text("operation"),
        name=text("name"),
        namespace=text("namespace"),
        sub_resource=text("subResource"),
        object=raw("object"),
        old_object=raw("oldObject"),
        user_info=req.get("userInfo") or {},
        dry_run=bool(req.get("dryRun")),
        options=raw("options"),
        raw=req,
    )


def encode_review(api_version: str, uid: str, response: AdmissionResponse) -> bytes:
    out: Object = {"uid": uid, "allowed": response.allowed}
    if not response.allowed or response.message or response.code != 200:
        status: Object = {"code": response.code}
        if response.message:
            status["message"] = response.message
        if response.reason:
            status["reason"] = response.reason
        if response.details is not None:
            status["details"] = response.details
        elif response.causes:
            status["details"] = {"causes": response.causes}
        if not response.allowed:
            status["status"] = "Failure"
        out["status"] = status
    if response.warnings:
        out["warnings"] = list(response.warnings)
    if response.patches:
        out["patchType"] = "JSONPatch"
        out["patch"] = base64.b64encode(_json.dumps(response.patches)).decode()
    review: Object = {"response": out}
    if api_version:  # a review that could not be read is answered without apiVersion/kind, as Go does
        review = {"apiVersion": api_version, "kind": "AdmissionReview", "response": out}
    return _json.dumps(review)
