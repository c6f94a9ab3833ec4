"""ElasticQuota ``status.used`` controller (scheduler-plugins v0.34.1-devel ``elasticquota_controller.go``).

``status.used`` is for people and dashboards: the CapacityScheduling plugin keeps its own
accounting. A reconcile is keyed by whatever triggered it (the ElasticQuota or a pod), but only
its namespace matters: the namespace's quota gets the sum of the requests of its Running pods
(docs/behaviour/scheduling.md §3.3), written with a merge patch and a ``Synced`` event when it changes.

Deliberate differences (docs/divergences.md, "Scheduling"): pod ``spec.overhead`` is added
(upstream computes it and throws the result away); with several ElasticQuotas in one namespace
the first by name is updated (upstream: cache order); pod events that cannot change ``used``
(no Running pod involved) are not enqueued; a namespace whose sum is costly (``SPACED_FROM``) is
recomputed at most once per ``RECOMPUTE_SPACING`` times that cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

import structlog

from manager.client.patch import Patch
from manager.controller.predicate import Funcs, Predicate
from manager.controller.reconcile import Request, Result, TerminalError
from manager.meta.gvk import POD as POD  # re-exported: the kind this controller watches
from manager.meta.object import Json as Object
from manager.meta.quantity import Quantity, QuantityError
from manager.scheme import gvk_for
from trainer.api import scheduling_constants as c
from trainer.api.resources import ResourceQuantities, add_resources, max_resources
from trainer.api.scheduling_v1alpha1 import ElasticQuota

log = structlog.get_logger("trainer.controllers.elasticquota")

Resources = ResourceQuantities

ELASTICQUOTA = gvk_for(ElasticQuota)
CONTROLLER_NAME = "elasticquota"
EVENT_COMPONENT = "ElasticQuotaController"
SYNCED_MESSAGE = "Elastic Quota %s synced successfully"
"""Formatted with the *request* key, which may name a pod (upstream behaviour kept verbatim,
docs/behaviour/scheduling.md §3.2 step 6)."""

RECOMPUTE_SPACING = 10.0
"""A namespace is recomputed again at the earliest this many times its last recomputation's
duration later (at most ~10 % of the event loop per churning namespace)."""

SPACED_FROM = 0.01
"""Sums cheaper than this (a namespace of up to a few hundred pods) are never held back."""

RUNNING = "Running"


# -- request arithmetic (pure) -----------------------------------------------------------------


def _requests(container: Mapping[str, Any]) -> Resources:
    requests = (container.get("resources") or {}).get("requests") or {}
    return {name: Quantity(value) for name, value in requests.items()}


def pod_request(pod: Mapping[str, Any]) -> Resources:
    """scheduling.md §3.3 step 4: max(sum of containers, largest init container), plus ``spec.overhead``.

    Sidecar init containers (``restartPolicy: Always``) are treated like ordinary init
    containers, as upstream does. Overhead is added on purpose: upstream means to and does
    not (a discarded return value); see docs/divergences.md.
    """
    spec = pod.get("spec") or {}
    app: Resources = {}
    for container in spec.get("containers") or ():
        add_resources(app, _requests(container))
    init: Resources = {}
    for container in spec.get("initContainers") or ():
        max_resources(init, _requests(container))
    max_resources(app, init)
    overhead = spec.get("overhead") or {}
    add_resources(app, {name: Quantity(value) for name, value in overhead.items()})
    return app


def quota_keys(eq: Mapping[str, Any]) -> list[str]:
    """Resource names of ``spec.min`` and ``spec.max`` (their union), which ``used`` always lists."""
    spec = eq.get("spec") or {}
    names = set((spec.get("min") or {}).keys()) | set((spec.get("max") or {}).keys())
    return sorted(names)


def compute_used(eq: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> Resources:
    """scheduling.md §3.3: zero for every min/max key, plus the requests of every Running pod."""
    return sum_requests(eq, (pod_request(pod) for pod in pods if _running(pod)))


def sum_requests(eq: Mapping[str, Any], requests: Iterable[Resources]) -> Resources:
    """Zero for every min/max key, plus each of ``requests`` (the Running pods' ``pod_request``)."""
    used: Resources = {name: Quantity.zero() for name in quota_keys(eq)}
    for request in requests:
        add_resources(used, request)
    return used


def parse_used(eq: Mapping[str, Any]) -> Resources | None:
    """The stored ``status.used``; ``None`` when a value does not parse (then it is rewritten)."""
    used = (eq.get("status") or {}).get("used") or {}
    try:
        return {name: Quantity(value) for name, value in used.items()}
    except QuantityError:
        return None


def same_resources(a: Mapping[str, Quantity] | None, b: Mapping[str, Quantity]) -> bool:
    """Semantic equality: the same key set and numerically equal values (``"1"`` == ``"1000m"``)."""
    return a is not None and a.keys() == b.keys() and all(a[k].cmp(b[k]) == 0 for k in a)


def used_patch(eq: Mapping[str, Any], used: Mapping[str, Quantity]) -> Object:
    """Merge patch setting ``status.used``; keys that vanished are sent as ``null`` (deleted)."""
    stored = (eq.get("status") or {}).get("used") or {}
    body: dict[str, str | None] = {name: None for name in sorted(stored.keys() - used.keys())}
    body.update({name: str(value) for name, value in sorted(used.items())})
    return {"status": {"used": body}}


# -- which pod events matter -------------------------------------------------------------------


def _running(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == RUNNING


def pod_may_change_used() -> Predicate:
    """Only events involving a Running pod (before or after) can change any ``used``.

    Upstream enqueues every pod event in the cluster; each one recomputes its namespace. This
    keeps the results and drops reconciles that would find nothing to do.
    """
    return Funcs(
        on_create=lambda e: _running(e.object),
        on_update=lambda e: _running(e.object_old) or _running(e.object_new),
        on_delete=lambda e: _running(e.object),
        on_generic=lambda e: _running(e.object),
    )


# -- the Running pods' requests, kept from the events ------------------------------------------


class RunningPodRequests:
    """``pod_request`` of every cached Running pod, per namespace, kept up to date from the Pod
    events (as :meth:`observer`, a predicate that lets every event through).

    A recomputation then sums quantities it already has, instead of reading (decoding) every
    Running pod of the namespace from the cache and parsing its requests again: that was a
    quarter of the start-up CPU with 100k Pods cached (docs/scale.md). The informer calls
    handlers right after its store changes, so this holds what a cache read would return; the
    sum's order is the order the pods last changed, the order a cache index by phase lists them
    in (test_elasticquota_running_requests.py compares the two).
    """

    SHARED_MAX = 4096
    """Distinct request shapes kept for sharing (a Deployment's pods all request the same)."""

    def __init__(self) -> None:
        self._by_namespace: dict[str, dict[str, Resources | QuantityError]] = {}
        # pods that request the same share one parsed result (sums never change an addend):
        # ~90 bytes a pod instead of ~500 (test/bench/eq_requests_cost.py)
        self._shared: dict[Hashable, Resources | QuantityError] = {}

    def _request_of(self, pod: Mapping[str, Any]) -> Resources | QuantityError:
        shape = _request_shape(pod)
        if shape is not None and (known := self._shared.get(shape)) is not None:
            return known
        try:
            request: Resources | QuantityError = pod_request(pod)
        except QuantityError as err:  # the sum fails, as it would reading the pod
            request = err
        if shape is not None:
            if len(self._shared) >= self.SHARED_MAX:
                self._shared.clear()
            self._shared[shape] = request
        return request

    def observer(self) -> Predicate:
        """The predicate that keeps the requests; place it before any filter of the Pod watch."""

        def put(pod: Mapping[str, Any]) -> bool:
            namespace, name = _namespace_name(pod)
            pods = self._by_namespace.setdefault(namespace, {})
            pods.pop(name, None)  # an update moves the pod to the end, as the cache's index does
            pods[name] = self._request_of(pod)
            return True

        def drop(pod: Mapping[str, Any]) -> bool:
            namespace, name = _namespace_name(pod)
            pods = self._by_namespace.get(namespace)
            if pods is not None:
                pods.pop(name, None)
                if not pods:
                    del self._by_namespace[namespace]
            return True

        def keep(pod: Mapping[str, Any]) -> bool:
            return put(pod) if _running(pod) else drop(pod)

        return Funcs(
            on_create=lambda e: keep(e.object),
            on_update=lambda e: keep(e.object_new),
            on_delete=lambda e: drop(e.object),
        )

    def in_namespace(self, namespace: str) -> list[Resources]:
        """The requests of the namespace's Running pods; raises the ``QuantityError`` of one that
        does not parse."""
        out: list[Resources] = []
        for request in (self._by_namespace.get(namespace) or {}).values():
            if isinstance(request, QuantityError):
                raise request
            out.append(request)
        return out


def _request_shape(pod: Mapping[str, Any]) -> Hashable | None:
    """What ``pod_request`` reads of the pod, hashable; None when a value is not (not a string)."""
    spec = pod.get("spec") or {}

    def requests(container: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
        return tuple(sorted(((container.get("resources") or {}).get("requests") or {}).items()))

    shape = (
        tuple(requests(c) for c in spec.get("containers") or ()),
        tuple(requests(c) for c in spec.get("initContainers") or ()),
        tuple(sorted((spec.get("overhead") or {}).items())),
    )
    try:
        hash(shape)
    except TypeError:
        return None
    return shape


def _namespace_name(pod: Mapping[str, Any]) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


# -- the reconciler ----------------------------------------------------------------------------


class ElasticQuotaReconciler:
    """Recomputes ``status.used`` of the ElasticQuota in the request's namespace.

    ``client`` reads the namespace's quotas from the cache and writes to the API server;
    ``recorder`` is an ``EventRecorder`` for ``ElasticQuotaController``; ``running_requests``
    holds the Running pods' requests, fed by its ``observer`` on the Pod watch.

    Requests are keyed by pod (upstream's contract: the ``Synced`` message names the request),
    so a namespace with N running pods gets N requests at start-up, and upstream recomputes the
    whole namespace for each: quadratic. Once :meth:`change_tracker` is attached to the watches,
    the reconciler remembers which namespaces are up to date since their last event and skips
    the recomputation for the other requests of the same burst. Results and events are the
    same: the first request after a change still computes, patches and names itself.
    """

    def __init__(
        self,
        client: Any,
        recorder: Any,
        running_requests: RunningPodRequests,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.clock = clock
        self.running_requests = running_requests
        self._up_to_date: set[str] | None = None  # None: no tracker attached, always recompute
        self._not_before: dict[str, float] = {}  # namespace -> earliest next recomputation

    def change_tracker(self) -> Predicate:
        """A predicate (placed after any filter) that marks the event's namespace as changed.

        The informer updates its store before it calls handlers, so a namespace marked up to
        date before its pods are read cannot miss a change: a later event unmarks it and
        enqueues another request.
        """
        self._up_to_date = set()
        tracked = self._up_to_date

        def mark(obj: Mapping[str, Any]) -> bool:
            tracked.discard((obj.get("metadata") or {}).get("namespace") or "")
            return True

        return Funcs(
            on_create=lambda e: mark(e.object),
            on_update=lambda e: mark(e.object_old) and mark(e.object_new),
            on_delete=lambda e: mark(e.object),
            on_generic=lambda e: mark(e.object),
        )

    async def reconcile(self, req: Request) -> Result | None:
        """Recompute the namespace, unless nothing changed since, or it was recomputed too recently.

        A recomputation sums the requests of every Running pod of the namespace (when it read
        them from the cache, 0.1 to 1.7 s with 5,000 pods here), and a cluster's pods churn
        (status updates), so recomputing on every change let one busy namespace take the whole
        event loop (100k-Pod scale run, docs/scale.md). After a sum that took
        ``d >= SPACED_FROM`` seconds, the next one of the same namespace waits until
        ``RECOMPUTE_SPACING * d`` later: the request is requeued for then, and the changes of the
        meantime are summed together (docs/divergences.md S-10).
        Smaller namespaces are recomputed on every change, as upstream.
        """
        log.debug("reconciling", request=str(req))
        tracked = self._up_to_date
        if tracked is not None:
            if req.namespace in tracked:
                return None  # nothing changed in this namespace since it was last computed
            wait = self._not_before.get(req.namespace, 0.0) - self.clock()
            if wait > 0:
                return Result(requeue_after=wait)
            tracked.add(req.namespace)
        try:
            await self._sync(req)
        except BaseException:
            if tracked is not None:
                tracked.discard(req.namespace)  # the retry must recompute
            raise
        return None

    async def _sync(self, req: Request) -> None:
        quotas: list[Object] = await self.client.list(ELASTICQUOTA, namespace=req.namespace)
        if not quotas:
            return
        # one quota per namespace is the model; with more, the first by name (a stable choice)
        eq = min(quotas, key=lambda q: (q.get("metadata") or {}).get("name") or "")
        started = self.clock()
        try:
            used = sum_requests(eq, self.running_requests.in_namespace(req.namespace))
        except QuantityError as err:
            # the API server validated these requests; one that still fails will fail every retry
            raise TerminalError(f"ElasticQuota {req.namespace}: {err}") from err
        finally:
            self._space(req.namespace, self.clock() - started)
        if same_resources(parse_used(eq), used):
            return
        await self.client.status.patch(eq, Patch.merge(used_patch(eq, used)))
        await self.recorder.event(eq, "Normal", c.SyncedReason, SYNCED_MESSAGE % (req,))

    def _space(self, namespace: str, seconds: float) -> None:
        """Hold the namespace's next sum back by ``RECOMPUTE_SPACING`` times this one's cost."""
        now = self.clock()
        # Spacings that have run out hold nothing back: dropping them here keeps one entry per
        # currently spaced namespace, not one per namespace ever spaced (deleted ones included).
        for spaced in [ns for ns, until in self._not_before.items() if until <= now]:
            del self._not_before[spaced]
        if seconds >= SPACED_FROM:
            self._not_before[namespace] = now + RECOMPUTE_SPACING * seconds
        else:
            self._not_before.pop(namespace, None)
