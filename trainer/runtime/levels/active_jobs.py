"""The rule both levels share for changing a TrainJob's customisation of its runtime: not while
its JobSet still has active jobs (v2.1's ``podTemplateOverrides``, v2.3's ``runtimePatches``)."""

from __future__ import annotations

from manager.client.errors import NotFound, RequestError
from manager.client.interfaces import Reader
from manager.meta.field import FieldError
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.runtime.objects import JOBSET_GVK, name_of, namespace_of

__all__ = ["refuse_while_jobs_are_active"]


async def refuse_while_jobs_are_active(
    reader: Reader, trainjob: TrainJob, path: str, field: str
) -> list[FieldError]:
    """One ``Forbidden`` on ``path`` per replicated job of the TrainJob's JobSet that still has
    active jobs (``<field> cannot be modified when the JobSet's ReplicatedJob <name> is still
    active``); none without a JobSet, an ``Internal`` when it cannot be read."""
    try:
        jobset = await reader.get(JOBSET_GVK, name_of(trainjob), namespace_of(trainjob))
    except NotFound:
        return []
    except RequestError as err:
        return [FieldError.internal(path, err)]
    return [
        FieldError.forbidden(
            path,
            f"{field} cannot be modified when the JobSet's ReplicatedJob {status.get('name', '')} is still active",
        )
        for status in (jobset.get("status") or {}).get("replicatedJobsStatus") or ()
        if (status.get("active") or 0) > 0
    ]
