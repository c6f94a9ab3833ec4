"""TrainJob state derivation and lifecycle metrics: each transition counted once."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from manager.controller.event import CreateEvent, DeleteEvent, UpdateEvent
from trainer.controllers.lifecycle_metrics import TrainJobLifecycleMetrics
from trainer.controllers.state import derive_state

Json = dict[str, Any]
CREATED = "2026-01-01T00:00:00Z"
T0 = 1767225600.0  # CREATED as a timestamp
LABELS = {"namespace": "team-a", "runtime_kind": "ClusterTrainingRuntime", "runtime": "torch-distributed"}


def tj(uid: str = "u1", **status: Any) -> Json:
    obj: Json = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "job", "namespace": "team-a", "uid": uid, "creationTimestamp": CREATED},
        "spec": {"runtimeRef": {"name": "torch-distributed", "kind": "ClusterTrainingRuntime"}},
    }
    if status:
        obj["status"] = status
    return obj


def cond(kind: str, status: str = "True", reason: str = "R", at: str = "2026-01-01T00:10:00Z") -> Json:
    return {"type": kind, "status": status, "reason": reason, "message": "m", "lastTransitionTime": at}


def jobs(ready: int = 0, succeeded: int = 0, active: int = 1) -> list[Json]:
    return [
        {
            "name": "node",
            "ready": ready,
            "succeeded": succeeded,
            "failed": 0,
            "active": active,
            "suspended": 0,
        }
    ]


def suspended(obj: Json) -> Json:
    out = copy.deepcopy(obj)
    out["spec"]["suspend"] = True
    return out


@pytest.mark.parametrize(
    ("obj", "state"),
    [
        (tj(), "Pending"),
        (tj(jobsStatus=jobs(active=1)), "Pending"),  # pods exist but wait for resources
        (tj(jobsStatus=jobs(ready=1)), "Running"),
        (tj(jobsStatus=jobs(succeeded=1, active=0)), "Running"),
        (suspended(tj()), "Suspended"),
        (tj(conditions=[cond("Suspended", "True", "Suspended")]), "Suspended"),
        # the bug of upstream's column: a resumed running TrainJob is Running, not Suspended
        (tj(conditions=[cond("Suspended", "False", "Resumed")], jobsStatus=jobs(ready=1)), "Running"),
        (tj(conditions=[cond("Suspended", "False", "Resumed")]), "Pending"),
        (tj(conditions=[cond("Suspended", "False", "Resumed"), cond("Complete")]), "Complete"),
        (tj(conditions=[cond("Complete"), cond("Suspended", "True", "Suspended")]), "Complete"),
        (suspended(tj(conditions=[cond("Failed", reason="FailedJobs")])), "Failed"),
        (tj(conditions=[cond("Failed", "False")], jobsStatus=jobs(ready=1)), "Running"),
    ],
)
def test_state_is_derived_from_what_the_conditions_say(obj: Json, state: str) -> None:
    assert derive_state(obj) == state


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def setup() -> tuple[TrainJobLifecycleMetrics, CollectorRegistry, Clock]:
    registry = CollectorRegistry()
    clock = Clock()
    return TrainJobLifecycleMetrics(registry, clock), registry, clock


def value(registry: CollectorRegistry, name: str, **extra: str) -> float:
    return registry.get_sample_value(name, {**LABELS, **extra}) or 0.0


def totals(registry: CollectorRegistry) -> dict[str, float]:
    return {
        "created": value(registry, "trainer_trainjobs_created_total"),
        "started": value(registry, "trainer_trainjobs_started_total"),
        "completed": value(registry, "trainer_trainjobs_completed_total"),
        "failed": value(registry, "trainer_trainjobs_failed_total", reason="FailedJobs"),
    }


def test_a_run_counts_each_transition_once_whatever_the_event_repeats() -> None:
    metrics, registry, clock = setup()
    predicate = metrics.predicate()
    pending = tj()
    running = tj(jobsStatus=jobs(ready=1))
    done = tj(
        conditions=[cond("Complete", at="2026-01-01T00:10:00Z")], jobsStatus=jobs(succeeded=1, active=0)
    )
    assert predicate.create(CreateEvent(pending, False))
    clock.now = T0 + 30
    for _ in range(3):  # resyncs and status writes deliver the same transition again
        assert predicate.update(UpdateEvent(pending, running))
        assert predicate.update(UpdateEvent(running, running))
    clock.now = T0 + 700
    for _ in range(3):
        predicate.update(UpdateEvent(running, done))
        predicate.update(UpdateEvent(done, done))
    assert totals(registry) == {"created": 1, "started": 1, "completed": 1, "failed": 0}
    assert value(registry, "trainer_trainjob_time_to_start_seconds_count") == 1
    assert value(registry, "trainer_trainjob_time_to_start_seconds_sum") == 30
    # run time: observed start (T0+30) to the Complete condition's lastTransitionTime (T0+600)
    assert value(registry, "trainer_trainjob_run_time_seconds_sum", result="Complete") == 570
    assert predicate.delete(DeleteEvent(done))
    assert metrics.tracked() == 0


def test_after_a_restart_old_trainjobs_count_only_what_they_do_next() -> None:
    # A new process (or leader) gets every existing TrainJob as an add of the initial list.
    metrics, registry, _ = setup()
    finished = tj("old-done", conditions=[cond("Complete")])
    failed = tj("old-failed", conditions=[cond("Failed", reason="FailedJobs")])
    running = tj("old-running", jobsStatus=jobs(ready=1))
    pending = tj("old-pending")
    for obj in (finished, failed, running, pending):
        metrics.observe_add(obj, is_in_initial_list=True)
    assert totals(registry) == {"created": 0, "started": 0, "completed": 0, "failed": 0}
    # the finished ones are seen again and again: never counted
    metrics.observe_update(finished, finished)
    metrics.observe_update(failed, failed)
    # the running one completes, the pending one starts: those transitions are new
    metrics.observe_update(running, tj("old-running", conditions=[cond("Complete")]))
    metrics.observe_update(pending, tj("old-pending", jobsStatus=jobs(ready=1)))
    assert totals(registry) == {"created": 0, "started": 1, "completed": 1, "failed": 0}
    # the old running one's start was not seen by this process: no run time made up for it
    assert value(registry, "trainer_trainjob_run_time_seconds_count", result="Complete") == 0


def test_an_update_without_an_add_treats_the_old_object_as_the_baseline() -> None:
    metrics, registry, _ = setup()
    done = tj(conditions=[cond("Complete")])
    metrics.observe_update(done, done)
    assert totals(registry)["completed"] == 0
    metrics2, registry2, _ = setup()
    metrics2.observe_update(tj(jobsStatus=jobs(ready=1)), done)
    assert totals(registry2) == {"created": 0, "started": 0, "completed": 1, "failed": 0}


def test_failure_counts_by_reason_and_a_job_that_never_ran_did_not_start() -> None:
    metrics, registry, _ = setup()
    pending = tj()
    metrics.observe_add(pending, is_in_initial_list=False)
    metrics.observe_update(pending, suspended(pending))
    metrics.observe_update(suspended(pending), pending)
    metrics.observe_update(pending, tj(conditions=[cond("Failed", reason="FailedJobs")]))
    assert totals(registry) == {"created": 1, "started": 0, "completed": 0, "failed": 1}
    assert value(registry, "trainer_trainjob_run_time_seconds_count", result="Failed") == 0


def test_a_fast_job_seen_complete_first_still_started() -> None:
    metrics, registry, clock = setup()
    metrics.observe_add(tj(), is_in_initial_list=False)
    clock.now = T0 + 5
    metrics.observe_update(tj(), tj(conditions=[cond("Complete", at="2026-01-01T00:00:05Z")]))
    assert totals(registry) == {"created": 1, "started": 1, "completed": 1, "failed": 0}
    assert value(registry, "trainer_trainjob_run_time_seconds_sum", result="Complete") == 0


def test_suspend_and_resume_of_a_running_job_start_it_once() -> None:
    metrics, registry, _ = setup()
    pending, running = tj(), tj(jobsStatus=jobs(ready=1))
    metrics.observe_add(pending, False)
    metrics.observe_update(pending, running)
    metrics.observe_update(running, suspended(pending))
    metrics.observe_update(suspended(pending), running)
    assert totals(registry)["started"] == 1


def test_trainjobs_of_different_runtimes_and_namespaces_count_apart() -> None:
    metrics, registry, _ = setup()
    other = tj("u2")
    other["metadata"]["namespace"] = "team-b"
    other["spec"]["runtimeRef"] = {"name": "mine", "kind": "TrainingRuntime"}
    metrics.observe_add(tj(), False)
    metrics.observe_add(other, False)
    assert registry.get_sample_value(
        "trainer_trainjobs_created_total",
        {"namespace": "team-b", "runtime_kind": "TrainingRuntime", "runtime": "mine"},
    )
    assert value(registry, "trainer_trainjobs_created_total") == 1
