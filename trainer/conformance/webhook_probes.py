"""Wait until the API server calls the shipped admission webhooks (``config/webhook``).

A Validating/MutatingWebhookConfiguration takes effect when the API server's admission informer
has it, a moment after it is written: objects created before that pass unchecked (a JobSet
without its defaults, a runtime the validator would refuse). For each configuration this sends
one dry-run create that one of its webhooks refuses or mutates, in the given namespace, until the
answer shows that webhook acted (``Environment.wait_webhook_effective``). The probes are refused
or mutated by the Go originals and by this repository's webhooks alike. The TrainJob defaulter's
probe (level v2.3: a TrainJob whose runtime patch gets its ``time``) names the shipped
``torch-distributed`` runtime, so it is sent once the runtimes are applied (``needs_runtimes``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from manager.envtest import Environment
from manager.envtest.errors import EnvtestError
from trainer.api import jobset_constants as jc
from trainer.api import trainer_constants as tc

Json = dict[str, Any]

CONFIGURATION_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


@dataclass(frozen=True)
class Probe:
    """A dry-run create at ``plural`` of the namespace that the webhook ``hook`` refuses (or,
    with ``mutated``, mutates so that ``mutated(answer)`` holds)."""

    hook: str
    api_version: str
    plural: str
    body: Callable[[str], Json]
    mutated: Callable[[Any], bool] | None = None
    needs_runtimes: bool = False
    """The probe names a shipped runtime: it is sent once the runtimes are applied."""

    def path(self, namespace: str) -> str:
        return f"/apis/{self.api_version}/namespaces/{namespace}/{self.plural}"


def _jobset(namespace: str, **spec: Any) -> Json:
    pod = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
    return {
        "apiVersion": jc.API_VERSION,
        "kind": jc.KIND,
        "metadata": {"generateName": "webhook-probe-", "namespace": namespace},
        "spec": {
            "replicatedJobs": [
                {"name": "w", "replicas": 1, "template": {"spec": {"template": {"spec": pod}}}}
            ],
            **spec,
        },
    }


def _invalid_runtime(namespace: str) -> Json:
    """Two replicas of the trainer's replicated job: "always must be 1"."""
    return {
        "apiVersion": f"{tc.GROUP}/{tc.VERSION}",
        "kind": tc.TrainingRuntimeKind,
        "metadata": {"generateName": "webhook-probe-", "namespace": namespace},
        "spec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": tc.Node,
                            "replicas": 2,
                            "template": {
                                "metadata": {"labels": {tc.LabelTrainJobAncestor: tc.AncestorTrainer}},
                                "spec": {
                                    "template": {
                                        "spec": {"containers": [{"name": tc.Node, "image": "busybox"}]}
                                    }
                                },
                            },
                        }
                    ]
                }
            }
        },
    }


def _defaulted(answer: Any) -> bool:
    return bool(isinstance(answer, dict) and (answer.get("spec") or {}).get("successPolicy"))


PROBE_RUNTIME = "torch-distributed"
"""The shipped ClusterTrainingRuntime the TrainJob defaulter's probe names (at every level)."""


def _trainjob_with_patch(namespace: str) -> Json:
    """A TrainJob with one runtime patch and no ``time``: the defaulter stamps it."""
    return {
        "apiVersion": f"{tc.GROUP}/{tc.VERSION}",
        "kind": tc.TrainJobKind,
        "metadata": {"generateName": "webhook-probe-", "namespace": namespace},
        "spec": {
            "runtimeRef": {"name": PROBE_RUNTIME},
            "suspend": True,
            "runtimePatches": [{"manager": "conformance.trainer.kubeflow.org/probe"}],
        },
    }


def _patch_stamped(answer: Any) -> bool:
    patches = (answer.get("spec") or {}).get("runtimePatches") if isinstance(answer, dict) else None
    return bool(patches and isinstance(patches[0], dict) and patches[0].get("time"))


PROBES = (
    Probe(
        "validator.trainingruntime.trainer.kubeflow.org",
        f"{tc.GROUP}/{tc.VERSION}",
        "trainingruntimes",
        _invalid_runtime,
    ),
    # A JobSet without a success policy: the defaulter sets {operator: All}.
    Probe("mjobset.kb.io", jc.API_VERSION, "jobsets", _jobset, mutated=_defaulted),
    # A success policy naming a replicated job the JobSet does not have.
    Probe(
        "vjobset.kb.io",
        jc.API_VERSION,
        "jobsets",
        lambda ns: _jobset(ns, successPolicy={"operator": "All", "targetReplicatedJobs": ["does-not-exist"]}),
    ),
    # Level v2.3: the TrainJob defaulter stamps a runtime patch's time.
    Probe(
        "defaulter.trainjob.trainer.kubeflow.org",
        f"{tc.GROUP}/{tc.VERSION}",
        "trainjobs",
        _trainjob_with_patch,
        mutated=_patch_stamped,
        needs_runtimes=True,
    ),
)


def configurations(paths: Iterable[Path]) -> list[Json]:
    """The webhook configurations in the YAML files ``paths``."""
    docs: list[Json] = []
    for path in paths:
        docs += [
            d
            for d in yaml.safe_load_all(path.read_text())
            if isinstance(d, dict) and d.get("kind") in CONFIGURATION_KINDS
        ]
    return docs


def probe_for(configuration: Mapping[str, Any]) -> Probe:
    """The probe of one of the configuration's webhooks (a shipped one, under any object name)."""
    hooks = {hook["name"] for hook in configuration.get("webhooks") or []}
    for probe in PROBES:
        if probe.hook in hooks:
            return probe
    raise EnvtestError(
        f"no webhook probe for {configuration['kind']} {configuration['metadata']['name']} "
        f"(webhooks {sorted(hooks)}): add one to trainer/conformance/webhook_probes.py"
    )


def needs_runtimes(configuration: Mapping[str, Any]) -> bool:
    """Whether the configuration's probe names a shipped runtime (wait for it after them)."""
    return probe_for(configuration).needs_runtimes


async def wait_webhooks_effective(
    env: Environment, docs: Iterable[Mapping[str, Any]], namespace: str, *, timeout: float = 60.0
) -> None:
    """Return once the API server calls every configuration in ``docs`` for ``namespace``
    (their namespaceSelector must match it) and its webhook server answers."""
    for doc in docs:
        probe = probe_for(doc)
        await env.wait_webhook_effective(
            probe.path(namespace),
            probe.body(namespace),
            denied_by=None if probe.mutated else probe.hook,
            mutated=probe.mutated,
            timeout=timeout,
        )
