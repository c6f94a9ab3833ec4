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
patch is to the object as Go re-encodes it, which for this kind means the ``time`` values
written in the form above.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from typing import Any

from manager.meta.object import Json, json_kind
from manager.meta.times import format_time
from manager.webhook import (
    AdmissionRequest,
    AdmissionResponse,
    DecodeError,
    Handler,
    allowed,
    errored,
    jsonpatch,
    mutate_path,
)
from manager.webhook.custom import json_copy
from trainer.api import gocodec
from trainer.api import trainer_constants as tc
from trainer.runtime.levels.v2_3_admission import semantic
from webhooks import typed

__all__ = ["PATH", "WEBHOOK", "default_runtime_patches", "handler"]

PATH = mutate_path(tc.GROUP, tc.VERSION, tc.TrainJobKind)
WEBHOOK = "defaulter.trainjob.trainer.kubeflow.org"
"""The webhook's name in its configuration (config/overlays/v2.3/webhook/defaulter.yaml)."""

Clock = Callable[[], datetime.datetime]


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _without_time(patch: Mapping[str, Any]) -> Any:
    return semantic({k: v for k, v in patch.items() if k != "time"})


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


def _check_runtime_patches(obj: Json | None) -> None:
    """What ``json.Unmarshal`` into v2.3.0's TrainJob would refuse in ``spec.runtimePatches``
    (the shared decoder is v2.1.0's struct, which has no such field): a 400 with Go's words."""
    spec = (obj or {}).get("spec")
    patches = spec.get("runtimePatches") if isinstance(spec, dict) else None
    if patches is None:
        return
    field = "Go struct field {struct}.spec.runtimePatches{path} of type {go}"
    if not isinstance(patches, list):
        raise DecodeError(
            f"json: cannot unmarshal {json_kind(patches)} into "
            + field.format(struct="TrainJobSpec", path="", go="[]v1alpha1.RuntimePatch")
        )
    for patch in patches:
        if patch is None:
            continue
        if not isinstance(patch, dict):
            raise DecodeError(
                f"json: cannot unmarshal {json_kind(patch)} into "
                + field.format(struct="TrainJobSpec", path="", go="v1alpha1.RuntimePatch")
            )
        manager = patch.get("manager")
        if manager is not None and not isinstance(manager, str):
            raise DecodeError(
                f"json: cannot unmarshal {json_kind(manager)} into "
                + field.format(struct="RuntimePatch", path=".manager", go="string")
            )
        stamp = patch.get("time")
        if stamp is None:
            continue
        if not isinstance(stamp, str):
            raise DecodeError(
                f"json: cannot unmarshal {json_kind(stamp)} into "
                + field.format(struct="RuntimePatch", path=".time", go="string")
            )
        try:
            gocodec.parse_time(stamp)
        except Exception as err:  # gocodec's abort carries Go's text
            raise DecodeError(str(getattr(err, "message", err))) from None


def handler(clock: Clock = _utcnow) -> Handler:
    """The admission handler: DELETE allowed untouched, decode errors answered 400."""
    decode = typed.decoder(f"{tc.GROUP}/{tc.VERSION}", tc.TrainJobKind)

    async def handle(req: AdmissionRequest) -> AdmissionResponse:
        if req.operation == "DELETE":
            return allowed()
        try:
            _check_runtime_patches(req.object)
            decode(req.object)  # Go's 400 for an ill-typed object
            old = None
            if req.operation == "UPDATE":
                _check_runtime_patches(req.old_object)
                old = decode(req.old_object)
        except DecodeError as err:
            return errored(400, err)
        result = json_copy(req.object or {})
        if not default_runtime_patches(result, old, clock()):
            return allowed()
        return AdmissionResponse(True, 200, patches=jsonpatch.diff(req.object, result))

    return handle
