"""PodGroup status controller (scheduler-plugins v0.34.1-devel ``podgroup_controller.go``).

Gang scheduling itself happens in the scheduler; this controller only *reports* where a gang
stands (``status.phase`` and the running/succeeded/failed counters), which is what users and
the Trainer read. The reconcile follows docs/behaviour/scheduling.md §2.4 step by step; the pure functions
below are those steps, so they can be tested with literal objects.

Deliberate differences (docs/divergences.md, "Scheduling"): pods are listed in the PodGroup's
own namespace only, through a cache index keyed by the pod-group label (upstream lists every
namespace); a PodGroup without ``minMember`` and without pods goes to ``Scheduling`` instead
of crashing; ``occupiedBy`` comes from the first pod by name, not from map order; no status
write is sent when nothing changed.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from manager.client.errors import NotFound
from manager.client.patch import Patch, merge_diff
from manager.controller.reconcile import Request
from manager.scheme import GroupVersionKind, gvk_for
from trainer.api import scheduling_constants as c
from trainer.api.scheduling_v1alpha1 import PodGroup

log = structlog.get_logger("trainer.controllers.podgroup")

Object = dict[str, Any]

POD = GroupVersionKind("", "v1", "Pod")
PODGROUP = gvk_for(PodGroup)
CONTROLLER_NAME = "podgroup"
"""Upstream's name (the lower-cased ``For`` kind): it labels metrics and the work queue."""
EVENT_COMPONENT = "PodGroupController"

POD_GROUP_INDEX = f"metadata.labels[{c.PodGroupLabel}]"
"""Field index on pods: the value of the pod-group label. A reconcile reads its group's pods
with one index lookup in its own namespace instead of scanning every cached pod."""

TERMINAL_PHASES = frozenset({c.PodGroupFinished, c.PodGroupFailed})
SCHEDULE_WINDOW = datetime.timedelta(hours=48)
# Go's zero time: what an absent timestamp reads as in the upstream arithmetic.
_ZERO_TIME = datetime.datetime(1, 1, 1, tzinfo=datetime.UTC)
_COUNTERS = ("running", "succeeded", "failed")


# -- pod -> PodGroup ---------------------------------------------------------------------------


def pod_group_name(pod: Mapping[str, Any]) -> str:
    """The PodGroup a pod belongs to (the label value); ``""`` means no group."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    value = labels.get(c.PodGroupLabel)
    return value if isinstance(value, str) else ""


def index_pod_group(pod: Mapping[str, Any]) -> list[str]:
    """Index function for :data:`POD_GROUP_INDEX` (unlabelled pods are not indexed)."""
    name = pod_group_name(pod)
    return [name] if name else []


def map_pod_to_group(pod: Mapping[str, Any]) -> list[Request]:
    """scheduling.md §2.2: a labelled pod enqueues its PodGroup in the pod's namespace, existing or not.

    The handler calls this for both the old and the new pod of an update, so relabelling a pod
    from ``a`` to ``b`` reconciles both groups.
    """
    name = pod_group_name(pod)
    if not name:
        return []
    return [Request((pod.get("metadata") or {}).get("namespace") or "", name)]


# -- status computation (pure) -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PhaseCounts:
    running: int = 0
    succeeded: int = 0
    failed: int = 0


def count_phases(pods: Iterable[Mapping[str, Any]]) -> PhaseCounts:
    """scheduling.md §2.4 P3 (1): pods per terminal/running phase; Pending, Unknown, empty count none."""
    running = succeeded = failed = 0
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Running":
            running += 1
        elif phase == "Succeeded":
            succeeded += 1
        elif phase == "Failed":
            failed += 1
    return PhaseCounts(running, succeeded, failed)


def occupied_by(pod: Mapping[str, Any], previous: str) -> str:
    """scheduling.md §2.5: ``<pod namespace>/<owner name>`` for each owner, sorted, comma-joined.

    A pod without owners keeps the previous value (upstream leaves the field untouched).
    """
    meta = pod.get("metadata") or {}
    refs = meta.get("ownerReferences") or []
    if not refs:
        return previous
    namespace = meta.get("namespace") or ""
    return ",".join(sorted(f"{namespace}/{ref.get('name', '')}" for ref in refs))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def managed_status(status: Mapping[str, Any] | None) -> Object:
    """The fields this controller writes, as Go would serialise them (zero values omitted).

    Absent, ``null``, ``0`` and ``""`` all mean "zero" (``omitempty``), so comparing two of
    these dicts is comparing what Go would send.
    """
    status = status or {}
    out: Object = {}
    for key in ("phase", "occupiedBy"):
        value = status.get(key)
        if isinstance(value, str) and value:
            out[key] = value
    for key in _COUNTERS:
        number = _int(status.get(key))
        if number:
            out[key] = number
    return out


def min_member(pg: Mapping[str, Any]) -> int:
    """``spec.minMember``, 0 when absent (the CRD's ``minimum: 1`` only checks a present value)."""
    return _int((pg.get("spec") or {}).get("minMember"))


def _parse_time(value: Any) -> datetime.datetime:
    if not isinstance(value, str) or not value:
        return _ZERO_TIME
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError:
        return _ZERO_TIME  # unparsable reads as absent rather than failing every reconcile
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def schedule_window_exceeded(pg: Mapping[str, Any]) -> bool:
    """scheduling.md §2.4 step 3, the 48-hour rule, on the *stored* status (stale counters included).

    Nothing in this version writes ``scheduleStartTime``; when it is absent Go subtracts a
    creation time from its zero time, a hugely negative duration, so the rule never fires.
    """
    status = pg.get("status") or {}
    if status.get("phase") not in (c.PodGroupScheduling, c.PodGroupPending):
        return False
    if _int(status.get("running")) != 0:
        return False
    started = _parse_time(status.get("scheduleStartTime"))
    created = _parse_time((pg.get("metadata") or {}).get("creationTimestamp"))
    return started - created > SCHEDULE_WINDOW


def _first_by_name(pods: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    def key(pod: Mapping[str, Any]) -> tuple[str, str]:
        meta = pod.get("metadata") or {}
        return (meta.get("namespace") or "", meta.get("name") or "")

    return min(pods, key=key)


def next_status(pg: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> Object:
    """scheduling.md §2.4 step 5: the managed status after one reconcile (one phase hop at most).

    ``pods`` are the group's pods in the PodGroup's namespace. Terminal phases and the 48-hour
    rule are decided before this is called.
    """
    current = managed_status(pg.get("status"))
    new = dict(current)
    phase = current.get("phase", "")
    minimum = min_member(pg)
    if phase == "":
        # P1: a new object only enters Pending; counters and occupiedBy stay untouched.
        new["phase"] = c.PodGroupPending
    elif phase == c.PodGroupPending:
        # P2: enough pods exist -> Scheduling, counters still not recomputed (scheduling.md Q2).
        if len(pods) >= minimum:
            new["phase"] = c.PodGroupScheduling
            if pods:  # upstream v0.34.1 indexes an empty list here and panics (scheduling.md Q5, fixed: S-2)
                owners = occupied_by(_first_by_name(pods), current.get("occupiedBy", ""))
                if owners:
                    new["occupiedBy"] = owners
    else:
        # P3: any other phase, including Unknown and strings of older versions.
        counts = count_phases(pods)
        for key in _COUNTERS:
            new.pop(key, None)
            if getattr(counts, key):
                new[key] = getattr(counts, key)
        new["phase"] = _p3_phase(len(pods), minimum, counts)
    return new


def _p3_phase(total: int, minimum: int, counts: PhaseCounts) -> str:
    """The P3 assignments in upstream's order; each later one overrides the earlier."""
    if total < minimum:
        return c.PodGroupPending
    active = counts.running + counts.succeeded
    phase = c.PodGroupScheduling if active < minimum else c.PodGroupRunning
    if counts.failed != 0 and counts.failed + active >= minimum:
        phase = c.PodGroupFailed
    if counts.succeeded >= minimum:
        phase = c.PodGroupFinished
    return phase


def status_patch(pg: Mapping[str, Any], new: Mapping[str, Any]) -> Object:
    """The JSON merge patch (``{"status": {...}}``) from the stored status to ``new``; ``{}``
    when nothing changes. Fields dropping to zero are sent as ``null``, as Go's diff does."""
    diff = merge_diff(managed_status(pg.get("status")), dict(new))
    return {"status": diff} if diff else {}


# -- the reconciler ----------------------------------------------------------------------------


class PodGroupReconciler:
    """Reads the PodGroup and its pods from the cache; writes only ``/status`` (merge patch).

    ``client`` reads from the informer cache and writes to the API server (the manager's
    client, or ``FakeClient`` in tests); pods must be indexed by :data:`POD_GROUP_INDEX`.
    ``recorder`` is an ``EventRecorder`` for component ``PodGroupController``.
    """

    def __init__(self, client: Any, recorder: Any) -> None:
        self.client = client
        self.recorder = recorder

    async def reconcile(self, req: Request) -> None:
        log.debug("reconciling", podgroup=str(req))
        try:
            pg: Object = await self.client.get(PODGROUP, req.name, req.namespace)
        except NotFound:
            return  # deleted: no finalizers, nothing to clean up
        phase = (pg.get("status") or {}).get("phase")
        if phase in TERMINAL_PHASES:
            return  # terminal phases are sticky (scheduling.md Q4)
        if schedule_window_exceeded(pg):
            await self.recorder.event(pg, "Warning", c.TimeoutReason, c.TimeoutMessage)
            return
        pods = await self.client.list(
            POD, namespace=req.namespace, field_selector={POD_GROUP_INDEX: req.name}
        )
        patch = status_patch(pg, next_status(pg, pods))
        if patch:
            # no resourceVersion precondition: last writer wins, as upstream's merge patch
            await self.client.status.patch(pg, Patch.merge(patch))
