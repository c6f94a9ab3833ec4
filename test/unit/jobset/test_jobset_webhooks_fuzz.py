"""Admission fuzzing of the JobSet and Pod webhooks in process, with each API level's JobSet release:
v0.10.1's steps at level v2.1, v0.12.0's at level v2.3.

The fuzzer's valid, near-valid and hostile JobSets and Pods of the level (``admission_fuzz``; at
v2.3 JobSets with ``volumeClaimPolicies`` too) go only to the four JobSet and Pod paths of a
``WebhookServer`` serving the handlers with the level's ``AdmissionSteps``: every answer is
controller-runtime's (never a 500, a denial naming the field or one of the field-less texts, with
the code the level's Go webhook gives: a refused JobSet 403 at v0.10.1, 422 ``Invalid`` at
v0.12.0, an ill-typed one 400) and no handler failure is logged. ``FUZZ_UNIT_EXAMPLES`` sets the
count per level (default 100).
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
from manager.webhook import WebhookServer
from trainer import levels
from webhooks import jobset as jobset_webhooks
from webhooks import pod as pod_webhooks

sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))  # the generator copies 500-level nests
EXAMPLES = int(os.environ.get("FUZZ_UNIT_EXAMPLES", "100"))
NAMESPACE = "fuzz"


class Failures(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(params=list(af.LEVELS.values()), ids=lambda level: level.id)
def fuzz_level(request: pytest.FixtureRequest) -> af.FuzzLevel:
    level: af.FuzzLevel = request.param
    return level


@pytest.fixture
async def server(tmp_path: Path, fuzz_level: af.FuzzLevel) -> AsyncIterator[tuple[int, TinyCA]]:
    ca = TinyCA("fuzz-jobset-ca")
    ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        tmp_path / "tls.crt", tmp_path / "tls.key"
    )
    steps = levels.get(fuzz_level.name).jobset.admission
    webhooks = WebhookServer(host="127.0.0.1", port=0, cert_dir=tmp_path)
    webhooks.register(jobset_webhooks.MUTATE_PATH, jobset_webhooks.mutating_handler(steps))
    webhooks.register(jobset_webhooks.VALIDATE_PATH, jobset_webhooks.validation_handler(steps, FakeClient()))
    webhooks.register(pod_webhooks.MUTATE_PATH, pod_webhooks.mutating_handler(FakeClient(), steps))
    webhooks.register(pod_webhooks.VALIDATE_PATH, pod_webhooks.validation_handler(FakeClient(), steps))
    started = asyncio.Event()
    task = asyncio.create_task(webhooks.start(started))
    await asyncio.wait_for(started.wait(), 10)
    assert webhooks.bound_port is not None
    try:
        yield webhooks.bound_port, ca
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def fuzz(level: af.FuzzLevel, port: int, ca: TinyCA) -> dict[str, Any]:
    seen: dict[str, Any] = {"paths": set(), "codes": set(), "jobset_refusals": set()}

    def tally(path: str, review: Any, response: Any) -> None:
        code = (response.get("status") or {}).get("code", 200)
        seen["paths"].add(path)
        seen["codes"].add(code)
        if path == jobset_webhooks.VALIDATE_PATH and not response.get("allowed"):
            seen["jobset_refusals"].add(code)

    af.fuzz_webhook_server(port, ca.cert_pem, NAMESPACE, EXAMPLES, tally, level, af.JOBSET_PATHS)
    return seen


async def test_fuzzed_jobsets_and_pods_get_the_levels_answers(
    fuzz_level: af.FuzzLevel, server: tuple[int, TinyCA]
) -> None:
    failures = Failures()
    logging.getLogger().addHandler(failures)
    try:
        seen = await asyncio.to_thread(fuzz, fuzz_level, *server)
    finally:
        logging.getLogger().removeHandler(failures)
    assert not failures.records, [r.getMessage() for r in failures.records[:3]]
    assert seen["paths"] == af.JOBSET_PATHS and {200, 400} <= seen["codes"], seen
    # a JobSet the checks refuse is answered with the release's code (an ill-typed one 400)
    refusal = fuzz_level.refusals[jobset_webhooks.VALIDATE_PATH]
    assert refusal <= seen["jobset_refusals"] <= refusal | {400}, seen
