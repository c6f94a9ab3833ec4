"""Wiring of the scheduler-plugins controllers (PodGroup, ElasticQuota) into a manager.

``await setup(context)`` is the one call the entry point makes. The CRDs are optional in a
cluster: a kind the API server does not serve is skipped with one log line, so a cluster
without scheduler-plugins still runs every other controller. Each kind is checked on its own
(a cluster may install only the coscheduling CRD).

``setup`` is a coroutine because discovery and index registration are asynchronous in the
framework (the REST mapper and ``Cache.index_field`` await the API server / the informer).
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from manager import Builder
from manager.controller import OptionOverrides
from manager.controller.handler import enqueue_for_object, enqueue_from_map
from manager.scheme import GroupVersionKind
from trainer.api import scheduling_constants as c
from trainer.controllers import elasticquota, podgroup
from trainer.runtime.context import SetupContext

log = structlog.get_logger("trainer.controllers.scheduling")


async def setup(context: SetupContext) -> bool:
    """Register the PodGroup and ElasticQuota controllers and the PodGroup pod index.

    ``context.max_concurrent_reconciles`` overrides the manager's per-controller concurrency
    (upstream's ``--workers``). Returns True when at least one controller was registered.
    """
    return await setup_controllers(context)


async def setup_controllers(context: SetupContext, *, api_version: str = c.API_VERSION) -> bool:
    """``setup`` with the group/version discovery probes (tests point it at one nobody serves)."""
    mgr = context.manager
    kinds = {
        c.PodGroupKind: GroupVersionKind.from_api_version(api_version, c.PodGroupKind),
        c.ElasticQuotaKind: GroupVersionKind.from_api_version(api_version, c.ElasticQuotaKind),
    }
    available = {kind for kind, gvk in kinds.items() if await context.require_kinds(gvk)}
    missing: Sequence[str] = [kind for kind in kinds if kind not in available]
    if missing:
        log.info(
            "scheduler-plugins CRDs not served by the API server; skipping their controllers",
            api_version=api_version,
            missing=",".join(missing),
        )
    if not available:
        return False
    indexer = mgr.cache  # a FieldIndexer (manager.client.interfaces)
    workers = context.max_concurrent_reconciles
    options: OptionOverrides = {} if workers is None else {"max_concurrent_reconciles": workers}
    if c.PodGroupKind in available:
        await indexer.index_field(podgroup.POD, podgroup.POD_GROUP_INDEX, podgroup.index_pod_group)
        reconciler = podgroup.PodGroupReconciler(mgr.client, context.event_recorder(podgroup.EVENT_COMPONENT))
        (
            Builder(mgr)
            .for_(podgroup.PODGROUP)
            .watches(podgroup.POD, enqueue_from_map(podgroup.map_pod_to_group))
            .with_options(**options)
            .complete(reconciler)
        )
    if c.ElasticQuotaKind in available:
        running = elasticquota.RunningPodRequests()
        eq_reconciler = elasticquota.ElasticQuotaReconciler(
            mgr.client, context.event_recorder(elasticquota.EVENT_COMPONENT), running
        )
        changed = eq_reconciler.change_tracker()
        (
            Builder(mgr)
            .for_(elasticquota.ELASTICQUOTA, predicates=[changed])
            .watches(
                elasticquota.POD,
                enqueue_for_object(),  # upstream: the request names the pod itself
                # the requests are kept from every event, so they come before the filter
                predicates=[running.observer(), elasticquota.pod_may_change_used(), changed],
            )
            .with_options(**options)
            .complete(eq_reconciler)
        )
    return True
