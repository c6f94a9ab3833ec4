"""JobSet v0.12.0's ``InPlaceRestart`` feature gate: the controller's half of in-place restarts
(docs/behaviour/jobset-v0.12.md §1.10; upstream ``pkg/controllers/in_place_restart.go``, KEP-467).

With ``failurePolicy.restartStrategy: InPlaceRestart`` an agent in every pod (upstream's
``in-place-restart-agent``, not part of the manager) keeps the pod's in-place restart attempt in
the annotation ``jobset.sigs.k8s.io/in-place-restart-attempt`` and holds the worker container
behind a barrier. The controller reads every pod of the JobSet (the Pod index
``podsIndexByJobSet``, ``<namespace>/<jobset>`` from the pod's ``jobset-name`` label) and writes
two numbers the agents read:

* ``status.currentInPlaceRestartAttempt``: once every pod the JobSet should have is at the same
  attempt, that attempt (the agents lift their barriers);
* ``status.previousInPlaceRestartAttempt``: while the pods disagree, the highest attempt minus
  one (the pods at or below it restart in place), never lowered.

Too many restarts fail the JobSet with ``ReachedMaxRestarts``. Pure functions; the steps of
``v0_12_controller`` call them while the gate is on.
"""

from __future__ import annotations

import logging

from manager import ObjectKey
from manager.meta.object import Json as Object
from manager.meta.object import annotations_of, labels_of, name_of, namespace_of
from manager.meta.strconv import atoi
from trainer.api import jobset_constants as c
from trainer.api.v2_3 import jobset_constants as c23
from trainer.jobset.levels.controller import InPlaceRestartOutcome, JobSetPods

__all__ = ["ATTEMPT_ERROR", "JOBSET_PODS", "InPlaceRestartError", "reconcile", "uses_in_place_restart"]
log = logging.getLogger(__name__)

_INT32 = 1 << 32
ATTEMPT_ERROR = f"invalid value for annotation {c23.InPlaceRestartAttemptKey}, must be non-negative integer"


class InPlaceRestartError(ValueError):
    """What stops the in-place restart step (a bad annotation, a JobSet it cannot count): the
    reconcile fails with it and is retried."""


def uses_in_place_restart(js: Object) -> bool:
    policy = (js.get("spec") or {}).get("failurePolicy")
    return policy is not None and policy.get("restartStrategy") == c23.InPlaceRestart


# -- the Pod index and watch ---------------------------------------------------------------------


def _pod_index(pod: Object) -> list[str]:
    """``podsIndexByJobSet``: ``<namespace>/<jobset>`` of a pod with the ``jobset-name`` label."""
    labels = labels_of(pod)
    if c.JobSetNameKey not in labels:
        return []
    return [f"{namespace_of(pod)}/{labels[c.JobSetNameKey]}"]


def _jobset_key(js: Object) -> str:
    return f"{namespace_of(js)}/{name_of(js)}"


def _jobset_of(pod: Object) -> list[ObjectKey]:
    """A pod's event reconciles the JobSet its ``jobset-name`` label names."""
    labels = labels_of(pod)
    if c.JobSetNameKey not in labels:
        return []
    return [ObjectKey(namespace_of(pod), str(labels[c.JobSetNameKey]))]


JOBSET_PODS = JobSetPods(
    index=c23.PodsIndexByJobSetKey, index_value=_pod_index, key=_jobset_key, jobsets_of=_jobset_of
)


# -- the counts ----------------------------------------------------------------------------------


def _int32(value: int) -> int:
    """Go's ``int32(v)`` of an int: the low 32 bits, signed."""
    value &= _INT32 - 1
    return value - _INT32 if value >= _INT32 // 2 else value


def max_container_restart_count(pods: list[Object]) -> int:
    """The highest ``restartCount`` of any init or regular container of the pods."""
    highest = 0
    for pod in pods:
        status = pod.get("status") or {}
        for key in ("initContainerStatuses", "containerStatuses"):
            for container in status.get(key) or []:
                highest = max(highest, int(container.get("restartCount") or 0))
    return highest


def pod_attempts(pods: list[Object]) -> list[int]:
    """The pods' in-place restart attempts: a Failed pod (its replacement may exist already) and
    a pod whose agent has not written the annotation yet are left out."""
    attempts = []
    for pod in pods:
        if (pod.get("status") or {}).get("phase") == "Failed":
            continue
        annotations = annotations_of(pod)
        if c23.InPlaceRestartAttemptKey not in annotations:
            continue
        try:
            attempt = atoi(str(annotations[c23.InPlaceRestartAttemptKey]))
        except ValueError:
            raise InPlaceRestartError(ATTEMPT_ERROR) from None
        if attempt < 0:
            raise InPlaceRestartError(ATTEMPT_ERROR)
        attempts.append(_int32(attempt))
    return attempts


def _max_restarts(js: Object) -> int:
    return int(((js.get("spec") or {}).get("failurePolicy") or {}).get("maxRestarts") or 0)


def exceeded_max_restarts(js: Object, attempts: list[int]) -> bool:
    """The highest attempt, less the JobSet's restarts that do not count, above ``maxRestarts``."""
    status = js.get("status") or {}
    uncounted = int(status.get("restarts") or 0) - int(status.get("restartsCountTowardsMax") or 0)
    return (max(attempts) if attempts else 0) - uncounted > _max_restarts(js)


def total_pods(js: Object) -> int:
    """Every pod the JobSet should have: replicas x parallelism of each replicated job, whose
    ``completions`` must equal its ``parallelism`` (the webhook checks it on create)."""
    total = 0
    for rjob in (js.get("spec") or {}).get("replicatedJobs") or []:
        spec = (rjob.get("template") or {}).get("spec") or {}
        completions, parallelism = spec.get("completions"), spec.get("parallelism")
        if completions is None or parallelism is None or int(completions) != int(parallelism):
            raise InPlaceRestartError(
                f"{rjob.get('name') or ''}: in-place restart requires "
                "jobTemplate.spec.completions == jobTemplate.spec.parallelism != nil"
            )
        replicas = rjob.get("replicas")
        total += (1 if replicas is None else int(replicas)) * int(parallelism)
    return total


def _set_current(js: Object, attempt: int) -> bool:
    status = js.setdefault("status", {})
    if status.get("currentInPlaceRestartAttempt") == attempt:
        return False
    status["currentInPlaceRestartAttempt"] = attempt
    log.info("Updated current in-place restart attempt", extra={"currentInPlaceRestartAttempt": attempt})
    return True


def _set_previous(js: Object, attempts: list[int]) -> bool:
    """The highest attempt minus one, unless that would lower (or keep) the current value: the
    pod with the highest attempt may not be back yet while the JobSet restarts."""
    status = js.setdefault("status", {})
    previous = max(attempts) - 1
    old = status.get("previousInPlaceRestartAttempt")
    if old is not None and previous <= int(old):
        return False
    status["previousInPlaceRestartAttempt"] = previous
    log.info("Updated previous in-place restart attempt", extra={"previousInPlaceRestartAttempt": previous})
    return True


def reconcile(js: Object, pods: list[Object]) -> InPlaceRestartOutcome:
    """``reconcileInPlaceRestart`` over the JobSet's pods (``pods``, from the index)."""
    if max_container_restart_count(pods) > _max_restarts(js):
        # a container that fails so fast that the barrier is never lifted
        log.info("Individual container restart count has exceeded max restarts, failing JobSet")
        return InPlaceRestartOutcome.EXCEEDED_MAX_RESTARTS
    attempts = pod_attempts(pods)
    if exceeded_max_restarts(js, attempts):
        log.info("JobSet has exceeded max restarts during in-place restart, failing JobSet")
        return InPlaceRestartOutcome.EXCEEDED_MAX_RESTARTS
    expected = total_pods(js)
    if len(attempts) == expected and attempts and all(a == attempts[0] for a in attempts):
        return (
            InPlaceRestartOutcome.UPDATED
            if _set_current(js, attempts[0])
            else InPlaceRestartOutcome.UNCHANGED
        )
    if not attempts or max(attempts) == 0:
        return InPlaceRestartOutcome.UNCHANGED  # a new JobSet whose agents have not all started
    return InPlaceRestartOutcome.UPDATED if _set_previous(js, attempts) else InPlaceRestartOutcome.UNCHANGED
