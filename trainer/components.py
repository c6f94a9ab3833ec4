"""Every controller set the product runs, in one place, each switchable with ``--controllers``.

A component is its controllers' ``setup`` and its webhooks' ``setup``, both of the one shape
``setup(context) -> bool`` (``trainer.runtime.context``): the controllers register theirs and
their indexes, and return False when they skip themselves (e.g. the CRDs are not installed in
this cluster); only then are the component's webhooks registered (``webhooks.setup_*``).
``webhook_configurations`` names the admission webhook configurations whose webhooks the
component serves at every level, ``level_webhook_configurations`` those it serves only at some
(the v2.3 TrainJob defaulter's): with certificate management on, the rotator injects its CA into
those of the components that run, and leaves the configurations of a switched-off or skipped
one alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import webhooks
from trainer.controllers import jobset, scheduling, trainer_setup
from trainer.runtime.context import Setup, SetupContext
from trainer.runtime.levels import RuntimeLevel
from webhooks.certs import (
    TRAINER_WEBHOOK_CONFIGURATIONS,
    WebhookConfiguration,
    level_trainer_webhook_configurations,
)

__all__ = ["COMPONENTS", "Component", "component", "select"]


async def _no_webhooks(context: SetupContext) -> bool:
    return False


def _none(level: RuntimeLevel) -> tuple[WebhookConfiguration, ...]:
    return ()


@dataclass(frozen=True)
class Component:
    name: str
    description: str
    controllers: Setup
    webhooks: Setup = _no_webhooks
    webhook_configurations: tuple[WebhookConfiguration, ...] = ()
    level_webhook_configurations: Callable[[RuntimeLevel], tuple[WebhookConfiguration, ...]] = _none

    def configurations(self, level: RuntimeLevel) -> tuple[WebhookConfiguration, ...]:
        """Every webhook configuration the component serves at ``level``."""
        return self.webhook_configurations + self.level_webhook_configurations(level)

    async def setup(self, context: SetupContext) -> bool:
        """The controllers, then (when they run) the webhooks; False when the component skipped itself."""
        if not await self.controllers(context):
            return False
        await self.webhooks(context)
        return True


#: In start-up order.
COMPONENTS: tuple[Component, ...] = (
    Component(
        "jobset",
        "JobSet and exclusive-placement Pod controllers and webhooks (jobset.x-k8s.io/v1alpha2)",
        jobset.setup,
        webhooks.setup_jobset,
        (
            WebhookConfiguration("jobset-mutating-webhook-configuration", mutating=True),
            WebhookConfiguration("jobset-validating-webhook-configuration"),
        ),
    ),
    Component(
        "scheduling",
        "PodGroup and ElasticQuota status (scheduling.x-k8s.io/v1alpha1); skipped when the CRDs are absent",
        scheduling.setup,
    ),
    Component(
        "trainer",
        "TrainJob, TrainingRuntime and ClusterTrainingRuntime controllers and webhooks",
        trainer_setup.setup,
        webhooks.setup_trainer,
        TRAINER_WEBHOOK_CONFIGURATIONS,
        level_trainer_webhook_configurations,
    ),
)


def component(name: str) -> Component:
    """The component called ``name`` (KeyError for an unknown one)."""
    for candidate in COMPONENTS:
        if candidate.name == name:
            return candidate
    raise KeyError(name)


def select(spec: str, available: tuple[Component, ...] = COMPONENTS) -> list[Component]:
    """kube-controller-manager's ``--controllers`` syntax: ``*`` all, ``foo`` on, ``-foo`` off."""
    names = {c.name for c in available}
    wanted: set[str] = set()
    disabled: set[str] = set()
    for raw in (s.strip() for s in spec.split(",")):
        if not raw:
            continue
        name = raw.removeprefix("-")
        if name != "*" and name not in names:
            known = ", ".join(sorted(names)) or "none yet"
            raise ValueError(f"--controllers: unknown controller {name!r} (known: {known})")
        if raw.startswith("-"):
            disabled.add(name)
        elif name == "*":
            wanted |= names
        else:
            wanted.add(name)
    return [c for c in available if c.name in wanted and c.name not in disabled]
