"""TrainJob reconciler (docs/behaviour/trainer.md §3): apply what the runtime builds, then mirror the JobSet's
status.

One request is one TrainJob. The reconcile method follows the numbered steps of §3.2, one
function each: get the TrainJob, remove ``Failed``, reconcile the objects (server-side apply
with field manager ``trainer``), set the Suspended condition, take the status from the runtime's
status plugin, and write the status only when it changed. A finished TrainJob (``Complete`` or
``Failed`` True) keeps its conditions and is never re-applied, so a JobSet deleted by hand or
by its TTL is not recreated (upstream v2.1.0 recreates it; docs/divergences.md). Reads go through the cache; the only
writes are the applies the runtime asks for and a status PUT when something changed, so a
running TrainJob whose JobSet is steady costs no API writes.

Watches: TrainJobs (every event also nudges the runtime reconcilers through the watchers,
which keep the ``resource-in-use`` finalizer right), owned objects (JobSet, MPI ConfigMap and
Secret, PodGroups) and the plugins' own mappers (LimitRanges, RuntimeClasses).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import orjson
import structlog

from manager import Builder, Manager
from manager.client.errors import Conflict, NotFound, RequestError
from manager.client.interfaces import Reader
from manager.client.objects import gvk_of
from manager.client.restmapper import NoKindMatch
from manager.controller.predicate import Funcs, Predicate
from manager.controller.reconcile import ReconcileError, Request, Result
from manager.events import Recorder
from manager.meta.conditions import find_condition, set_status_condition
from manager.meta.object import Json, json_copy
from manager.meta.times import now as now_rfc3339
from trainer import features
from trainer.api import trainer_constants as tc
from trainer.controllers.conditions import (
    remove_failed_condition,
    set_failed_unsupported,
    set_suspended_condition,
)
from trainer.controllers.lifecycle_metrics import TrainJobLifecycleMetrics, default_lifecycle_metrics
from trainer.controllers.state import derive_state
from trainer.controllers.status_writes import StatusWrites
from trainer.controllers.watches import AsyncMapHandler
from trainer.runtime.context import require_kinds
from trainer.runtime.errors import PluginFailure, RuntimeFailure
from trainer.runtime.levels import RuntimeLevel
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.objects import TRAINJOB_GVK
from trainer.runtime.plugins.base import Watch
from trainer.runtime.plugins.watches import by_controller_owner
from trainer.runtime.readers import no_kind_match_error
from trainer.runtime.registry import Runtime, runtime_key
from trainer.runtime.status import is_finished

log = structlog.get_logger("trainer.trainjob")

__all__ = [
    "CONTROLLER_NAME",
    "EVENT_MESSAGE_LIMIT",
    "FIELD_MANAGER",
    "RECORDER_NAME",
    "TrainJobReconciler",
    "TrainJobWatcher",
    "creation_failed_message",
    "notifying_predicate",
    "setup_trainjob_controller",
]

CONTROLLER_NAME = "trainjob_controller"
RECORDER_NAME = "trainer-trainjob-controller"
FIELD_MANAGER = tc.FieldManager
EVENT_MESSAGE_LIMIT = 950
RUNTIME_PLUGIN_FAILED_REASON = "RuntimePluginFailed"
"""Failed reason when a third-party runtime plugin raised (only such plugins can cause it)."""


class TrainJobWatcher(Protocol):
    """Told about every TrainJob event: ``(None, new)`` create, ``(old, new)`` update, ``(old, None)`` delete."""

    def notify_trainjob_update(self, old: Json | None, new: Json | None) -> None: ...


def notifying_predicate(watchers: Sequence[TrainJobWatcher]) -> Predicate:
    """Let every TrainJob event through, telling the watchers first (generic events tell nobody)."""

    def notify(old: Json | None, new: Json | None) -> bool:
        for watcher in watchers:
            watcher.notify_trainjob_update(old, new)
        return True

    return Funcs(
        on_create=lambda e: notify(None, e.object),
        on_update=lambda e: notify(e.object_old, e.object_new),
        on_delete=lambda e: notify(e.object, None),
        on_generic=lambda e: True,
    )


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def creation_failed_message(error: str) -> str:
    """The Warning event text: the error cut at 950 characters, marked with `` ...`` when cut."""
    if len(error) > EVENT_MESSAGE_LIMIT:
        error = error[:EVENT_MESSAGE_LIMIT] + " ..."
    return f"TrainJob resources reconciliation failed: {error}"


class TrainJobReconciler:
    """Upstream's ``TrainJobReconciler``; ``client`` reads from the cache and writes to the server."""

    def __init__(
        self,
        client: Any,
        runtimes: Mapping[str, Runtime],
        recorder: Recorder,
        *,
        now: Callable[[], str] = now_rfc3339,
        clock: Callable[[], datetime.datetime] = _utcnow,
        level: RuntimeLevel = V2_1,
    ) -> None:
        self.client = client
        self.runtimes = runtimes
        self.recorder = recorder
        self.now = now
        """The condition stamp (metav1.Time text)."""
        self.clock = clock
        """The precise time (the active deadline's countdown)."""
        self.level = level
        """The API level's reconcile steps (trainer/runtime/levels)."""
        self.last_applied: dict[tuple[str, str], dict[tuple[str, str, str, str], bytes]] = {}
        """Per TrainJob (namespace, name): each object's last apply document this process sent."""
        self.status_writes = StatusWrites()
        """Our status writes the cache has not seen yet (a pass from an older copy does nothing)."""

    async def reconcile(self, req: Request) -> Result | None:
        trainjob = await self.get_trainjob(req)
        if trainjob is None:
            self.last_applied.pop((req.namespace or "", req.name), None)
            self.status_writes.forget(req.namespace or "", req.name)
            return None
        if not self.level.reconciles(trainjob):
            log.debug(
                "Skipping TrainJob managed by a custom controller",
                managedBy=(trainjob.get("spec") or {}).get("managedBy", ""),
            )
            return None
        if self.status_writes.cache_is_behind(trainjob):
            # The cache holds this TrainJob as it was before our last status write, whose own
            # watch event reconciles it again from the newer state. A pass from the older state
            # would act on what is no longer true: its PUT a 409, and after a deadline failure
            # it would take the TrainJob for running, apply its JobSet again and delete it once
            # more (the new JobSet, still without status, then emptied jobsStatus).
            log.debug("cache older than our status write; waiting for it")
            return None
        original_status = json_copy(trainjob.get("status") or {})
        status: Json = json_copy(original_status)
        errors: list[str] = []

        finished = is_finished(status)
        # past its deadline the TrainJob fails in this pass (enforce, below): nothing is built for
        # it, not even a JobSet to delete at once (docs/divergences.md T-17)
        expiring = not finished and self.level.deadline.passed(trainjob, status, self.clock)
        previous_failed = find_condition(status, tc.TrainJobFailed)
        if not finished:
            remove_failed_condition(status)
        trainjob["status"] = status
        runtime = self.lookup_runtime(trainjob)
        applied: list[Json] = []
        if runtime is None:
            errors.append(self.mark_unsupported_runtime(trainjob, status, previous_failed))
        elif (
            not (finished or expiring)
            and (err := await self.reconcile_objects(runtime, trainjob, applied)) is not None
        ):
            errors.append(err)
        set_suspended_condition(trainjob, status, self.now)
        if runtime is not None:
            before = status
            status, err = await self.trainjob_status(runtime, trainjob, status, applied, expiring=expiring)
            status = self.level.deadline.keep(before, status)
            if err is not None:
                errors.append(err)
        trainjob["status"] = status
        requeue_after = await self.level.deadline.enforce(
            self.client, trainjob, original_status, status, self.clock, self.now
        )
        # a TrainJob failed by its deadline keeps no JobSet: a failed delete is retried (T-19)
        if (
            err := await self.level.deadline.remove_jobset(self.client, trainjob, original_status, status)
        ) is not None:
            errors.append(err)
        set_state(trainjob, status)
        if (err := await self.update_status_if_changed(trainjob, original_status, status)) is not None:
            errors.append(err)

        if errors:
            raise ReconcileError("\n".join(errors))
        return Result(requeue_after=requeue_after) if requeue_after else None

    # -- steps, in order ----------------------------------------------------------------------

    async def get_trainjob(self, req: Request) -> Json | None:
        """Step 1: the TrainJob from the cache (a private copy); gone means nothing to do."""
        try:
            obj: Json = await self.client.get(TRAINJOB_GVK, req.name, req.namespace)
        except NotFound:
            return None
        obj.setdefault("apiVersion", tc.API_VERSION)
        obj.setdefault("kind", tc.TrainJobKind)
        return obj

    def lookup_runtime(self, trainjob: Json) -> Runtime | None:
        """Step 4: the runtime by the runtimeRef's GroupKind (``ClusterTrainingRuntime.trainer.kubeflow.org``)."""
        return self.runtimes.get(_runtime_key_of(trainjob))

    def mark_unsupported_runtime(self, trainjob: Json, status: Json, previous: Json | None = None) -> str:
        """Step 4, unknown runtime: ``Failed=True/TrainingRuntimeNotSupported``; the error is returned.

        Upstream then panics on the nil runtime and never writes this condition; we persist it
        (docs/divergences.md).
        """
        message = f"unsupported runtime: {_runtime_key_of(trainjob)}"
        set_failed_unsupported(status, message, previous, self.now)
        return message

    async def reconcile_objects(
        self, runtime: Runtime, trainjob: Json, applied: list[Json] | None = None
    ) -> str | None:
        """Step 4: build the objects and server-side apply each, in order; stop at the first error.

        What the server stored for each apply is appended to ``applied``. A failure is reported
        as a Warning event ``TrainJobResourcesCreationFailed`` and returned.
        """
        try:
            meta = trainjob.get("metadata") or {}
            memo = self.last_applied.setdefault((meta.get("namespace") or "", meta.get("name") or ""), {})
            for obj in await runtime.new_objects(trainjob):
                if (cached := await self.unchanged(obj, memo)) is not None:
                    if applied is not None:
                        applied.append(cached)
                    continue
                stored = await self.client.apply(obj, field_owner=FIELD_MANAGER, force=True)
                if isinstance(obj, dict):
                    memo[_object_key(obj)] = _digest(obj)
                if applied is not None:
                    applied.append(stored if isinstance(stored, dict) else obj)
        except PluginFailure as failure:
            # A third-party plugin raised: this TrainJob fails with a condition naming it (so it
            # is not retried forever); the manager and every other TrainJob carry on.
            log.error("runtime plugin failed", plugin=failure.plugin, error=failure.message)
            set_status_condition(
                trainjob.setdefault("status", {}),
                tc.TrainJobFailed,
                {"status": "True", "reason": RUNTIME_PLUGIN_FAILED_REASON, "message": failure.message},
                self.now,
            )
            await self.recorder.event(
                trainjob,
                "Warning",
                tc.TrainJobResourcesCreationFailedReason,
                creation_failed_message(failure.message),
            )
            return None
        except (RuntimeFailure, RequestError, NoKindMatch) as err:
            text = str(err) if not isinstance(err, NoKindMatch) else str(no_kind_match_error(err.gvk))
            log.error("failed to reconcile TrainJob resources", error=text)
            await self.recorder.event(
                trainjob, "Warning", tc.TrainJobResourcesCreationFailedReason, creation_failed_message(text)
            )
            return text
        return None

    async def unchanged(self, obj: Any, memo: dict[tuple[str, str, str, str], bytes]) -> Json | None:
        """The cached object when applying ``obj`` again would change nothing, else None.

        Upstream applies every object on every reconcile: a no-op PATCH (and the JobSet
        webhooks' two calls) each time a JobSet's status moves. The apply is skipped only when
        ``obj`` is the document this process last applied for it (so a field we stopped setting
        is still removed by the next apply) and every field of it is in the cached object with
        the same value (so a change by another writer is still taken back). Anything else --
        first reconcile, restart, cache lag, a kind not cached -- applies as upstream does.
        """
        if not isinstance(obj, dict) or memo.get(_object_key(obj)) != _digest(obj):
            return None
        meta = obj.get("metadata") or {}
        try:
            cached: Json = await self.client.get(gvk_of(obj), meta.get("name", ""), meta.get("namespace"))
        except Exception:  # NotFound (cache lag), a kind not cached...: apply
            return None
        body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        return cached if _contained(body, cached) else None

    async def trainjob_status(
        self,
        runtime: Runtime,
        trainjob: Json,
        status: Json,
        applied: Sequence[Json] = (),
        *,
        expiring: bool = False,
    ) -> tuple[Json, str | None]:
        """Step 6: the status plugin's view (terminal conditions and jobsStatus from the JobSet).

        On error the in-memory status (steps 3-5) is kept and the error returned. An object
        this reconcile has just applied but the cache has not seen yet is expected cache lag,
        not an error: the status is kept, and the object's own watch event (it is owned by the
        TrainJob) brings the TrainJob back with the object in the cache -- no error, no back-off
        (upstream returns the NotFound and is retried with back-off; docs/divergences.md).
        Nor is a JobSet that is not there for a TrainJob ``expiring`` in this pass (never built,
        or deleted by a pass whose status write failed): it fails on its deadline now.
        """
        try:
            computed = await runtime.trainjob_status(trainjob)
        except (RuntimeFailure, RequestError) as err:
            missing = err if isinstance(err, NotFound) else err.__cause__
            if isinstance(missing, NotFound) and _just_applied(missing, applied):
                log.debug("applied object not in the cache yet; waiting for its watch event")
                return status, None
            if isinstance(missing, NotFound) and expiring:
                return status, None
            return status, str(err)
        return (computed if computed is not None else status), None

    async def update_status_if_changed(self, trainjob: Json, original: Json, status: Json) -> str | None:
        """Step 7: write the status only when it changed, the level's way (v2.1: a
        resourceVersion-checked PUT of the status subresource; v2.3: a merge patch)."""
        if status == original:
            return None
        try:
            stored = await self.level.status_write.write(
                self.client, trainjob, original, status, FIELD_MANAGER
            )
            self.status_writes.wrote(stored)
        except Conflict:
            # the cache holds an older TrainJob (typically without our previous status write):
            # the newer version's watch event reconciles again from it -- cache lag, no error
            log.debug("status conflict on TrainJob: waiting for its newer version")
            return None
        except RequestError as err:
            return str(err)
        return None


def _object_key(obj: Json) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return (
        str(obj.get("apiVersion")),
        str(obj.get("kind")),
        meta.get("namespace") or "",
        meta.get("name") or "",
    )


def _digest(obj: Json) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def _contained(want: Any, have: Any) -> bool:
    """Every field of ``want`` is in ``have`` with the same value (lists item by item: the
    server may default fields inside items, never add or drop items we set)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(k in have and _contained(v, have[k]) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and all(map(_contained, want, have))
    return bool(want == have and type(want) is type(have))


def _just_applied(err: NotFound, applied: Sequence[Json]) -> bool:
    """Whether the NotFound names an object of ``applied`` (by resource and name)."""
    details = err.status.get("details") or {}
    name = details.get("name")
    kind = str(details.get("kind") or "").lower()  # ``JobSet`` (cache) or ``jobsets`` (server)
    for obj in applied:
        meta = obj.get("metadata") or {}
        if name is not None and meta.get("name") != name:
            continue
        if kind and not kind.startswith(str(obj.get("kind", "")).lower()):
            continue
        return True
    return False


def set_state(trainjob: Json, status: Json) -> None:
    """With the TrainJobState gate, ``status.state`` is the derived state (trainer/controllers/state.py).

    With the gate off the field is never written (and a value left from a time the gate was on is
    removed, so it cannot go stale): the status is Trainer v2.1.0's.
    """
    if features.enabled(features.TrainJobState):
        status["state"] = derive_state({**trainjob, "status": status})
    else:
        status.pop("state", None)


def _runtime_key_of(trainjob: Json) -> str:
    ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
    return runtime_key(ref.get("apiGroup"), ref.get("kind"))


def _unique_by_kind(watches: Iterable[Watch]) -> list[Watch]:
    seen: set[Any] = set()
    out = []
    for watch in watches:
        if watch.kind not in seen:
            seen.add(watch.kind)
            out.append(watch)
    return out


async def setup_trainjob_controller(
    mgr: Manager,
    runtimes: Mapping[str, Runtime],
    reader: Reader,
    watchers: Sequence[TrainJobWatcher],
    recorder: Recorder,
    lifecycle: TrainJobLifecycleMetrics | None = None,
    level: RuntimeLevel = V2_1,
) -> TrainJobReconciler:
    """Register the controller: TrainJobs, owned objects and every runtime's extra watches.

    A watch whose CRD is missing is skipped with the plugin's message (the JobSet watch is
    registered anyway, as upstream does). The TrainJob watch also feeds the lifecycle metrics
    (``lifecycle``, the manager registry's by default).
    """
    reconciler = TrainJobReconciler(mgr.client, runtimes, recorder, level=level)
    lifecycle = lifecycle or default_lifecycle_metrics()
    predicates = [notifying_predicate(watchers), lifecycle.predicate()]
    builder = Builder(mgr).named(CONTROLLER_NAME).for_(TRAINJOB_GVK, predicates=predicates)
    registrars = [watch for runtime in runtimes.values() for watch in runtime.event_handler_registrars()]
    for watch in _unique_by_kind(registrars):
        if watch.requires_crd is not None and not await require_kinds(mgr.mapper, watch.requires_crd):
            log.error(watch.missing_crd_message or f"{watch.requires_crd.kind} CRD is not installed")
            if not watch.register_anyway:
                continue
        if watch.map_to_trainjobs is by_controller_owner:
            builder.owns(watch.kind)
        else:
            handler = AsyncMapHandler(
                reader, watch.map_to_trainjobs, watch.events, map_old_on_update=watch.map_old_on_update
            )
            builder.watches(watch.kind, handler)
    builder.complete(reconciler)
    return reconciler
