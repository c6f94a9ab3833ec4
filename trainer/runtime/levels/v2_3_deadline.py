"""Level v2.3's ``spec.activeDeadlineSeconds`` (Trainer v2.3.0 ``reconcileDeadline`` and
``setTrainJobStatus``; docs/behaviour/trainer.md §12.2).

The clock starts at the TrainJob's ``creationTimestamp`` or, once it has been resumed, at the
``lastTransitionTime`` of its ``Suspended=False`` condition (the last resume); it does not run
while ``spec.suspend`` is true. Once ``activeDeadlineSeconds`` have passed the TrainJob gets
``Failed=True``, reason ``DeadlineExceeded``, message ``TrainJob exceeded its active deadline``,
and its JobSet (same name) is deleted. Until then the reconcile asks to be requeued at the
deadline: nothing polls.

That Failed condition survives every later reconcile: the runtime's status plugin may set its
own Failed from the JobSet, and the deadline's is put back over it.

A pass that starts past the deadline builds nothing (``passed``): upstream applies the objects
first and checks the deadline after, so such a pass creates the JobSet only to delete it, and
when its status write then fails, the retry does both again (a second JobSet, found by the chaos
suite; docs/divergences.md T-17).

A TrainJob failed by its deadline keeps no JobSet it controls (``remove_jobset``): the pass that
fails it deletes the JobSet as upstream does, but a failed delete is the reconcile's error (so it
is retried) rather than only logged, and every later pass of that finished TrainJob deletes a
JobSet it controls that the cache still holds (a retry, or a JobSet whose create landed after the
failure). The cache answers whether there is one: a finished TrainJob costs no round trip
(docs/divergences.md T-19).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import structlog

from manager.client.errors import NotFound, RequestError
from manager.meta.conditions import find_condition, set_status_condition
from manager.meta.object import Json, controller_uid
from manager.meta.times import parse_time
from trainer.api import trainer_constants as tc
from trainer.api.v2_3 import trainer_constants as c23
from trainer.runtime.objects import JOBSET_GVK
from trainer.runtime.status import is_finished

__all__ = ["ACTIVE_DEADLINE", "ActiveDeadline", "deadline_condition", "start_time"]

log = structlog.get_logger("trainer.trainjob")

MIN_REQUEUE_SECONDS = 1.0
"""Upstream requeues after one second when the deadline is due but not yet past."""


def deadline_condition(status: Json) -> Json | None:
    """The Failed condition set by the deadline, if the status has it."""
    failed = find_condition(status, tc.TrainJobFailed)
    if failed is not None and failed.get("reason") == c23.TrainJobDeadlineExceededReason:
        return failed
    return None


def start_time(
    trainjob: Json, original: Json, status: Json, clock: Callable[[], datetime.datetime]
) -> datetime.datetime | None:
    """When the deadline's clock started: the last resume, else the creation (None: unknown).

    Upstream reads the resume time from the in-memory condition: when this very reconcile
    resumed the TrainJob that is the precise time of now, not the whole second written.
    """
    started = parse_time((trainjob.get("metadata") or {}).get("creationTimestamp"))
    suspended = find_condition(status, tc.TrainJobSuspended)
    if suspended is not None and suspended.get("status") == "False":
        before = find_condition(original, tc.TrainJobSuspended)
        if before is not None and before.get("status") == "False":
            started = parse_time(suspended.get("lastTransitionTime"))
        else:
            started = clock()
    return started


class ActiveDeadline:
    """``TrainJobDeadline`` of v2.3."""

    def keep(self, before: Json, computed: Json) -> Json:
        """The deadline's Failed condition is set again over the status plugin's."""
        kept = deadline_condition(before)
        if kept is not None and computed is not before:
            set_status_condition(computed, tc.TrainJobFailed, kept)
        return computed

    def passed(self, trainjob: Json, status: Json, clock: Callable[[], datetime.datetime]) -> bool:
        """Whether a pass that read ``status`` starts past the deadline. A TrainJob this pass
        resumes (``Suspended`` still true, ``spec.suspend`` no longer) restarts its clock now."""
        spec = trainjob.get("spec") or {}
        seconds = spec.get("activeDeadlineSeconds") or 0
        if not seconds or is_finished(status) or spec.get("suspend") is True:
            return False
        suspended = find_condition(status, tc.TrainJobSuspended)
        if suspended is not None and suspended.get("status") == "True":
            return False
        started = start_time(trainjob, status, status, clock)
        return started is not None and clock() > started + datetime.timedelta(seconds=seconds)

    async def enforce(
        self,
        client: Any,
        trainjob: Json,
        original: Json,
        status: Json,
        clock: Callable[[], datetime.datetime],
        now: Callable[[], str],
    ) -> float | None:
        spec = trainjob.get("spec") or {}
        seconds = spec.get("activeDeadlineSeconds") or 0
        if not seconds or is_finished(status) or spec.get("suspend") is True:
            return None
        started = start_time(trainjob, original, status, clock)
        if started is None:
            return None
        deadline = started + datetime.timedelta(seconds=seconds)
        current = clock()
        if current > deadline:
            log.debug(
                "TrainJob deadline exceeded, marking as failed",
                activeDeadlineSeconds=seconds,
                startTime=str(started),
                deadline=str(deadline),
            )
            set_status_condition(
                status,
                tc.TrainJobFailed,
                {
                    "status": "True",
                    "reason": c23.TrainJobDeadlineExceededReason,
                    "message": c23.TrainJobDeadlineExceededMessage,
                },
                now,
            )
            return None
        requeue_after = (deadline - current).total_seconds()
        if requeue_after <= 0:
            requeue_after = MIN_REQUEUE_SECONDS
        log.debug("Scheduling deadline check", activeDeadlineSeconds=seconds, requeueAfter=requeue_after)
        return requeue_after

    async def remove_jobset(self, client: Any, trainjob: Json, original: Json, status: Json) -> str | None:
        """Delete the JobSet of a TrainJob failed by its deadline; the error text when it fails.

        The pass that fails the TrainJob deletes it by name whatever the cache holds, as upstream
        (the JobSet this pass may have applied is not in the cache yet). A later pass deletes it
        only when the cache holds a JobSet this TrainJob controls that is not already going.
        """
        if deadline_condition(status) is None:
            return None
        if deadline_condition(original) is not None and not await _holds_jobset(client, trainjob):
            return None
        meta = trainjob.get("metadata") or {}
        jobset = {
            "apiVersion": JOBSET_GVK.api_version,
            "kind": JOBSET_GVK.kind,
            "metadata": {"name": meta.get("name", ""), "namespace": meta.get("namespace", "")},
        }
        try:
            await client.delete(jobset)
        except NotFound:
            return None
        except RequestError as err:
            log.debug("Failed to delete JobSet after deadline exceeded", error=str(err))
            return str(err)
        return None


async def _holds_jobset(client: Any, trainjob: Json) -> bool:
    """Whether the cache holds a JobSet of the TrainJob's name, controlled by it, not being deleted."""
    meta = trainjob.get("metadata") or {}
    try:
        jobset: Json = await client.get(JOBSET_GVK, meta.get("name", ""), meta.get("namespace", ""))
    except NotFound:
        return False
    owned = meta.get("uid") is not None and controller_uid(jobset) == meta.get("uid")
    return owned and not (jobset.get("metadata") or {}).get("deletionTimestamp")


ACTIVE_DEADLINE = ActiveDeadline()
