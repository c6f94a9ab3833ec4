"""Admission fuzzing of level v2.3's JobSet and Pod webhooks (JobSet v0.12.0's steps) in process.

The fuzzer's valid, near-valid and hostile JobSets and Pods (``admission_fuzz``, the strategies of
``test/unit/trainer/test_admission_fuzz_inprocess.py``) go to a ``WebhookServer`` serving the four
handlers with ``V0_12``'s steps: every answer is controller-runtime's (never a 500, a denial naming
the field or one of the field-less texts) and no handler failure is logged. ``FUZZ_UNIT_EXAMPLES``
sets the count (default 100).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import admission_fuzz as af
import pytest

from manager.envtest.certs import TinyCA
from manager.testing.fake import FakeClient
from manager.webhook import AdmissionRequest, AdmissionResponse, WebhookServer, allowed
from trainer.jobset.levels.v0_12 import V0_12
from webhooks import jobset as jobset_webhooks
from webhooks import pod as pod_webhooks
from webhooks import trainingruntime, trainjob, trainjob_defaulter

sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))  # the generator copies 500-level nests
EXAMPLES = int(os.environ.get("FUZZ_UNIT_EXAMPLES", "100"))
NAMESPACE = "fuzz"
JOBSET_PATHS = {
    jobset_webhooks.MUTATE_PATH,
    jobset_webhooks.VALIDATE_PATH,
    pod_webhooks.MUTATE_PATH,
    pod_webhooks.VALIDATE_PATH,
}

TRAINER_PATHS = (
    trainingruntime.CLUSTER_TRAINING_RUNTIME_PATH,
    trainingruntime.TRAINING_RUNTIME_PATH,
    trainjob.PATH,
    trainjob_defaulter.PATH,
)


async def allow(request: AdmissionRequest) -> AdmissionResponse:
    return allowed()


class Failures(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[int, TinyCA]]:
    ca = TinyCA("fuzz-v0-12-ca")
    ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        tmp_path / "tls.crt", tmp_path / "tls.key"
    )
    steps = V0_12.admission
    webhooks = WebhookServer(host="127.0.0.1", port=0, cert_dir=tmp_path)
    webhooks.register(jobset_webhooks.MUTATE_PATH, jobset_webhooks.mutating_handler(steps))
    webhooks.register(jobset_webhooks.VALIDATE_PATH, jobset_webhooks.validation_handler(steps, FakeClient()))
    webhooks.register(pod_webhooks.MUTATE_PATH, pod_webhooks.mutating_handler(FakeClient(), steps))
    webhooks.register(pod_webhooks.VALIDATE_PATH, pod_webhooks.validation_handler(FakeClient(), steps))
    for path in TRAINER_PATHS:  # the fuzzer also sends Trainer reviews: not under test here
        webhooks.register(path, allow)
    started = asyncio.Event()
    task = asyncio.create_task(webhooks.start(started))
    await asyncio.wait_for(started.wait(), 10)
    assert webhooks.bound_port is not None
    try:
        yield webhooks.bound_port, ca
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def fuzz(port: int, ca: TinyCA) -> dict[str, Any]:
    seen: dict[str, Any] = {"paths": set(), "codes": set(), "jobset_refusals": set()}

    def tally(path: str, review: Any, response: Any) -> None:
        if path in JOBSET_PATHS:
            code = (response.get("status") or {}).get("code", 200)
            seen["paths"].add(path)
            seen["codes"].add(code)
            if path == jobset_webhooks.VALIDATE_PATH and not response.get("allowed"):
                seen["jobset_refusals"].add(code)

    af.fuzz_webhook_server(port, ca.cert_pem, NAMESPACE, EXAMPLES, tally)
    return seen


async def test_fuzzed_jobsets_and_pods_get_v0_12_answers(server: tuple[int, TinyCA]) -> None:
    failures = Failures()
    logging.getLogger().addHandler(failures)
    try:
        seen = await asyncio.to_thread(fuzz, *server)
    finally:
        logging.getLogger().removeHandler(failures)
    assert not failures.records, [r.getMessage() for r in failures.records[:3]]
    assert seen["paths"] == JOBSET_PATHS and {200, 400} <= seen["codes"], seen
    # a JobSet the checks refuse is answered 422 (an ill-typed one 400), never v0.10.1's 403
    assert seen["jobset_refusals"] <= {400, 422}, seen
