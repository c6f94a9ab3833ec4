"""A burst of TrainJobs on a real API server: expected cache lag is no reconcile error (issue 12)."""

from __future__ import annotations

import asyncio
from typing import Any

from trainer_wrappers import RES4, runtime, trainjob, wrapper_rjobs

from manager.metrics.registry import REGISTRY
from manager.scheme import GroupVersionKind
from manager.testing.eventually import eventually
from trainer.controllers.trainjob import CONTROLLER_NAME

Json = dict[str, Any]
TJ = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainJob")
JOBSET = GroupVersionKind("jobset.x-k8s.io", "v1alpha2", "JobSet")
COUNT = 50


def _errors() -> float:
    value = REGISTRY.get_sample_value(
        "controller_runtime_reconcile_errors_total", {"controller": CONTROLLER_NAME}
    )
    return value or 0.0


def _reconciles() -> float:
    value = REGISTRY.get_sample_value(
        "controller_runtime_reconcile_total", {"controller": CONTROLLER_NAME, "result": "success"}
    )
    return value or 0.0


async def test_a_burst_of_trainjobs_reconciles_without_errors(trainer: Any) -> None:
    client, ns = trainer.client, trainer.namespace
    container = {"image": "test:runtime", "command": ["train"], "resources": RES4}
    await client.create(runtime("burst", ns, rjobs=wrapper_rjobs(container=container)))
    errors_before, successes_before = _errors(), _reconciles()

    await asyncio.gather(
        *(client.create(trainjob(f"burst-{i}", ns, "burst", suspend=True)) for i in range(COUNT))
    )

    async def all_built() -> None:
        jobsets = await client.list(JOBSET, namespace=ns)
        assert len(jobsets) == COUNT, f"{len(jobsets)} JobSets of {COUNT}"
        for tj in await client.list(TJ, namespace=ns):
            conditions = (tj.get("status") or {}).get("conditions") or []
            assert [c["reason"] for c in conditions] == ["Suspended"], tj["metadata"]["name"]

    await eventually(all_built, timeout=120)
    await asyncio.sleep(1)  # the JobSets' own watch events reconcile every TrainJob once more
    assert _reconciles() - successes_before >= COUNT
    assert _errors() - errors_before == 0, "cache lag after an apply surfaced as a reconcile error"
