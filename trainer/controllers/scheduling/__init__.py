"""Wiring of the scheduler-plugins controllers (PodGroup, ElasticQuota) into a manager.

``await setup(mgr)`` is the one call the entry point makes. The CRDs are optional in a
cluster: a kind the API server does not serve is skipped with one log line, so a cluster
without scheduler-plugins still runs every other controller. Each kind is checked on its own
(a cluster may install only the coscheduling CRD).

``setup`` is a coroutine because discovery and index registration are asynchronous in the
framework (the REST mapper and ``Cache.index_field`` await the API server / the informer).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import structlog

from manager.client.restmapper import NoKindMatch
from manager.controller.builder import Builder
from manager.controller.handler import enqueue_for_object, enqueue_from_map
from manager.events import EventRecorder
from manager.manager import Manager
from manager.scheme import GroupVersionKind
from trainer.api import scheduling_constants as c
from trainer.controllers import elasticquota, podgroup

log = structlog.get_logger("trainer.controllers.scheduling")


def _recorder(mgr: Manager, component: str) -> EventRecorder:
    # Framework gap: the manager's Cluster protocol does not declare event_recorder (the
    # concrete manager.cluster.Cluster has it); fall back to a recorder on the live client.
    make = getattr(mgr.cluster, "event_recorder", None)
    if make is not None:
        recorder: EventRecorder = make(component)
        return recorder
    return EventRecorder(mgr.api_reader, component=component)


async def served(mgr: Manager, gvk: GroupVersionKind) -> bool:
    """Whether the API server serves ``gvk`` (discovery through the client's REST mapper).

    Only "not served" answers False; any other discovery error propagates, so a transient
    failure at start-up fails loudly instead of silently disabling the controllers.
    """
    try:
        await mgr.mapper.mapping(gvk)
    except NoKindMatch:
        return False
    return True


async def setup(mgr: Manager, *, api_version: str = c.API_VERSION, workers: int | None = None) -> bool:
    """Register the PodGroup and ElasticQuota controllers and their pod indexes.

    ``api_version`` is the group/version probed by discovery (tests point it at one that does
    not exist); ``workers`` overrides the manager's per-controller concurrency (``--workers``).
    Returns True when at least one controller was registered.
    """
    kinds = {
        c.PodGroupKind: GroupVersionKind.from_api_version(api_version, c.PodGroupKind),
        c.ElasticQuotaKind: GroupVersionKind.from_api_version(api_version, c.ElasticQuotaKind),
    }
    available = {kind for kind, gvk in kinds.items() if await served(mgr, gvk)}
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
    options: dict[str, Any] = {} if workers is None else {"max_concurrent_reconciles": workers}
    if c.PodGroupKind in available:
        await indexer.index_field(podgroup.POD, podgroup.POD_GROUP_INDEX, podgroup.index_pod_group)
        reconciler = podgroup.PodGroupReconciler(mgr.client, _recorder(mgr, podgroup.EVENT_COMPONENT))
        (
            Builder(mgr)
            .for_(podgroup.PODGROUP)
            .watches(podgroup.POD, enqueue_from_map(podgroup.map_pod_to_group))
            .with_options(**options)
            .complete(reconciler)
        )
    if c.ElasticQuotaKind in available:
        await indexer.index_field(
            elasticquota.POD, elasticquota.POD_PHASE_INDEX, elasticquota.index_pod_phase
        )
        eq_reconciler = elasticquota.ElasticQuotaReconciler(
            mgr.client, _recorder(mgr, elasticquota.EVENT_COMPONENT)
        )
        changed = eq_reconciler.change_tracker()
        (
            Builder(mgr)
            .for_(elasticquota.ELASTICQUOTA, predicates=[changed])
            .watches(
                elasticquota.POD,
                enqueue_for_object(),  # upstream: the request names the pod itself
                predicates=[elasticquota.pod_may_change_used(), changed],
            )
            .with_options(**options)
            .complete(eq_reconciler)
        )
    return True
