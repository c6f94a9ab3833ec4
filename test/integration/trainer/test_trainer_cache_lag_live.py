"""A burst of TrainJobs on a real API server: expected cache lag is no reconcile error."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from trainer_wrappers import RES4, runtime, trainjob, wrapper_rjobs

from manager.controller.reconcile import Request
from manager.metrics.registry import REGISTRY
from manager.scheme import GroupVersionKind
from manager.testing.eventually import eventually
from trainer.controllers.trainjob import CONTROLLER_NAME, TrainJobReconciler

Json = dict[str, Any]
TJ = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainJob")
JOBSET = GroupVersionKind("jobset.x-k8s.io", "v1alpha2", "JobSet")
COUNT = 50


@pytest.fixture
def failed_requests(monkeypatch: pytest.MonkeyPatch) -> list[Request]:
    """Every TrainJob request whose reconcile raised (what the controller counts as an error).

    Requested before ``trainer`` so the controller it builds calls this spy. The manager watches
    every namespace: TrainJobs that earlier tests left in namespaces being deleted (no namespace
    controller runs here) fail meanwhile, so the process-wide
    ``controller_runtime_reconcile_errors_total`` is no measure of this test's TrainJobs.
    """
    failed: list[Request] = []
    original = TrainJobReconciler.reconcile

    async def spy(self: TrainJobReconciler, req: Request) -> Any:
        seen.append(req)
        try:
            return await original(self, req)
        except Exception:
            failed.append(req)
            raise

    monkeypatch.setattr(TrainJobReconciler, "reconcile", spy)
    return failed


seen: list[Request] = []


def _reconciles() -> float:
    value = REGISTRY.get_sample_value(
        "controller_runtime_reconcile_total", {"controller": CONTROLLER_NAME, "result": "success"}
    )
    return value or 0.0


async def test_a_burst_of_trainjobs_reconciles_without_errors(
    failed_requests: list[Request], trainer: Any
) -> None:
    client, ns = trainer.client, trainer.namespace
    container = {"image": "test:runtime", "command": ["train"], "resources": RES4}
    await client.create(runtime("burst", ns, rjobs=wrapper_rjobs(container=container)))
    successes_before = _reconciles()

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

    def counted() -> None:
        # a reconcile is counted when it returns, a moment after its status write is visible
        assert _reconciles() - successes_before >= COUNT, _reconciles() - successes_before

    await eventually(counted, timeout=30, message=f"{COUNT} successful TrainJob reconciles counted")
    # the spy saw this test's reconciles (it can see a failure), and none of them failed
    assert sum(1 for req in seen if req.namespace == ns) >= COUNT
    errors = [req for req in failed_requests if req.namespace == ns]
    assert errors == [], f"cache lag after an apply surfaced as reconcile errors: {errors[:3]}"
