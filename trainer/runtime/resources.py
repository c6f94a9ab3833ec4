"""Resource arithmetic the plugins share: a pod's requests, GPU and CPU counts, trainer resources.

Why exact quantities: PodGroup ``minResources`` is a sum of ``requests x count`` that upstream
computes with ``resource.Quantity``; floats would print ``1.2500000001``. Every sum here uses
``manager.meta.quantity.Quantity``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from manager.meta.object import Json
from manager.meta.quantity import Quantity, QuantityError
from trainer.api import trainer_constants as tc
from trainer.api.resources import (
    ResourceQuantities,
    add_resources,
    max_resources,
    quantities,
)

__all__ = [
    "canonical_quantities",
    "cpu_count",
    "gpu_count",
    "pod_requests",
    "trainer_resources_from_runtime",
    "typed_resource_requirements",
]


def _requests(container: Mapping[str, Any]) -> ResourceQuantities:
    return quantities((container.get("resources") or {}).get("requests"))


def _is_pod_level_resource(name: str) -> bool:
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def pod_requests(pod_spec: Mapping[str, Any]) -> ResourceQuantities:
    """Kubernetes ``resourcehelper.PodRequests`` (requests only, sidecars counted, overhead added)."""
    total: ResourceQuantities = {}
    for container in pod_spec.get("containers") or ():
        add_resources(total, _requests(container))
    sidecars: ResourceQuantities = {}
    init_peak: ResourceQuantities = {}
    for container in pod_spec.get("initContainers") or ():
        requests = _requests(container)
        if container.get("restartPolicy") == "Always":
            add_resources(total, requests)
            add_resources(sidecars, requests)
            use = dict(sidecars)
        else:
            use = dict(requests)
            add_resources(use, sidecars)
        max_resources(init_peak, use)
    max_resources(total, init_peak)
    pod_level = quantities((pod_spec.get("resources") or {}).get("requests"))
    for name, quantity in pod_level.items():
        if _is_pod_level_resource(name):
            total[name] = quantity
    add_resources(total, quantities(pod_spec.get("overhead")))
    return total


def _first_gpu(values: Mapping[str, Any] | None) -> int:
    # Go ranges over a map here; we take names in sorted order so the answer is stable.
    for name in sorted((values or {}).keys()):
        if "gpu" in name.lower():
            try:
                return Quantity((values or {})[name]).value()
            except (QuantityError, TypeError):
                return 0
    return 0


def gpu_count(resources: Mapping[str, Any] | None) -> int:
    """GPUs per node: the first ``*gpu*`` request, else the first ``*gpu*`` limit, rounded up."""
    resources = resources or {}
    count = _first_gpu(resources.get("requests"))
    if count == 0:
        count = _first_gpu(resources.get("limits"))
    return count


def cpu_count(resources: Mapping[str, Any] | None) -> int:
    """CPUs per node: ``requests.cpu`` if non-zero, else ``limits.cpu``, rounded up; 0 if none."""
    resources = resources or {}
    for kind in ("requests", "limits"):
        value = (resources.get(kind) or {}).get("cpu")
        if value is None:
            continue
        try:
            quantity = Quantity(value)
        except (QuantityError, TypeError):
            continue
        if not quantity.is_zero():
            return quantity.value()
    return 0


def trainer_resources_from_runtime(jobset_spec: Mapping[str, Any] | None) -> Json | None:
    """Resources of container ``node`` in the first replicated job named ``node`` or labelled trainer."""
    for rjob in (jobset_spec or {}).get("replicatedJobs") or ():
        labels = ((rjob.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if rjob.get("name") != tc.Node and labels.get(tc.LabelTrainJobAncestor) != tc.AncestorTrainer:
            continue
        pod = (((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in pod.get("containers") or ():
            if container.get("name") == tc.Node:
                return dict(container.get("resources") or {})
        return None
    return None


def canonical_quantities(values: Any) -> Any:
    """A ResourceList as Go encodes a decoded one: names sorted, quantities canonical (``2`` -> ``"2"``)."""
    if not isinstance(values, Mapping):
        return values
    out: dict[str, Any] = {}
    for name in sorted(values):
        try:
            out[name] = str(Quantity(values[name]))
        except (QuantityError, TypeError):
            out[name] = values[name]
    return out


def typed_resource_requirements(resources: Any) -> Any:
    """ResourceRequirements as Go encodes the struct: ``limits``, ``requests``, ``claims`` in that order.

    Why: error messages print this value as JSON, and the JobSet document carries it; both must
    read exactly as upstream's.
    """
    if not isinstance(resources, Mapping):
        return resources
    out: dict[str, Any] = {}
    for key in ("limits", "requests"):
        if key in resources:
            out[key] = canonical_quantities(resources[key])
    for key, value in resources.items():
        if key not in out:
            out[key] = value
    return out
