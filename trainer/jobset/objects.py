"""References between a JobSet and the objects it owns."""

from __future__ import annotations

from manager.meta.object import Json as Object
from manager.meta.object import meta_of, name_of
from trainer.api import jobset_constants as c

__all__ = ["controller_of", "controller_uid", "jobset_controller_ref", "owner_reference"]


def owner_reference(js: Object) -> Object:
    """The controller reference upstream's SetControllerReference writes.

    Built here rather than with ``manager.controller_util.set_controller_reference`` because
    that helper refuses an owner without a uid, and upstream's unit fixtures have none.
    """
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "name": name_of(js),
        "uid": str(meta_of(js).get("uid") or ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def jobset_controller_ref(obj: Object) -> Object | None:
    """The object's controller reference when that controller is a JobSet (any other
    controller, or none: None)."""
    for ref in meta_of(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            if ref.get("apiVersion") == c.API_VERSION and ref.get("kind") == c.KIND:
                result: Object = ref
                return result
            return None
    return None


def controller_of(obj: Object) -> Object | None:
    """The object's controller reference, whatever its kind (``metav1.GetControllerOf``)."""
    for ref in meta_of(obj).get("ownerReferences") or ():
        if ref.get("controller"):
            result: Object = ref
            return result
    return None


def controller_uid(obj: Object) -> str | None:
    """The uid of the object's controller reference (None: no controller, or no uid)."""
    ref = controller_of(obj)
    return None if ref is None else str(ref.get("uid") or "") or None
