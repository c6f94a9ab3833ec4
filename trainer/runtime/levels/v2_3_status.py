"""Level v2.3's status write (Trainer v2.3.0: ``r.client.Status().Patch(ctx, &trainJob,
client.MergeFrom(prevTrainJob))``; docs/behaviour/trainer.md §12.3).

A JSON merge patch (RFC 7386) of the ``status`` subresource from the TrainJob as the reconcile
read it to the TrainJob with its new status, both as Go encodes them: only what changed is
sent (a list such as ``conditions`` whole, a removed field as ``null``), and no
resourceVersion, so a patch computed from an older cache is not refused (v2.1.0's PUT answers
409 Conflict then). v2.3.0's status is ``omitzero``: an emptied status is sent as
``status: null`` (the CRD's ``minProperties: 1`` refuses ``{}``).
"""

from __future__ import annotations

from typing import Any

from manager.client.patch import Patch, merge_diff
from manager.meta.object import Json, json_copy
from trainer.api import gocodec

__all__ = ["MERGE_PATCH_STATUS", "MergePatchStatus"]


class MergePatchStatus:
    """``StatusWrite`` of v2.3."""

    _codec = gocodec.codec_for("trainer.kubeflow.org/v1alpha1", "TrainJob")
    """Go's encoding of the status (its shape is v2.1.0's; v2.3.0's ``trainerStatus`` rides along)."""

    def patch(self, original: Json, status: Json) -> Json:
        """The merge patch document turning ``original`` into ``status``."""
        return merge_diff(self._encode(original), self._encode(status))

    def _encode(self, status: Json) -> Json:
        encoded = self._codec.encode({"status": json_copy(status)})
        if not encoded["status"]:
            del encoded["status"]  # omitzero
        return encoded

    async def write(self, client: Any, trainjob: Json, original: Json, status: Json, field_owner: str) -> Any:
        trainjob["status"] = status
        return await client.status.patch(
            trainjob, Patch.merge(self.patch(original, status)), field_owner=field_owner
        )


MERGE_PATCH_STATUS = MergePatchStatus()
