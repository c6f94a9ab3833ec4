"""The rule both levels share for ``spec.managedBy``: the TrainJob controller reconciles only
TrainJobs of its own controller (``trainer.kubeflow.org/trainjob-controller``, or none set).

Trainer v2.3.0 returns early for any other value (``trainjob.IsManagedByExternalController``,
kubeflow/trainer#3681). v2.1.0 reconciled every TrainJob whatever the field said
(docs/behaviour/trainer.md §9 quirk 2), so a TrainJob that Kueue's MultiKueue runs on a worker
cluster also got a JobSet, and ran, on the management cluster; level v2.1 here leaves it alone
as v2.3.0 does (divergence T-18 in docs/divergences.md).
"""

from __future__ import annotations

from manager.meta.object import Json
from trainer.api import trainer_constants as tc

__all__ = ["is_managed_by_external_controller"]


def is_managed_by_external_controller(trainjob: Json) -> bool:
    """Upstream's ``trainjob.IsManagedByExternalController``: ``spec.managedBy`` (unset reads as
    the Trainer's own ``trainer.kubeflow.org/trainjob-controller``) names another controller."""
    managed_by = (trainjob.get("spec") or {}).get("managedBy")
    if managed_by is None:
        managed_by = tc.TrainJobControllerName
    return bool(managed_by != tc.TrainJobControllerName)
