"""Adapters from ``CustomDefaulter`` / ``CustomValidator`` objects to admission handlers.

* Defaulting is skipped for DELETE; the object is decoded (into ``model`` if given), the
  defaulter mutates it, and the answer is the JSON Patch from what the API server sent to the
  result. With a typed model, "remove" operations are dropped by default (a model that does not
  know a field must not delete it: controller-runtime's behaviour); plain dicts keep them.
* Validation: CONNECT is allowed without calling the validator; warnings are returned even on
  denial. ``Denied`` raised by either is a 403 with its message (and warnings); an
  ``ApiError`` becomes its own status code and message; anything else (a ``ValueError``
  included) a 500 with a generic message (the exception is logged with its traceback, never
  sent: it would leak internals and mean nothing to the user).
* Typed decoding: a ``decode`` callable runs before the handler, as controller-runtime's
  decoder does (``Errored(http.StatusBadRequest, err)``): it raises ``DecodeError`` for an object
  that does not have the typed shape and the answer is 400 with its message. A defaulting
  handler's ``encode`` callable turns the defaulted object into what the typed encoder would
  write (a Go webhook re-encodes its struct); the patch is computed against that, and removals
  the round trip alone would cause are dropped (controller-runtime's ``dropSchemeRemovals``).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Protocol, TypeVar, cast

from manager.client.errors import ApiError, TransportError
from manager.client.objects import to_dict
from manager.meta.object import Json as Object
from manager.meta.object import json_copy
from manager.webhook import jsonpatch
from manager.webhook.admission import (
    INTERNAL_ERROR_MESSAGE,
    AdmissionRequest,
    AdmissionResponse,
    DecodeError,
    Denied,
    Handler,
    allowed,
    denied,
    errored,
)

log = logging.getLogger(__name__)
Warnings = list[str]
T = TypeVar("T")
"""What a handler's defaulter or validator is given: the object dict, a ``model`` or ``decode``'s result."""
T_contra = TypeVar("T_contra", contravariant=True)
Decode = Callable[[Object | None], T]
Encode = Callable[[T], Object]


class CustomDefaulter(Protocol[T_contra]):
    async def default(self, obj: T_contra) -> None: ...


class CustomValidator(Protocol[T_contra]):
    async def validate_create(self, obj: T_contra) -> Warnings | None: ...

    async def validate_update(self, old: T_contra, new: T_contra) -> Warnings | None: ...

    async def validate_delete(self, obj: T_contra) -> Warnings | None: ...


def _decode(raw: Object | None, model: type[T] | None, decode: Decode[T] | None = None) -> T:
    if decode is not None:
        return decode(raw)
    if raw is None:
        raise DecodeError("there is no content to decode")
    data = json_copy(raw)
    if model is None:
        return cast(T, data)  # no model, no decode: the handler is given the object dict
    validate = getattr(model, "model_validate")  # noqa: B009 -- a pydantic model class
    return cast(T, validate(data))


def _from_error(err: Exception, warnings: Warnings | None = None) -> AdmissionResponse:
    if isinstance(err, DecodeError):
        response = errored(400, err)
    elif isinstance(err, ApiError):
        response = AdmissionResponse(
            False, err.status_code or 500, err.message, err.reason, causes=err.causes
        )
    elif isinstance(err, TransportError):  # no answer from the API server: a 500 naming the request
        response = AdmissionResponse(False, 500, str(err), "", causes=[])
    elif isinstance(err, Denied):
        response = denied(err.message, code=err.code, reason=err.reason)
        response.details = err.details
        warnings = [*err.warnings, *(warnings or [])]
    else:
        log.error("admission handler failed", exc_info=err)
        response = errored(500, INTERNAL_ERROR_MESSAGE)
    return response.with_warnings(*(warnings or []))


def defaulting_handler(
    defaulter: CustomDefaulter[T],
    model: type[T] | None = None,
    *,
    remove_unknown_fields: bool | None = None,
    decode: Decode[T] | None = None,
    encode: Encode[T] | None = None,
    unchanged_without_patch: bool = False,
) -> Handler:
    """``decode`` (raw object to the defaulter's input) and ``encode`` (its output to JSON) model a
    typed round trip; without them the object is a deep-copied dict or a ``model`` instance.

    ``unchanged_without_patch`` is controller-runtime v0.24's short cut: when the defaulter left
    the decoded object as it was (``reflect.DeepEqual``), the answer is allowed with no patch at
    all, so the typed round trip alone never changes the object (v0.22 patches it anyway)."""
    keep_removes = remove_unknown_fields if remove_unknown_fields is not None else model is None

    async def handle(req: AdmissionRequest) -> AdmissionResponse:
        if req.operation == "DELETE":
            return allowed()
        try:
            obj = _decode(req.object, model, decode)
            original = None
            if unchanged_without_patch:  # a dict is copied by orjson, a model by copy
                original = json_copy(obj) if isinstance(obj, dict) else copy.deepcopy(obj)
            await defaulter.default(obj)
            if unchanged_without_patch and obj == original:
                return allowed()
            result = encode(obj) if encode is not None else to_dict(obj) if model is not None else obj
            patches = jsonpatch.diff(req.object, result)
            if encode is not None and any(p["op"] == "remove" for p in patches):
                by_scheme = jsonpatch.diff(req.object, encode(_decode(req.object, model, decode)))
                scheme_removals = [p for p in by_scheme if p["op"] == "remove"]
                patches = [p for p in patches if p["op"] != "remove" or p not in scheme_removals]
        except Exception as err:
            return _from_error(err)
        if not keep_removes:
            patches = [p for p in patches if p["op"] != "remove"]
        return AdmissionResponse(True, 200, patches=patches)

    return handle


def validating_handler(
    validator: CustomValidator[T], model: type[T] | None = None, *, decode: Decode[T] | None = None
) -> Handler:
    """``decode`` checks and converts each object first (a ``DecodeError`` answers 400)."""

    async def handle(req: AdmissionRequest) -> AdmissionResponse:
        warnings: Warnings | None = None
        try:
            if req.operation == "CREATE":
                warnings = await validator.validate_create(_decode(req.object, model, decode))
            elif req.operation == "UPDATE":
                new = _decode(req.object, model, decode)  # the new object first, as Go decodes
                old = _decode(req.old_object, model, decode)
                warnings = await validator.validate_update(old, new)
            elif req.operation == "DELETE":
                warnings = await validator.validate_delete(_decode(req.old_object, model, decode))
            elif req.operation == "CONNECT":
                return allowed()
            else:
                return errored(400, f'unknown operation "{req.operation}"')
        except Exception as err:
            return _from_error(err)
        return allowed().with_warnings(*(warnings or []))

    return handle


def mutate_path(group: str, version: str, kind: str) -> str:
    """``/mutate-<group with dots as dashes>-<version>-<lowercase kind>`` (the builder's path)."""
    return f"/mutate-{group.replace('.', '-')}-{version}-{kind.lower()}"


def validate_path(group: str, version: str, kind: str) -> str:
    return f"/validate-{group.replace('.', '-')}-{version}-{kind.lower()}"
