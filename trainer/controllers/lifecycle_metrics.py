"""TrainJob lifecycle metrics (beyond v2.1; upstream requests kubeflow/trainer#3429, #3673), on the manager
registry.

Upstream v2.1-v2.3 and its KEPs name no such metrics, so the names are ours, with the
``trainer_`` prefix and Prometheus' suffix rules:

* ``trainer_trainjobs_created_total{namespace,runtime_kind,runtime}``
* ``trainer_trainjobs_started_total{namespace,runtime_kind,runtime}`` -- first seen ``Running``
  (or ``Complete`` without a ``Running`` observed in between), see ``trainer.controllers.state``
* ``trainer_trainjobs_completed_total{namespace,runtime_kind,runtime}``
* ``trainer_trainjobs_failed_total{namespace,runtime_kind,runtime,reason}``
* ``trainer_trainjob_time_to_start_seconds{namespace,runtime_kind,runtime}`` -- creation until the
  TrainJob is observed started (queueing and suspension included)
* ``trainer_trainjob_run_time_seconds{namespace,runtime_kind,runtime,result}`` -- observed start
  until the terminal condition's ``lastTransitionTime``; ``result`` is Complete or Failed

How each transition is counted exactly once: the numbers come from the TrainJob *events* the
TrainJob controller's watch delivers (old and new object), never from reconcile calls, so a
reconcile retried a hundred times counts nothing. A transition counts when the derived state
moves into it and it was not counted for that TrainJob (by UID) before. After a manager restart
or a leader change the watch starts with the objects that already exist (``is_in_initial_list``):
those are the baseline, counted for nothing they already reached -- an old TrainJob's
completion is never counted twice -- and only what they do from then on counts. Objects that
appear later (created, or missed during a watch gap) count from creation. The watch runs only in
the leader, so replicas do not count the same TrainJob twice.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from manager.controller.predicate import Funcs, Predicate
from manager.meta import times
from manager.meta.conditions import find_condition
from manager.meta.object import Json
from manager.metrics.registry import REGISTRY
from trainer.api import trainer_constants as tc
from trainer.controllers.state import COMPLETE, FAILED, RUNNING, derive_state

__all__ = ["DURATION_BUCKETS", "TrainJobLifecycleMetrics", "default_lifecycle_metrics"]

#: From a CI smoke job (seconds) to multi-day fine-tunes.
DURATION_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400, 259200)

LABELS = ("namespace", "runtime_kind", "runtime")


@dataclass
class _Seen:
    counted: set[str] = field(default_factory=set)
    started_at: float | None = None


def _parse_time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = times.parse_time(value)
    except ValueError:
        return None
    return parsed.timestamp() if parsed is not None else None


def _labels(trainjob: Json) -> dict[str, str]:
    meta = trainjob.get("metadata") or {}
    ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
    return {
        "namespace": meta.get("namespace") or "",
        "runtime_kind": ref.get("kind") or tc.ClusterTrainingRuntimeKind,
        "runtime": ref.get("name") or "",
    }


def _key(trainjob: Json) -> str:
    meta = trainjob.get("metadata") or {}
    return meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"


class TrainJobLifecycleMetrics:
    """The counters and histograms, and the per-TrainJob memory of what was counted.

    A registry other than the manager's can be given so tests count in isolation; ``clock`` is
    wall-clock seconds (``time.time``).
    """

    def __init__(
        self, registry: CollectorRegistry = REGISTRY, clock: Callable[[], float] = time.time
    ) -> None:
        self.clock = clock
        self._seen: dict[str, _Seen] = {}
        self.created = Counter(
            "trainer_trainjobs_created_total", "Number of TrainJobs created.", LABELS, registry=registry
        )
        self.started = Counter(
            "trainer_trainjobs_started_total",
            "Number of TrainJobs that started running (their JobSet has ready or succeeded Jobs).",
            LABELS,
            registry=registry,
        )
        self.completed = Counter(
            "trainer_trainjobs_completed_total",
            "Number of TrainJobs that completed (Complete=True).",
            LABELS,
            registry=registry,
        )
        self.failed = Counter(
            "trainer_trainjobs_failed_total",
            "Number of TrainJobs that failed (Failed=True), by the Failed condition's reason.",
            [*LABELS, "reason"],
            registry=registry,
        )
        self.time_to_start = Histogram(
            "trainer_trainjob_time_to_start_seconds",
            "Time from TrainJob creation until it is observed running (queueing and suspension included).",
            LABELS,
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.run_time = Histogram(
            "trainer_trainjob_run_time_seconds",
            "Time from a TrainJob's observed start to its Complete or Failed condition.",
            [*LABELS, "result"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )

    # -- the watch's events ---------------------------------------------------------------------

    def predicate(self) -> Predicate:
        """A predicate for the TrainJob watch that lets every event through and records it."""

        def create(obj: Json, initial: bool) -> bool:
            self.observe_add(obj, initial)
            return True

        def update(old: Json, new: Json) -> bool:
            self.observe_update(old, new)
            return True

        def delete(obj: Json) -> bool:
            self.forget(obj)
            return True

        return Funcs(
            on_create=lambda e: create(e.object, e.is_in_initial_list),
            on_update=lambda e: update(e.object_old, e.object_new),
            on_delete=lambda e: delete(e.object),
            on_generic=lambda e: True,
        )

    def observe_add(self, trainjob: Json, is_in_initial_list: bool) -> None:
        key = _key(trainjob)
        if key in self._seen:
            self.observe_update(trainjob, trainjob)
            return
        if is_in_initial_list:
            self._baseline(trainjob)
            return
        self._seen[key] = _Seen({"created"})
        self.created.labels(**_labels(trainjob)).inc()
        self._advance(trainjob)

    def observe_update(self, old: Json, new: Json) -> None:
        if _key(new) not in self._seen:  # an update before any add: what ``old`` shows is old news
            self._baseline(old)
        self._advance(new)

    def forget(self, trainjob: Json) -> None:
        self._seen.pop(_key(trainjob), None)

    def tracked(self) -> int:
        """How many TrainJobs are remembered (one small entry per TrainJob that exists)."""
        return len(self._seen)

    # -- counting -----------------------------------------------------------------------------

    def _baseline(self, trainjob: Json) -> None:
        """Existing before this watch began: everything it already reached counts as counted."""
        state = derive_state(trainjob)
        counted = {"created"}
        if state in (RUNNING, COMPLETE):
            counted.add("started")
        if state in (COMPLETE, FAILED):
            counted.add("finished")
        self._seen[_key(trainjob)] = _Seen(counted)

    def _advance(self, trainjob: Json) -> None:
        seen = self._seen[_key(trainjob)]
        state = derive_state(trainjob)
        labels = _labels(trainjob)
        now = self.clock()
        if state in (RUNNING, COMPLETE) and "started" not in seen.counted:
            seen.counted.add("started")
            seen.started_at = now
            self.started.labels(**labels).inc()
            created = _parse_time((trainjob.get("metadata") or {}).get("creationTimestamp"))
            if created is not None:
                self.time_to_start.labels(**labels).observe(max(0.0, now - created))
        if state in (COMPLETE, FAILED) and "finished" not in seen.counted:
            seen.counted.add("finished")
            condition = (
                find_condition(
                    trainjob.get("status"), tc.TrainJobComplete if state == COMPLETE else tc.TrainJobFailed
                )
                or {}
            )
            if state == COMPLETE:
                self.completed.labels(**labels).inc()
            else:
                self.failed.labels(**labels, reason=condition.get("reason") or "Unknown").inc()
            if seen.started_at is not None:
                ended = _parse_time(condition.get("lastTransitionTime")) or now
                self.run_time.labels(**labels, result=state).observe(max(0.0, ended - seen.started_at))


# Cached: the manager's registry refuses a second registration of the same names.
@functools.cache
def default_lifecycle_metrics() -> TrainJobLifecycleMetrics:
    """The metrics on the manager's registry, registered once per process."""
    return TrainJobLifecycleMetrics()
