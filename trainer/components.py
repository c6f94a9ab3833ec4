"""Every controller set the product runs, in one place, each switchable with ``--controllers``.

A component's ``setup`` registers its controllers, indexes and (when the process serves
webhooks) its admission handlers on the manager, and returns False when it chose to skip
itself (e.g. its CRDs are not installed in this cluster). ``webhook_configurations`` names the
admission webhook configurations whose webhooks the component serves: with certificate
management on, the rotator injects its CA into those of the components that run, and leaves
the configurations of a switched-off or skipped component alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from manager import Manager
from manager.webhook.server import WebhookServer
from trainer.controllers.trainer_setup import setup as trainer_setup
from webhooks.certs import TRAINER_WEBHOOK_CONFIGURATIONS, WebhookConfiguration

Setup = Callable[[Manager, WebhookServer | None], Awaitable[bool]]


@dataclass(frozen=True)
class Component:
    name: str
    description: str
    setup: Setup
    webhook_configurations: tuple[WebhookConfiguration, ...] = ()


async def _jobset(mgr: Manager, webhooks: WebhookServer | None) -> bool:
    from trainer.controllers import jobset

    return await jobset.setup(mgr, webhooks)


async def _scheduling(mgr: Manager, _webhooks: WebhookServer | None) -> bool:
    from trainer.controllers import scheduling

    return await scheduling.setup(mgr)


#: In start-up order.
COMPONENTS: tuple[Component, ...] = (
    Component(
        "jobset",
        "JobSet and exclusive-placement Pod controllers and webhooks (jobset.x-k8s.io/v1alpha2)",
        _jobset,
        (
            WebhookConfiguration("jobset-mutating-webhook-configuration", mutating=True),
            WebhookConfiguration("jobset-validating-webhook-configuration"),
        ),
    ),
    Component(
        "scheduling",
        "PodGroup and ElasticQuota status (scheduling.x-k8s.io/v1alpha1); skipped when the CRDs are absent",
        _scheduling,
    ),
    Component(
        "trainer",
        "TrainJob, TrainingRuntime and ClusterTrainingRuntime controllers and webhooks",
        trainer_setup,
        TRAINER_WEBHOOK_CONFIGURATIONS,
    ),
)


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
