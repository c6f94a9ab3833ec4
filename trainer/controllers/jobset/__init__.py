"""JobSet v0.10.1 in Python: the JobSet and Pod controllers and their admission webhooks.

``setup`` is the one entry the product's entry point calls. It is a coroutine because field
indexes are registered on the cache's informers, which need the API discovery (async).
"""

from __future__ import annotations

import logging
from typing import Any

from manager import Builder, Manager
from manager.client.restmapper import NoKindMatch
from trainer.controllers.jobset.metrics import default_metrics
from trainer.controllers.jobset.placement import (
    NODE_GVK,
    POD_GVK,
    POD_JOB_KEY,
    POD_NAME_KEY,
    pod_job_key_index,
    pod_name_index,
)
from trainer.controllers.jobset.pod_reconciler import PodReconciler, leader_pod_predicate
from trainer.controllers.jobset.reconciler import (
    JOB_GVK,
    JOB_OWNER_KEY,
    JOBSET_GVK,
    SERVICE_GVK,
    JobSetReconciler,
    job_owner_index,
)

__all__ = ["JobSetReconciler", "PodReconciler", "setup"]
log = logging.getLogger(__name__)


async def setup(mgr: Manager, webhook_server: Any | None = None) -> bool:
    """Register the ``jobset`` and ``pod`` controllers, their indexes and, given a server, the
    four webhooks at upstream's paths. Returns False (registering nothing) when the API server
    does not serve the JobSet CRD, as ``trainer.components`` expects of a component."""
    from webhooks import jobset as jobset_webhooks
    from webhooks import pod as pod_webhooks

    try:
        await mgr.mapper.mapping(JOBSET_GVK)
    except NoKindMatch:
        log.info("jobset.x-k8s.io/v1alpha2 is not served by the API server; skipping the JobSet controllers")
        return False
    cache = mgr.cache
    await cache.index_field(JOB_GVK, JOB_OWNER_KEY, job_owner_index)
    await cache.index_field(POD_GVK, POD_JOB_KEY, pod_job_key_index)
    await cache.index_field(POD_GVK, POD_NAME_KEY, pod_name_index)
    await cache.get_informer(NODE_GVK)  # the leader's Node is read from the cache, as upstream

    default_metrics()
    Builder(mgr).for_(JOBSET_GVK).owns(JOB_GVK).owns(SERVICE_GVK).named("jobset").complete(
        JobSetReconciler(mgr.client, mgr.cluster.event_recorder("jobset"))
    )
    Builder(mgr).for_(POD_GVK).with_event_filter(leader_pod_predicate()).named("pod").complete(
        PodReconciler(mgr.client)
    )
    if webhook_server is not None:
        webhook_server.register(jobset_webhooks.MUTATE_PATH, jobset_webhooks.mutating_handler())
        webhook_server.register(jobset_webhooks.VALIDATE_PATH, jobset_webhooks.validation_handler())
        webhook_server.register(pod_webhooks.MUTATE_PATH, pod_webhooks.mutating_handler(mgr.client))
        webhook_server.register(pod_webhooks.VALIDATE_PATH, pod_webhooks.validation_handler(mgr.client))
    return True
