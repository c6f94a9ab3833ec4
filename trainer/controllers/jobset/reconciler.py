"""The JobSet reconciler (docs/behaviour/jobset.md §2.2): one method per step, in the order that section
numbers them.

Reads come from the manager's cache (the JobSet, its Jobs through the ``.metadata.controller``
index, the headless Service); writes are CREATE, full UPDATE, status UPDATE and DELETE, never
PATCH, as upstream. The status is written once at the end, and the queued events are emitted
only after that write succeeds.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from manager import Request, Result
from manager.client.errors import AlreadyExists, Conflict, NotFound, RequestError
from manager.client.patch import Patch
from manager.events import Recorder
from manager.meta.gvk import JOB as JOB_GVK
from manager.meta.gvk import POD as POD_GVK
from manager.meta.gvk import SERVICE as SERVICE_GVK
from manager.meta.object import Json as Object
from manager.meta.object import labels_of, meta_of, name_of
from manager.scheme import GroupVersionKind
from trainer.api import gocodec
from trainer.api import jobset_constants as c
from trainer.api.v2_3 import jobset_constants as c23
from trainer.controllers.jobset import jobs as J
from trainer.controllers.jobset import policies as P
from trainer.controllers.jobset import status as S
from trainer.controllers.jobset.metrics import JobSetMetrics, default_metrics
from trainer.controllers.jobset.service import construct_headless_service
from trainer.controllers.jobset.util import merge_maps, merge_slices
from trainer.controllers.status_writes import StatusWrites
from trainer.jobset.levels.controller import ControllerSteps, InPlaceRestartOutcome
from trainer.jobset.levels.v0_10_controller import STEPS as V0_10_STEPS
from trainer.jobset.objects import controller_uid

log = logging.getLogger(__name__)

JOBSET_GVK = GroupVersionKind(c.GROUP, c.VERSION, c.KIND)
JOB_OWNER_KEY = ".metadata.controller"


_JOBSET_CODEC = gocodec.codec_for("jobset.x-k8s.io/v1alpha2", "JobSet")


def job_owner_index(job: Object) -> list[str]:
    """``.metadata.controller`` as v0.10.1 (level v2.1) indexes it: the controller owner's
    name, only when it is a JobSet (2.1). Each release's index is its step's
    ``job_owner_index``."""
    return V0_10_STEPS.job_owner_index(job)


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


async def run_bounded(
    calls: Iterable[Callable[[], Awaitable[None]]], limit: int = c.MaxParallelism
) -> list[BaseException]:
    """Run the calls concurrently, at most ``limit`` at a time; return the errors they raised,
    in the calls' order. As Go's ``workqueue.ParallelizeUntil``: workers draw the calls from the
    iterable as they go, so a lazy iterable is never held whole (a JobSet of a million replicas
    is created 50 Jobs at a time, never a million pending calls), and there are never more
    workers than calls: none for no call (the Jobs to delete, on nearly every reconcile), the
    caller's own task for one. Fifty tasks started for an empty list were ~5 % of the manager's
    interpreter time in a running burst of 1,000 TrainJobs (docs/bench.md)."""
    iterator = iter(calls)
    head = list(itertools.islice(iterator, limit))
    if len(head) < min(limit, 2):  # the iterable ended within the limit, at no call or one
        for call in head:
            try:
                await call()
            except Exception as err:
                return [err]
        return []
    pending = enumerate(itertools.chain(head, iterator))
    errors: list[tuple[int, BaseException]] = []

    async def worker() -> None:
        for index, call in pending:  # one shared iterator: each worker takes the next call
            try:
                await call()
            except Exception as err:
                errors.append((index, err))

    try:
        async with asyncio.TaskGroup() as group:  # the iterable itself failing stops every worker
            for _ in head:
                group.create_task(worker())
    except* Exception as failed:
        raise failed.exceptions[0] from None
    return [err for _, err in sorted(errors, key=lambda item: item[0])]


class JobCreationError(Exception):
    """Joined create errors, one line each (Go's errors.Join)."""


class VolumeClaimError(Exception):
    """Joined PVC create errors, one per volume-claim policy (Go's errors.Join)."""


class JobScalingError(Exception):
    """Joined Job patch errors of the scaling step, one per Job (Go's errors.Join)."""


def all_jobs_ready(js: Object, statuses: list[Object]) -> bool:
    """Every Job the spec asks for is ready or succeeded (upstream's allJobsReady)."""
    wanted = sum(J.replicas_of(r) for r in J.replicated_jobs(js))
    return wanted == sum(int(s.get("ready") or 0) + int(s.get("succeeded") or 0) for s in statuses)


class JobSetReconciler:
    def __init__(
        self,
        client: Any,
        recorder: Recorder,
        *,
        now: Callable[[], datetime.datetime] = utc_now,
        metrics: JobSetMetrics | None = None,
        steps: ControllerSteps = V0_10_STEPS,
        api_reader: Any | None = None,
    ) -> None:
        self.client = client
        # live reads, only where the cache is known to lag (a refused create's owner)
        self.api_reader = api_reader if api_reader is not None else client
        self.recorder = recorder
        self.now = now
        self.metrics = metrics or default_metrics()
        self.steps = steps
        self.status_writes = StatusWrites()

    async def reconcile(self, req: Request) -> Result | None:
        try:
            js: Object = await self.client.get(JOBSET_GVK, req.name, req.namespace)
        except NotFound:
            self.status_writes.forget(req.namespace or "", req.name)
            return None
        if meta_of(js).get("deletionTimestamp"):
            return None
        log.debug("Reconciling JobSet")  # upstream's V(2)
        cache_behind = self.status_writes.cache_is_behind(js)
        opts = S.ReconcileOpts(steps=self.steps)
        # An error aborts before the status write: the status is not written and events are dropped.
        try:
            result = await self.reconcile_jobset(js, opts)
        except StaleChildJob as stale:
            # Expected cache lag (docs/divergences.md J-1): the Job's newer version is on its way
            # through the watch of owned Jobs, which reconciles this JobSet again. Like an error,
            # the pass ends before its status write; unlike one, without back-off or a log line.
            log.debug("JobSet %s: %s", name_of(js), stale)
            return None
        except OwnerNotYetSeen as lag:
            # Expected cache lag, another process's (J-1): an admission webhook that looks the
            # Job's JobSet up (Kueue's mjob.kb.io) has not seen the JobSet we were just handed.
            # No event, the pass ends before its status write; tried again in a moment, said
            # at info so that a webhook that never catches up still shows.
            log.info("JobSet %s: a webhook has not seen it yet, retrying: %s", name_of(js), lag)
            return Result(requeue_after=OWNER_NOT_YET_SEEN_RETRY)
        if opts.should_update:
            if cache_behind:
                # Our last status write is newer than this JobSet: its PUT would be refused
                # (409), and that write's watch event reconciles again from the newer state.
                log.debug("JobSet %s: cache older than our status write; waiting for it", name_of(js))
                return result
            await self.update_status(js, opts)
        return result

    async def update_status(self, js: Object, opts: S.ReconcileOpts) -> None:
        """One status PUT with the whole in-memory status, then the queued events.

        A Conflict means the cache holds an older JobSet than the server: the newer version's
        watch event is on its way and reconciles the JobSet again from fresh state, so the
        conflict is expected cache lag -- no error, no back-off (upstream returns
        ``Requeue: true``, a rate-limited retry; docs/divergences.md). The events of this pass
        are dropped, as upstream; the next pass computes them again. A NotFound means the JobSet
        was deleted meanwhile: nothing is left to write (upstream returns the error).

        The events are recorded in the background (``emit``), as Go's recorder queues them: the
        worker goes on to the next JobSet instead of waiting for each Event's POST.
        """
        status = js.setdefault("status", {})
        status["restarts"] = int(status.get("restarts") or 0)  # never omitted, as in Go
        if not status.get("restartsCountTowardsMax"):
            status.pop("restartsCountTowardsMax", None)
        if not status.get("terminalState"):
            status.pop("terminalState", None)
        try:
            # Upstream's typed Status().Update: the whole struct as Go re-encodes it.
            self.status_writes.wrote(await self.client.status.update(_JOBSET_CODEC.encode(js)))
        except Conflict:
            log.debug("status conflict on JobSet %s: waiting for its newer version", name_of(js))
            return
        except NotFound:
            # Deleted since the cache saw it (its owner's deletion, the garbage collector): the
            # delete event is on its way and there is nothing left to write (J-1).
            log.debug("JobSet %s was deleted before its status write", name_of(js))
            self.status_writes.forget(meta_of(js).get("namespace") or "", name_of(js))
            return
        for event in opts.events:
            self.recorder.emit(js, event.type, event.reason, event.message)

    # -- step 3: the inner reconcile ----------------------------------------------------------------

    async def reconcile_jobset(self, js: Object, opts: S.ReconcileOpts) -> Result | None:
        managed_by = J.spec_of(js).get("managedBy")
        if managed_by and managed_by != c.JobSetControllerName:
            log.debug("JobSet %s is managed by %s, skipping", name_of(js), managed_by)
            return None
        owned = await self.get_child_jobs(js)
        statuses = S.replicated_jobs_statuses(js, owned, self.steps)
        self.update_replicated_jobs_statuses(js, statuses, opts)

        if S.jobset_finished(js):
            await self.delete_jobs(owned.active)
            return await self.execute_ttl_after_finished_policy(js)

        await self.delete_jobs(owned.previous)
        now = self.now()
        if not J.jobset_suspended(js) and all_jobs_ready(js, statuses):
            S.set_restart_ended(js, S.RestartEnd.JOBS_READY, opts, now)
        if owned.failed:
            P.execute_failure_policy(js, owned, opts, now, self.metrics)
            return None
        if owned.successful and P.execute_success_policy(js, owned, opts, now, self.metrics):
            return None
        created = await self.create_service_and_jobs(js, owned, statuses, opts)
        if created:
            self.count_created_jobs(js, owned, created, opts)
        if J.jobset_suspended(js):
            await self.suspend_jobs(js, owned.active, opts)
        else:
            await self.resume_jobs_if_necessary(js, owned.active, statuses, opts)
        await self.reconcile_in_place_restart(js, opts)
        return None

    async def create_service_and_jobs(
        self, js: Object, owned: J.ChildJobs, statuses: list[Object], opts: S.ReconcileOpts
    ) -> list[Object]:
        """The headless Service and the missing Jobs, created side by side.

        Upstream creates the Service, then the Jobs: two round trips one after the other on the
        JobSet's worker. Neither create reads the other's result, so they run concurrently (one
        round trip less per new JobSet; docs/divergences.md J-12). A Service error still fails
        the pass with its Warning; the Jobs it did not hold back are the ones the next pass
        would create anyway. The volume claims come before the Jobs that mount them: a claim
        that cannot be created holds the Jobs back, as upstream; then the active Jobs' scaling
        (ElasticJobSet), then the missing Jobs.
        """

        async def claims_then_jobs() -> list[Object]:
            await self.reconcile_volume_claim_policies(js)
            await self.sync_job_scaling(js, owned.active)
            return await self.reconcile_replicated_jobs(js, owned, statuses, opts)

        service, jobs = await asyncio.gather(
            self.create_headless_svc_if_necessary(js), claims_then_jobs(), return_exceptions=True
        )
        if isinstance(service, BaseException):
            raise service
        if isinstance(jobs, BaseException):
            raise jobs
        return jobs

    async def get_child_jobs(self, js: Object) -> J.ChildJobs:
        children = await self.client.list(
            JOB_GVK,
            namespace=meta_of(js).get("namespace"),
            field_selector={JOB_OWNER_KEY: self.steps.job_owner_key(js)},
        )
        restarts = int((js.get("status") or {}).get("restarts") or 0)
        return J.classify_jobs(children, restarts, lambda job: self.steps.previous_job_attempt(js, job))

    @staticmethod
    def update_replicated_jobs_statuses(js: Object, statuses: list[Object], opts: S.ReconcileOpts) -> None:
        status = js.setdefault("status", {})
        old = status.get("replicatedJobsStatus")
        if S.statuses_equal(old, statuses):
            if old is not None:
                status["replicatedJobsStatus"] = S.sorted_statuses(old)  # Go sorts the old list in place
            return
        status["replicatedJobsStatus"] = S.sorted_statuses(statuses)
        opts.should_update = True

    def count_created_jobs(
        self, js: Object, owned: J.ChildJobs, created: list[Object], opts: S.ReconcileOpts
    ) -> None:
        """Count the Jobs this pass created (as the server returned them) in replicatedJobsStatus.

        Upstream counts only the Jobs it listed at the start, so the status written after the
        creates still says 0 and the Jobs' own watch events bring the JobSet back for a second
        status PUT (a suspended JobSet: ``suspended`` 0, then 1), and every TrainJob watching the
        JobSet for a second reconcile. The server's answer to each create is what that next pass
        would list, so the one status PUT of this pass already carries the counts it would write
        (docs/divergences.md, "Hot paths"). The gating above (dependsOn, startup order) still
        used the counts of the start, as upstream.
        """
        counted = J.ChildJobs(
            active=[*owned.active, *created],
            successful=owned.successful,
            failed=owned.failed,
            previous=owned.previous,
        )
        self.update_replicated_jobs_statuses(js, S.replicated_jobs_statuses(js, counted, self.steps), opts)

    # -- finished JobSets: TTL (2.5) ------------------------------------------------------------------

    async def execute_ttl_after_finished_policy(self, js: Object) -> Result | None:
        if J.spec_of(js).get("ttlSecondsAfterFinished") is None:
            return None
        try:
            expired = P.check_if_ttl_expired(js, self.now())
        except P.TTLError as err:
            raise P.TTLError(f"error checking if ttl expired: {err}") from err
        if expired:
            await self.client.delete(js, propagation_policy="Foreground")
            return None
        remaining = P.requeue_jobset_after(js, self.now())
        return Result(requeue_after=remaining.total_seconds()) if remaining.total_seconds() > 0 else None

    # -- Jobs: delete, create (2.10) ------------------------------------------------------------------

    async def delete_jobs(self, jobs: list[Object]) -> None:
        """Foreground-delete the Jobs not already terminating, 50 at a time; NotFound is fine."""

        def delete(job: Object) -> Callable[[], Awaitable[None]]:
            async def call() -> None:
                with contextlib.suppress(NotFound):
                    await self.client.delete(job, propagation_policy="Foreground")
                    log.debug(
                        "successfully deleted job",
                        extra={"job": _ref(job), "restart attempt": labels_of(job).get(c.RestartsKey)},
                    )

            return call

        errors = await run_bounded(delete(j) for j in jobs if not meta_of(j).get("deletionTimestamp"))
        if errors:
            raise errors[0]

    async def create_jobs(self, jobs: Iterable[Object], js: Object | None = None) -> list[Object]:
        """Create the Jobs, 50 at a time; returns the created Jobs as the server stored them.

        ``AlreadyExists`` for a Job the cache has not seen yet, or has seen owned by the same
        JobSet, is expected cache lag (our own create of a moment ago), not an error: the Job's
        watch event brings the JobSet back. A Job of that name owned by something else stays an
        error, as upstream.
        """

        created: list[Object] = []

        def create(job: Object) -> Callable[[], Awaitable[None]]:
            async def call() -> None:
                try:
                    stored = await self.client.create(job)
                    log.debug("successfully created job", extra={"job": _ref(job)})
                    if isinstance(stored, dict):
                        created.append(stored)
                except AlreadyExists as err:
                    if not await self._is_cache_lag(job):
                        raise JobCreationError(
                            f'job "{name_of(job)}" creation failed with error: {err}'
                        ) from err
                except NotFound as err:
                    if js is not None and await self._jobset_gone(js):
                        log.debug("JobSet gone; job not created", extra={"job": _ref(job)})
                        return
                    if js is not None and _names_jobset(err, js):
                        # the JobSet is there: the refusing webhook's cache has not seen its create
                        raise OwnerNotYetSeen(str(err)) from err
                    raise JobCreationError(f'job "{name_of(job)}" creation failed with error: {err}') from err
                except RequestError as err:
                    raise JobCreationError(f'job "{name_of(job)}" creation failed with error: {err}') from err

            return call

        errors = await run_bounded(create(j) for j in jobs)
        lagging = [e for e in errors if isinstance(e, OwnerNotYetSeen)]
        errors = [e for e in errors if not isinstance(e, OwnerNotYetSeen)]
        if errors:
            # chained to the API errors, so the controller logs a refused create (a namespace
            # being terminated, a quota, a conflict) as the routine error it is: one line, retried
            causes = [e for e in errors if isinstance(e, Exception)]
            cause = causes[0] if len(causes) == 1 else ExceptionGroup("job creation failed", causes)
            message = "\n".join(str(e) for e in errors)
            api_errors = [e.__cause__ if isinstance(e.__cause__, Exception) else e for e in causes]
            if js is not None and self.steps.announces_job_creation_failure(api_errors):
                self.recorder.emit(js, "Warning", c.JobCreationFailedReason, message)
            raise JobCreationError(message) from cause
        if lagging:
            raise lagging[0]
        return created

    async def _still_cached(self, js: Object) -> bool:
        """The cache still holds this JobSet, the same incarnation, not being deleted.

        A pass works on the JobSet the cache gave it at its start; a delete that lands meanwhile
        (this process's own: the TrainJob deadline, the TTL, both hidden from reads at once by
        the cache; another's, once its watch event arrives) is seen here without a round trip.
        """
        return await _holds(self.client, js)

    async def _jobset_gone(self, js: Object) -> bool:
        """The JobSet was deleted (or replaced) after the cache gave it to us.

        A Job create refused NotFound (an admission webhook that looks the owner up, e.g. Kueue's
        ``mjob.kb.io``) for a JobSet already gone is expected cache lag: the JobSet's delete event
        ends the work. Read live: the cache is exactly what lags here.
        """
        return not await _holds(self.api_reader, js)

    async def _is_cache_lag(self, job: Object) -> bool:
        meta = meta_of(job)
        try:
            cached = await self.client.get(JOB_GVK, name_of(job), str(meta.get("namespace") or ""))
        except NotFound:
            return True
        owner = controller_uid(cached)
        return owner is not None and owner == controller_uid(job)

    # -- headless Service (2.8) -----------------------------------------------------------------------

    async def create_headless_svc_if_necessary(self, js: Object) -> None:
        if not J.dns_hostnames_enabled(js):
            return
        try:
            await self.client.get(SERVICE_GVK, J.subdomain_of(js), str(meta_of(js).get("namespace") or ""))
            return
        except NotFound:
            pass
        try:
            await self.client.create(construct_headless_service(js))
        except AlreadyExists:
            return  # the cache has not seen it yet: it exists, as the get above would have said
        except RequestError as err:
            await self.recorder.event(js, "Warning", c.HeadlessServiceCreationFailedReason, str(err))
            raise

    # -- volume claims (v0.12.0: jobset-v0.12.md §1.4) ------------------------------------------------

    async def reconcile_volume_claim_policies(self, js: Object) -> None:
        """Create the PVCs the release's step asks for; one that exists is left as it is.

        Each policy stops at its first refused PVC, announced at once as a
        ``PVCCreationFailed`` Warning; the policies' errors are joined and fail the pass.
        """
        errors: list[RequestError] = []
        for claims in self.steps.volume_claims(js):
            for claim in claims:
                if not await self._still_cached(js):
                    # Deleted while this pass ran (J-18): a claim made now would outlive its
                    # JobSet until the garbage collector removes it again.
                    log.debug("JobSet deleted during the pass; PVC not created", extra={"pvc": _ref(claim)})
                    return
                try:
                    await self.client.create(claim)
                    log.debug("successfully created PVC", extra={"pvc": _ref(claim)})
                except AlreadyExists:
                    continue
                except RequestError as err:
                    self.recorder.emit(js, "Warning", c23.PVCCreationFailedReason, str(err))
                    errors.append(err)
                    break
        if errors:
            cause = errors[0] if len(errors) == 1 else ExceptionGroup("PVC creation failed", errors)
            raise VolumeClaimError("\n".join(str(e) for e in errors)) from cause

    # -- scaling (v0.12.0's ElasticJobSet gate: jobset-v0.12.md §1.11) -------------------------------

    async def sync_job_scaling(self, js: Object, active: list[Object]) -> None:
        """Merge-patch each active Job whose ``parallelism``/``completions`` its template changed
        (the release's step says which; none without the gate). The Job is updated in place
        with the server's answer, as controller-runtime's Patch does, so the later steps of the
        pass write it at its new resourceVersion. Every Job is tried; the errors are joined."""
        errors: list[RequestError] = []
        messages: list[str] = []
        for job, patch in self.steps.job_scaling_patches(js, active):
            try:
                stored = await self.client.patch(job, Patch.merge(patch))
            except RequestError as err:
                errors.append(err)
                messages.append(f'failed to patch job "{name_of(job)}" for scaling: {err}')
                continue
            log.debug(
                "patched child Job for horizontal pod scaling", extra={"job": _ref(job), "patch": patch}
            )
            if isinstance(stored, dict):
                job.clear()
                job.update(stored)
        if errors:
            cause = errors[0] if len(errors) == 1 else ExceptionGroup("job scaling failed", errors)
            raise JobScalingError("\n".join(messages)) from cause

    # -- in-place restarts (v0.12.0's InPlaceRestart gate: jobset-v0.12.md §1.10) ----------------------

    async def reconcile_in_place_restart(self, js: Object, opts: S.ReconcileOpts) -> None:
        """The last step of a pass that got this far, for a JobSet whose failure policy restarts
        in place: its pods, read through the Pod index, set the status's in-place restart
        attempts, or fail the JobSet with ``ReachedMaxRestarts`` (no first failed job: no Job
        failed)."""
        if not self.steps.restarts_in_place(js):
            return
        pods_of = self.steps.jobset_pods()
        if pods_of is None:
            return
        pods = await self.client.list(
            POD_GVK, namespace=meta_of(js).get("namespace"), field_selector={pods_of.index: pods_of.key(js)}
        )
        outcome = self.steps.in_place_restart(js, pods)
        if outcome is InPlaceRestartOutcome.EXCEEDED_MAX_RESTARTS:
            P.set_jobset_failed(
                js, c.ReachedMaxRestartsReason, c.ReachedMaxRestartsMessage, opts, self.now(), self.metrics
            )
        elif outcome is InPlaceRestartOutcome.UPDATED:
            opts.should_update = True

    # -- startup policy and dependsOn gating (2.11) ---------------------------------------------------

    async def reconcile_replicated_jobs(
        self, js: Object, owned: J.ChildJobs, statuses: list[Object], opts: S.ReconcileOpts
    ) -> list[Object]:
        """Create the missing Jobs the gating allows; returns those created."""
        created: list[Object] = []
        in_order = P.in_order_startup_policy(J.spec_of(js).get("startupPolicy"))
        gated_by_order = in_order and not J.jobset_suspended(js)
        replicas_so_far: dict[str, int] = {}
        by_name = {s["name"]: s for s in statuses}
        for rjob in J.replicated_jobs(js):
            replicas_so_far[str(rjob.get("name"))] = J.replicas_of(rjob)
            if not P.depends_on_satisfied(rjob, replicas_so_far, statuses):
                continue
            status = by_name.get(str(rjob.get("name")), {})
            if gated_by_order and P.all_replicas_started(J.replicas_of(rjob), status):
                continue
            missing = iter(J.jobs_to_create(js, rjob, owned, self.steps))
            first = next(missing, None)
            if first is not None:
                if not await self._still_cached(js):
                    # Deleted while this pass ran (J-18): its Jobs would start Pods for nothing.
                    log.debug("JobSet deleted during the pass; its Jobs are not created")
                    return created
                created += await self.create_jobs(itertools.chain((first,), missing), js)
            if gated_by_order:
                S.set_condition(js, S.in_order_in_progress_condition(), opts, self.now())
                return created
        if gated_by_order:
            S.set_condition(js, S.in_order_completed_condition(), opts, self.now())
        return created

    # -- suspend and resume (2.12) ---------------------------------------------------------------------

    async def update_job(self, job: Object, *, status: bool = False) -> Object:
        """One Job update (its status subresource with ``status``); a Conflict means the cache held
        an older Job than the server (the job controller writes its status all the time), which
        ends the pass as ``StaleChildJob``."""
        try:
            if status:
                updated: Object = await self.client.status.update(job)
            else:
                updated = await self.client.update(job)
        except Conflict as err:
            raise StaleChildJob(f"Job {name_of(job)} changed since the cache saw it; waiting for it") from err
        return updated

    async def suspend_jobs(self, js: Object, active: list[Object], opts: S.ReconcileOpts) -> None:
        for job in active:
            if not J.job_suspended(job):
                job.setdefault("spec", {})["suspend"] = True
                await self.update_job(job)
        S.set_condition(js, S.suspended_condition(), opts, self.now())
        S.set_restart_ended(js, S.RestartEnd.SUSPENDED, opts, self.now())

    async def resume_jobs_if_necessary(
        self, js: Object, active: list[Object], statuses: list[Object], opts: S.ReconcileOpts
    ) -> None:
        templates = {
            str(r.get("name")): (((r.get("template") or {}).get("spec") or {}).get("template") or {})
            for r in J.replicated_jobs(js)
        }
        in_order = P.in_order_startup_policy(J.spec_of(js).get("startupPolicy"))
        by_name = {s["name"]: s for s in statuses}
        replicas_so_far: dict[str, int] = {}
        for rjob in J.replicated_jobs(js):
            rjob_name = str(rjob.get("name"))
            replicas_so_far[rjob_name] = J.replicas_of(rjob)
            if not P.depends_on_satisfied(rjob, replicas_so_far, statuses):
                continue
            if in_order and P.all_replicas_started(J.replicas_of(rjob), by_name.get(rjob_name, {})):
                continue
            for job in active:
                if labels_of(job).get(c.ReplicatedJobNameKey) == rjob_name and J.job_suspended(job):
                    await self.resume_job(job, templates)
            if in_order:
                S.set_condition(js, S.in_order_in_progress_condition(), opts, self.now())
                return
        S.set_condition(js, S.resumed_condition(), opts, self.now())

    async def resume_job(self, job: Object, templates: dict[str, Object]) -> None:
        """Clear startTime (status UPDATE), merge the rjob's current pod template, unsuspend (UPDATE)."""
        if (job.get("status") or {}).get("startTime"):
            job["status"].pop("startTime")
            job = await self.update_job(job, status=True)
        rjob_name = labels_of(job).get(c.ReplicatedJobNameKey)
        if rjob_name:
            merge_pod_template(job, templates.get(rjob_name) or {})
        else:
            log.error("job %s is missing the %s label", name_of(job), c.ReplicatedJobNameKey)
        job.setdefault("spec", {})["suspend"] = False
        await self.update_job(job)


OWNER_NOT_YET_SEEN_RETRY = 1.0
"""Seconds before a JobSet whose Job a webhook refused for not finding the JobSet is tried again."""


class OwnerNotYetSeen(Exception):
    """A Job create was refused NotFound naming its JobSet, which the API server has: the refusing
    admission webhook's cache is behind the JobSet's create (``create_jobs``)."""


async def _holds(reader: Any, js: Object) -> bool:
    """``reader`` has this JobSet: the same uid, no ``deletionTimestamp``."""
    meta = meta_of(js)
    try:
        found = await reader.get(JOBSET_GVK, name_of(js), str(meta.get("namespace") or ""))
    except NotFound:
        return False
    found_meta = meta_of(found)
    return found_meta.get("uid") == meta.get("uid") and not found_meta.get("deletionTimestamp")


def _names_jobset(err: NotFound, js: Object) -> bool:
    """``err`` says this JobSet was not found (as Kueue's webhook words it, or in its details)."""
    name = name_of(js)
    details = err.status.get("details") or {}
    if details.get("name") == name and str(details.get("kind", "")).lower() in ("jobset", "jobsets"):
        return True
    return f'JobSet.jobset.x-k8s.io "{name}" not found' in str(err)


class StaleChildJob(Exception):
    """A child Job's update was refused with a Conflict: the reconcile ends without its status
    write and without an error (``update_job``)."""


def _ref(obj: Object) -> str:
    """``namespace/name``, as klog.KObj renders it."""
    return f"{meta_of(obj).get('namespace') or ''}/{name_of(obj)}"


def merge_pod_template(job: Object, template: Object) -> None:
    """The Kueue-mutable pod-template fields of the rjob, merged into a suspended Job (2.12)."""
    pod_template = job.setdefault("spec", {}).setdefault("template", {})
    pod_meta = pod_template.setdefault("metadata", {})
    pod_spec = pod_template.setdefault("spec", {})
    template_meta = template.get("metadata") or {}
    template_spec = template.get("spec") or {}
    for target, key, source in (
        (pod_meta, "labels", template_meta),
        (pod_meta, "annotations", template_meta),
        (pod_spec, "nodeSelector", template_spec),
    ):
        merged = merge_maps(target.get(key), source.get(key))
        if merged:
            target[key] = merged
    for key in ("tolerations", "schedulingGates"):
        merged_list = merge_slices(pod_spec.get(key), template_spec.get(key))
        if merged_list:
            pod_spec[key] = merged_list
