"""Admission fuzzing in the fast tier: the fuzzer's reviews against the webhook server in process, at each API level.

The same strategies as the live fuzz test (``admission_fuzz``: valid, near-valid and hostile
TrainJobs, TrainingRuntimes, ClusterTrainingRuntimes, JobSets and Pods of the level on every path
it serves, with UPDATEs, DELETEs and hostile envelopes) are POSTed over HTTPS to a
``WebhookServer`` on which the product's own ``setup_trainer`` and ``setup_jobset`` registered
the level's handlers (v2.1: seven paths; v2.3: eight, the TrainJob defaulter and JobSet v0.12.0's
steps among them); the TrainJob webhook resolves runtimes through a fake API holding the level's
runtimes (``FuzzLevel.runtimes``). Every answer must pass ``check_answer`` (HTTP 200, the uid
echoed, never 500, a denial naming the field with a code the level's Go webhook gives) and the
server must log no handler failure. ``FUZZ_UNIT_EXAMPLES`` sets the count per level (default 100,
a few seconds each on a quiet machine; ``FUZZ_SEED`` another sequence); the live test
(``make test-fuzz``: 10,000) also checks the log of the whole product and its memory.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import admission_fuzz as af
import pytest
from trainer_unit_fixtures import fake_client

from manager.envtest.certs import TinyCA
from manager.scheme import GroupVersionKind
from manager.testing.fake import FakeClient
from manager.webhook import WebhookServer
from trainer import levels
from trainer.runtime.context import SetupContext
from webhooks import setup_jobset, setup_trainer

sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))  # the generator copies 500-level nests
EXAMPLES = int(os.environ.get("FUZZ_UNIT_EXAMPLES", "100"))
NAMESPACE = "fuzz"


class Failures(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class CacheStandIn:
    """The fake API as the manager's cache: the informers the webhooks' steps ask for are there."""

    def __init__(self, client: FakeClient) -> None:
        self.client = client

    async def get_informer(self, gvk: GroupVersionKind) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


@pytest.fixture(params=list(af.LEVELS.values()), ids=lambda level: level.id)
def fuzz_level(request: pytest.FixtureRequest) -> af.FuzzLevel:
    level: af.FuzzLevel = request.param
    return level


@pytest.fixture
async def server(tmp_path: Path, fuzz_level: af.FuzzLevel) -> AsyncIterator[tuple[int, TinyCA]]:
    ca = TinyCA("fuzz-unit-ca")
    ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        tmp_path / "tls.crt", tmp_path / "tls.key"
    )
    level = levels.get(fuzz_level.name)
    client = fake_client(fuzz_level.runtimes())
    manager = SimpleNamespace(cache=CacheStandIn(client), api_reader=client, client=client, mapper=None)
    webhooks = WebhookServer(host="127.0.0.1", port=0, cert_dir=tmp_path)
    context = SetupContext(manager, webhooks, level=level.runtime, jobset_level=level.jobset)  # type: ignore[arg-type]
    assert await setup_trainer(context) and await setup_jobset(context)
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
    seen: dict[str, Any] = {"paths": set(), "codes": set()}

    def tally(path: str, review: Any, response: Any) -> None:
        seen["paths"].add(path)
        seen["codes"].add((response.get("status") or {}).get("code", 200))

    af.fuzz_webhook_server(port, ca.cert_pem, NAMESPACE, EXAMPLES, tally, level)
    return seen


async def test_fuzzed_reviews_get_controller_runtime_answers_in_process(
    fuzz_level: af.FuzzLevel, server: tuple[int, TinyCA]
) -> None:
    failures = Failures()
    logging.getLogger().addHandler(failures)
    try:
        seen = await asyncio.to_thread(fuzz, fuzz_level, *server)
    finally:
        logging.getLogger().removeHandler(failures)
    assert not failures.records, [r.getMessage() for r in failures.records[:3]]
    assert len(seen["paths"]) >= 5 and {200, 400, 403} <= seen["codes"], seen
