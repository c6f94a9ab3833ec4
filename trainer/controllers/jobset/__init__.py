"""JobSet in Python: the JobSet and exclusive-placement Pod controllers, as the API level's
JobSet release (v0.10.1 at level v2.1, v0.12.0 at v2.3) has them: what differs between the
releases are the steps of ``context.jobset_level.controller`` (``trainer/jobset/levels``).

``setup(context)`` is the one entry the product's entry point calls (its webhooks are registered
by ``webhooks.setup_jobset``). It is a coroutine because field indexes are registered on the
cache's informers, which need the API discovery (async).
"""

from __future__ import annotations

import logging

from manager import Builder
from manager.controller.handler import enqueue_from_map
from manager.meta.gvk import JOB as JOB_GVK
from manager.meta.gvk import POD as POD_GVK
from manager.meta.gvk import SERVICE as SERVICE_GVK
from trainer.controllers.jobset.metrics import default_metrics
from trainer.controllers.jobset.pod_reconciler import PodReconciler, leader_pod_predicate
from trainer.controllers.jobset.reconciler import JOB_OWNER_KEY, JOBSET_GVK, JobSetReconciler
from trainer.jobset.placement import NODE_CACHE, POD_JOB_KEY, cache_placement_reads, pod_job_key_index
from trainer.runtime.context import SetupContext

__all__ = ["NODE_CACHE", "JobSetReconciler", "PodReconciler", "setup"]
log = logging.getLogger(__name__)


async def setup(context: SetupContext) -> bool:
    """Register the ``jobset`` and ``pod`` controllers and their indexes. Returns False
    (registering nothing) when the API server does not serve the JobSet CRD."""
    if not await context.require_kinds(JOBSET_GVK):
        log.info("jobset.x-k8s.io/v1alpha2 is not served by the API server; skipping the JobSet controllers")
        return False
    mgr = context.manager
    cache = mgr.cache
    steps = context.jobset_level.controller
    await cache.index_field(JOB_GVK, JOB_OWNER_KEY, steps.job_owner_index)
    await cache.index_field(POD_GVK, POD_JOB_KEY, pod_job_key_index)
    await cache_placement_reads(cache)

    default_metrics()
    builder = Builder(mgr).for_(JOBSET_GVK).owns(JOB_GVK).owns(SERVICE_GVK)
    pods = steps.jobset_pods()
    if pods is not None:  # v0.12.0's InPlaceRestart gate: a JobSet's pods reconcile it
        await cache.index_field(POD_GVK, pods.index, pods.index_value)
        builder = builder.watches(POD_GVK, enqueue_from_map(pods.jobsets_of))
    builder.named("jobset").complete(
        JobSetReconciler(
            mgr.client, steps.event_recorder(context, "jobset"), steps=steps, api_reader=mgr.api_reader
        )
    )
    Builder(mgr).for_(POD_GVK).with_event_filter(leader_pod_predicate()).named("pod").complete(
        PodReconciler(mgr.client, steps)
    )
    return True
