"""How the manager caches Pods: in proportion to the training workload, not to the cluster.

Upstream's managers each cache every Pod of the cluster in full (the JobSet Pod controller and
the scheduler-plugins PodGroup and ElasticQuota controllers all watch all Pods). What our Pod
readers actually read (docs/scale.md has the table):

* JobSet Pod controller, the Pod webhooks and the TrainJob status server: Pods of JobSets,
  which carry ``jobset.sigs.k8s.io/jobset-name`` (every Pod a JobSet's Job creates does);
* PodGroup controller: Pods that carry ``scheduling.x-k8s.io/pod-group``;
* ElasticQuota controller: *every* Pod of a namespace, but only its phase, namespace, container
  and init-container requests (and init containers' ``restartPolicy``) and ``spec.overhead``.

So with ``podCache: Minimal`` (the default) the Pod informer is either

* label-selected (the ElasticQuota controller is off or its CRD is not served): the union of
  the two label selectors above, one list+watch each, nothing else cached; or
* cluster-wide with a transform (the ElasticQuota controller runs): Pods with one of the two
  labels kept whole, every other Pod cut down before it is stored to an equivalent Pod for the
  ElasticQuota sum: its identity, phase, and one synthetic container requesting the Pod's
  effective requests (:func:`slim_pod`; :data:`SLIM_POD` where those cannot be precomputed).

Either way the store keeps JSON bytes (``compact``), a read decodes a private copy.
``podCache: Full`` caches every Pod whole (this manager's earlier behaviour, and upstream's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import structlog

from manager.cache import ByObject
from manager.cache.transform import (
    FieldSpec,
    by_predicate,
    compose,
    project,
    strip_last_applied,
    strip_managed_fields,
)
from manager.meta.gvk import POD
from manager.meta.quantity import Quantity, QuantityError
from manager.scheme import GroupVersionKind
from trainer.api import jobset_constants as jc
from trainer.api import scheduling_constants as sc
from trainer.controllers.elasticquota import pod_request
from trainer.runtime.context import require_kinds

log = structlog.get_logger("trainer.controllers.podcache")

MINIMAL = "Minimal"
FULL = "Full"
MODES = (FULL, MINIMAL)

RELEVANT_LABELS = (jc.JobSetNameKey, sc.PodGroupLabel)
"""A Pod carrying one of these is read whole by some controller, webhook or the status server."""

_REQUESTS: FieldSpec = {"resources": {"requests": True}}
SLIM_POD: FieldSpec = {
    "apiVersion": True,
    "kind": True,
    "metadata": {
        "name": True,
        "namespace": True,
        "uid": True,  # the status server's "does not exist" check reads it before the labels
        "resourceVersion": True,
        "deletionTimestamp": True,
    },
    "spec": {
        "overhead": True,
        "containers": _REQUESTS,
        "initContainers": {**_REQUESTS, "restartPolicy": True},
    },
    "status": {"phase": True},
}
"""What is kept of a Pod no controller reads whole: the ElasticQuota ``used`` sum's inputs.

The fallback of :func:`slim_pod`, for a Pod whose effective requests do not survive being
written out as one container's requests."""

_IDENTITY: FieldSpec = {
    "apiVersion": True,
    "kind": True,
    "metadata": SLIM_POD["metadata"],
    "status": SLIM_POD["status"],
}
_identity = project(_IDENTITY)
_slim_fields = project(SLIM_POD)


def _round_trips(value: Quantity) -> bool:
    """Whether ``value`` written out and read back is the same quantity for every later sum:
    the same number, the same format (a sum takes its first term's) and the same text."""
    text = str(value)
    try:
        again = Quantity(text)
    except QuantityError:
        return False
    return again == value and again.format is value.format and str(again) == text


def slim_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """An unrelated Pod as the ElasticQuota controller needs it, as small as it can be.

    ``pod_request`` reads containers, init containers and overhead; the Pod stored instead has
    one container requesting exactly ``pod_request(pod)`` and nothing else in its spec, so its
    ``pod_request`` (hence every ``used`` sum it takes part in) is the same number, format and
    text. Where that cannot hold (a request that does not parse: the controller must still
    report it; a sum whose printed form reads back in another format, e.g. ``128Mi + 1G``),
    the request fields are kept as they are (:data:`SLIM_POD`).
    """
    try:
        effective = pod_request(pod)
    except (QuantityError, TypeError, AttributeError, ValueError):
        return _slim_fields(pod)
    if not all(_round_trips(q) for q in effective.values()):
        return _slim_fields(pod)
    slim = _identity(pod)
    slim["spec"] = (
        {"containers": [{"resources": {"requests": {name: str(q) for name, q in effective.items()}}}]}
        if effective
        else {}
    )
    return slim


def is_relevant(pod: Mapping[str, Any]) -> bool:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return any(key in labels for key in RELEVANT_LABELS)


full_pod = compose(strip_managed_fields, strip_last_applied)
minimal_transform = by_predicate(is_relevant, full_pod, slim_pod)


def by_object(mode: str, *, all_pods: bool, pod_groups: bool) -> ByObject | None:
    """The cache settings for Pods; ``None`` leaves the cache's defaults (full objects).

    ``all_pods``: some reader (the ElasticQuota controller) needs every Pod of the cluster;
    ``pod_groups``: the PodGroup controller runs, so Pods with the pod-group label are read.
    """
    if mode == FULL:
        return None
    if mode != MINIMAL:
        raise ValueError(f"podCache: unsupported value {mode!r}: supported values: {', '.join(MODES)}")
    if all_pods:
        return ByObject(transform=minimal_transform, compact=True)
    selectors: list[str | dict[str, str]] = [jc.JobSetNameKey]
    if pod_groups:
        selectors.append(sc.PodGroupLabel)
    return ByObject(label_selectors=selectors, transform=full_pod, compact=True)


async def configure(mgr: Any, mode: str | None, components: Iterable[str]) -> str:
    """Set the Pod cache of ``mgr`` before any component creates the Pod informer.

    Returns what was chosen (``Full``, ``Minimal/label-selected`` or ``Minimal/all-pods``), which
    is logged once at start-up.
    """
    mode = mode or MINIMAL
    enabled = set(components)
    pod_groups = elastic_quotas = False
    if "scheduling" in enabled:
        mapper = mgr.client.mapper
        version = sc.API_VERSION
        pod_groups = await require_kinds(mapper, GroupVersionKind.from_api_version(version, sc.PodGroupKind))
        elastic_quotas = await require_kinds(
            mapper, GroupVersionKind.from_api_version(version, sc.ElasticQuotaKind)
        )
    settings = by_object(mode, all_pods=elastic_quotas, pod_groups=pod_groups)
    if settings is None:
        chosen = FULL
    else:
        mgr.cache.options.by_object[POD] = settings
        chosen = f"{MINIMAL}/{'all-pods' if elastic_quotas else 'label-selected'}"
    log.info("pod cache", mode=chosen, labels=",".join(RELEVANT_LABELS))
    return chosen
