"""The TrainJob defaulting webhook of level v2.3 (Trainer v2.3.0 ``TrainJobDefaulter``;
docs/behaviour/trainer.md §12.4): ``spec.runtimePatches[].time`` says when each manager last
wrote its patch.

* CREATE: every entry without a ``time`` gets now; a ``time`` the creator wrote is kept.
* UPDATE: an entry of a manager the old TrainJob had keeps the old entry's ``time`` (whatever
  the request says) when it is otherwise unchanged, and gets now when it changed; an entry of a
  new manager gets now unless it has a ``time``.
* Now is the webhook's clock as ``metav1.Time`` writes it: UTC, whole seconds
  (``2026-01-02T03:04:05Z``). "Unchanged" is apimachinery's ``equality.Semantic.DeepEqual`` of
  the two entries with their ``time`` cleared: an empty list or map equals an absent one.

Served at ``/mutate-trainer-kubeflow-org-v1alpha1-trainjob`` (webhook
``defaulter.trainjob.trainer.kubeflow.org`` of the MutatingWebhookConfiguration
``defaulter.trainer.kubeflow.org``) by the levels whose ``trainjob_defaulter`` names that
configuration (``RuntimeLevel.trainjob_defaulter``; v2.1 has none). As
controller-runtime's defaulter does, the answer has no patch when nothing changed; otherwise the
patch is to the object as Go re-encodes it: the ``time`` values written in the form above and
quantities canonical (``1024Mi`` as ``1Gi``). The request is decoded as into v2.3.0's typed
``TrainJob`` (``trainjob_codec``, the trainer v2.3.0 binary's Go types): an object it does not
decode, e.g. ``numProcPerNode: auto`` (an ``*int32`` at v2.3) or a string
``status.trainerStatus.progressPercentage``, is answered 400 with encoding/json's text. The old
object of an update is read as ``Default`` reads it, with ``json.Unmarshal``: what does not
decode is answered 403 with encoding/json's text (``Default``'s error), another kind decodes.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Callable, Mapping
from typing import Any

from manager.meta.object import Json, json_copy
from manager.meta.times import format_time
from manager.webhook import (
    AdmissionRequest,
    AdmissionResponse,
    DecodeError,
    Denied,
    Handler,
    allowed,
    denied,
    errored,
    jsonpatch,
    mutate_path,
)
from trainer.api import gocodec
from trainer.api import trainer_constants as tc

__all__ = ["PATH", "WEBHOOK", "default_runtime_patches", "handler", "trainjob_codec"]

PATH = mutate_path(tc.GROUP, tc.VERSION, tc.TrainJobKind)
WEBHOOK = "defaulter.trainjob.trainer.kubeflow.org"
"""The webhook's name in its configuration (config/overlays/v2.3/webhook/defaulter.yaml)."""

Clock = Callable[[], datetime.datetime]


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@functools.cache
def _runtime_patch_type() -> gocodec.GoType:
    """v2.3.0's ``RuntimePatch``, the element of ``spec.runtimePatches``."""
    patches = gocodec.field_type(
        f"{tc.GROUP}/{tc.VERSION}", tc.TrainJobKind, "spec.runtimePatches", gocodec.TRAINER_V2_3_TYPES_FILE
    )
    assert patches.elem is not None
    return patches.elem


def _without_time(patch: Mapping[str, Any]) -> Any:
    """The entry with its ``time`` cleared, as ``equality.Semantic.DeepEqual`` compares it."""
    return gocodec.semantic_form({k: v for k, v in patch.items() if k != "time"}, _runtime_patch_type())


def _instant(text: Any) -> datetime.datetime | None:
    return gocodec.parse_time(text) if isinstance(text, str) else None


def default_runtime_patches(new: Json, old: Json | None, now: datetime.datetime) -> bool:
    """Stamp ``new``'s ``spec.runtimePatches`` in place (``old``: the TrainJob before an update);
    True when a ``time`` changed, and then every ``time`` is written as Go writes it."""
    patches = [p for p in ((new.get("spec") or {}).get("runtimePatches") or ()) if isinstance(p, dict)]
    stamp = format_time(now)
    changed = False

    def set_time(patch: Json, value: Any) -> None:
        nonlocal changed
        if _instant(value) != _instant(patch.get("time")):
            changed = True
        if value is None:
            patch.pop("time", None)
        else:
            patch["time"] = value

    if old is None:
        for patch in patches:
            if patch.get("time") is None:
                set_time(patch, stamp)
    else:
        old_by_manager = {
            p.get("manager", ""): p
            for p in ((old.get("spec") or {}).get("runtimePatches") or ())
            if isinstance(p, dict)
        }
        for patch in patches:
            previous = old_by_manager.get(patch.get("manager", ""))
            if previous is not None:
                unchanged = _without_time(previous) == _without_time(patch)
                set_time(patch, previous.get("time") if unchanged else stamp)
            elif patch.get("time") is None:
                set_time(patch, stamp)
    if changed:
        for patch in patches:
            if (instant := _instant(patch.get("time"))) is not None:
                patch["time"] = format_time(instant)
    return changed


@functools.cache
def trainjob_codec() -> gocodec.Codec:
    """Decoding and re-encoding of a TrainJob as v2.3.0's typed struct does them: the trainer
    v2.3.0 binary's own Go types (``openapi/go-types-trainer-v2.3.0.json``, with jobset v0.12.0
    and k8s.io/api v0.36.2), ``status.trainerStatus`` included."""
    return gocodec.codec_for(f"{tc.GROUP}/{tc.VERSION}", tc.TrainJobKind, gocodec.TRAINER_V2_3_TYPES_FILE)


def _decode(raw: Json | None) -> Json:
    """Go's 400 for an object v2.3.0's struct does not decode (e.g. ``numProcPerNode: auto``:
    ``json: cannot unmarshal string into Go struct field Trainer.spec.trainer.numProcPerNode of
    type int32``, before the CRD's 422); else a copy with nulls in lists and maps as Go's zero
    values."""
    codec = trainjob_codec()
    try:
        codec.check(raw)
    except gocodec.GoDecodeError as err:
        raise DecodeError(str(err)) from None
    assert raw is not None
    return codec.nulls_to_zero(json_copy(raw))


def _old(raw: Json | None) -> Json:
    """The old TrainJob of an update as ``Default`` reads it, with ``json.Unmarshal`` of the
    request's raw bytes (not controller-runtime's decoder): any other kind decodes, keys match
    case-insensitively, and what does not decode is ``Default``'s error, which controller-runtime
    answers 403 with its text (``admission.Denied``), ``unexpected end of JSON input`` for an
    absent object (found by admission fuzzing at v2.3, against the Go original)."""
    try:
        return trainjob_codec().unmarshal(raw)
    except gocodec.GoDecodeError as err:
        raise Denied(str(err)) from None


def handler(clock: Clock = _utcnow) -> Handler:
    """The admission handler: DELETE allowed untouched, the object's decode errors answered
    400, the old object's 403."""

    async def handle(req: AdmissionRequest) -> AdmissionResponse:
        if req.operation == "DELETE":
            return allowed()
        try:
            result = _decode(req.object)  # Go's 400 for an ill-typed object
            old = _old(req.old_object) if req.operation == "UPDATE" else None
        except DecodeError as err:
            return errored(400, err)
        except Denied as err:
            return denied(err.message)
        if not default_runtime_patches(result, old, clock()):
            return allowed()
        # the patch to the whole object as json.Marshal writes the defaulted struct: quantities
        # canonical, times in seconds; the encoding removes nothing, so no removal is dropped
        encoded = trainjob_codec().encode(result)
        return AdmissionResponse(True, 200, patches=jsonpatch.diff(req.object, encoded))

    return handle
