"""The admission webhooks the product serves, and their registration on the webhook server.

One ``setup(context) -> bool`` per component, called by the entry point after the component's
controllers (``trainer.components``): each registers its handlers at upstream's paths, in
upstream's order, and returns False when the process serves no webhooks. The handlers see the
JSON dicts the API server sends (decoded as the Go structs would be, ``webhooks.typed``) and
deny through ``manager.webhook.Denied``.
"""

from __future__ import annotations

from manager.meta.object import Json
from manager.webhook import validating_handler
from manager.webhook.custom import Decode
from manager.webhook.server import WebhookServer
from trainer.api import trainer_constants as tc
from trainer.runtime.context import SetupContext
from trainer.runtime.levels import RuntimeLevel
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.objects import CLUSTER_TRAINING_RUNTIME_GVK, TRAINING_RUNTIME_GVK
from trainer.runtime.registry import Runtime
from webhooks import jobset, pod, trainingruntime, trainjob, trainjob_defaulter, typed

__all__ = ["register_trainer", "setup_jobset", "setup_trainer"]


def register_trainer(server: WebhookServer, runtimes: dict[str, Runtime], level: RuntimeLevel = V2_1) -> None:
    """The three validating webhooks at upstream's paths, in upstream's order (CTR, TR, TrainJob),
    decoding as the level's trainer binary does (``level.trainer_go_types``)."""
    api_version = f"{tc.GROUP}/{tc.VERSION}"

    def decode(kind: str) -> Decode[Json]:
        return typed.decoder(api_version, kind, types_file=level.trainer_go_types)

    server.register(
        trainingruntime.CLUSTER_TRAINING_RUNTIME_PATH,
        validating_handler(
            trainingruntime.ClusterTrainingRuntimeValidator(
                level.runtime_deprecation_policy_url, level.trainer_go_types
            ),
            decode=decode(tc.ClusterTrainingRuntimeKind),
        ),
    )
    server.register(
        trainingruntime.TRAINING_RUNTIME_PATH,
        validating_handler(
            trainingruntime.TrainingRuntimeValidator(level.trainer_go_types),
            decode=decode(tc.TrainingRuntimeKind),
        ),
    )
    server.register(
        trainjob.PATH,
        validating_handler(trainjob.TrainJobValidator(runtimes), decode=decode(tc.TrainJobKind)),
    )


async def setup_trainer(context: SetupContext) -> bool:
    """The TrainJob, TrainingRuntime and ClusterTrainingRuntime webhooks (the webhooks' runtimes),
    and the TrainJob defaulter when the level has one (v2.3, ``webhooks/trainjob_defaulter.py``)."""
    if context.webhooks is None:
        return False
    # the validators read the runtimes from the cache (in a webhook process nothing else asks
    # for them; without their informers every TrainJob's runtime would be read live)
    for gvk in (CLUSTER_TRAINING_RUNTIME_GVK, TRAINING_RUNTIME_GVK):
        await context.manager.cache.get_informer(gvk)
    register_trainer(context.webhooks, await context.admission_runtimes(), context.level)
    if context.level.trainjob_defaulter is not None:
        context.webhooks.register(trainjob_defaulter.PATH, trainjob_defaulter.handler())
    return True


async def setup_jobset(context: SetupContext) -> bool:
    """The JobSet defaulting and validating webhooks, then the exclusive-placement Pod webhooks,
    with the steps of the level's JobSet release (``context.jobset_level.admission``)."""
    server = context.webhooks
    if server is None:
        return False
    client = context.manager.client
    steps = context.jobset_level.admission
    await steps.watch(context.manager.cache)
    server.register(jobset.MUTATE_PATH, jobset.mutating_handler(steps))
    server.register(jobset.VALIDATE_PATH, jobset.validation_handler(steps, client))
    server.register(pod.MUTATE_PATH, pod.mutating_handler(client, steps))
    server.register(pod.VALIDATE_PATH, pod.validation_handler(client, steps))
    return True
