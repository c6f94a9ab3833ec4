"""Admission fuzzing in the fast tier: the fuzzer's reviews against the webhook server in process.

The same strategies as the live fuzz test (``admission_fuzz``: valid, near-valid and hostile
TrainJobs, TrainingRuntimes, ClusterTrainingRuntimes, JobSets and Pods on all seven paths, with
UPDATEs, DELETEs and hostile envelopes) are POSTed over HTTPS to a ``WebhookServer`` serving the
product's handlers; the TrainJob webhook resolves runtimes through a fake API holding the shipped
``torch-distributed`` ClusterTrainingRuntime. Every answer must pass ``check_answer`` (HTTP 200,
the uid echoed, never 500, a denial naming the field) and the server must log no handler
failure. ``FUZZ_UNIT_EXAMPLES`` sets the count (default 100, about 10 s on a quiet machine; ``FUZZ_SEED`` another sequence); the live test
(``make test-fuzz``: 10,000) also checks the log of the whole product and its memory.
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
import yaml
from hypothesis import HealthCheck, Phase, given, seed, settings
from trainer_unit_fixtures import ClientReader, fake_client

from manager.envtest.certs import TinyCA
from manager.testing.fake import FakeClient
from manager.webhook import WebhookServer
from trainer.runtime.registry import new_runtimes
from webhooks import jobset as jobset_webhooks
from webhooks import pod as pod_webhooks
from webhooks import register_trainer

sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))  # the generator copies 500-level nests
ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = int(os.environ.get("FUZZ_UNIT_EXAMPLES", "100"))
NAMESPACE = "fuzz"


class Failures(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[int, TinyCA]]:
    ca = TinyCA("fuzz-unit-ca")
    ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        tmp_path / "tls.crt", tmp_path / "tls.key"
    )
    runtime = yaml.safe_load((ROOT / "config" / "runtimes" / "torch-distributed.yaml").read_text())
    runtimes = await new_runtimes(ClientReader(fake_client([runtime])), None)
    webhooks = WebhookServer(host="127.0.0.1", port=0, cert_dir=tmp_path)
    register_trainer(webhooks, runtimes)
    webhooks.register(jobset_webhooks.MUTATE_PATH, jobset_webhooks.mutating_handler())
    webhooks.register(jobset_webhooks.VALIDATE_PATH, jobset_webhooks.validation_handler())
    webhooks.register(pod_webhooks.MUTATE_PATH, pod_webhooks.mutating_handler(FakeClient()))
    webhooks.register(pod_webhooks.VALIDATE_PATH, pod_webhooks.validation_handler(FakeClient()))
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
    poster = af.Poster(port, ca.cert_pem)
    seen: dict[str, Any] = {"paths": set(), "codes": set()}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=os.environ.get("FUZZ_SEED") is None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    @given(af.admission_reviews(NAMESPACE))
    def one(drawn: tuple[str, Any]) -> None:
        path, review = drawn
        status, body = poster.post(path, af.encode(review))
        response = af.check_answer(review, status, body)
        seen["paths"].add(path)
        seen["codes"].add((response.get("status") or {}).get("code", 200))

    if os.environ.get("FUZZ_SEED"):
        one = seed(int(os.environ["FUZZ_SEED"]))(one)
    try:
        one()
    finally:
        poster.close()
    return seen


async def test_fuzzed_reviews_get_controller_runtime_answers_in_process(server: tuple[int, TinyCA]) -> None:
    failures = Failures()
    logging.getLogger().addHandler(failures)
    try:
        seen = await asyncio.to_thread(fuzz, *server)
    finally:
        logging.getLogger().removeHandler(failures)
    assert not failures.records, [r.getMessage() for r in failures.records[:3]]
    assert len(seen["paths"]) >= 5 and {200, 400, 403} <= seen["codes"], seen
