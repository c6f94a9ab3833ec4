"""Micro-benchmark: the JobSet side of one suspended ``torch-distributed`` TrainJob (``make bench``).

Why: in the suspended 1,000 TrainJob burst (test/bench/burst.py) the JobSet controller was the
stage the Jobs waited behind (Jobs p99 1.64x the Go managers', docs/bench.md). Per JobSet it
serves two admission calls (defaulting, validation) and reconciles once for the JobSet and once
per watch event its writes cause (the Service, the Job, its own status). This runs that sequence
on the fake client with the JobSet the runtime builds and prints the CPU per JobSet and the
writes; it fails if a JobSet costs more writes than the burst allows: a Service, a Job, one
status PUT (the created Job already counted in it), one Event, and nothing on the later passes.
"""

from __future__ import annotations

import asyncio
import copy
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "runtime"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "jobset"))

from jsfixtures import Events, RecordingClient
from runtime_fixtures import FakeReader, RecordingIndexer, trainjob

from manager import Request
from manager.client.objects import to_dict
from manager.webhook.admission import decode_review, encode_review
from trainer.controllers.jobset.reconciler import JobSetReconciler
from trainer.runtime.registry import CLUSTER_TRAINING_RUNTIME_KEY, new_runtimes
from webhooks import jobset as jobset_webhooks

Json = dict[str, Any]
RUNTIME = Path(__file__).resolve().parents[2] / "config" / "runtimes" / "torch-distributed.yaml"
ROUNDS = 200
# Far above what one core needs (about 1 ms on the 2-core machine), so only a regression fails.
BUDGET_MS_PER_JOBSET = 20.0

pytestmark = pytest.mark.bench


def built_jobset(name: str) -> Json:
    runtime = yaml.safe_load(RUNTIME.read_text())
    for item in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        item.setdefault("groupName", "default")
        item.setdefault("replicas", 1)
    tj = trainjob(name=name, runtime="torch-distributed", kind="ClusterTrainingRuntime", suspend=True)

    async def build() -> list[Json]:
        runtimes = await new_runtimes(FakeReader([runtime]), RecordingIndexer())
        return [to_dict(o) for o in await runtimes[CLUSTER_TRAINING_RUNTIME_KEY].new_objects(tj)]

    objects = asyncio.run(build())
    [js] = [o for o in objects if o["kind"] == "JobSet"]
    return js


def review(js: Json) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u",
                "kind": {"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"},
                "resource": {"group": "jobset.x-k8s.io", "version": "v1alpha2", "resource": "jobsets"},
                "operation": "CREATE",
                "name": js["metadata"]["name"],
                "namespace": js["metadata"]["namespace"],
                "object": js,
            },
        }
    )


async def admit(js: Json) -> Json:
    """The defaulting then the validating webhook, as the API server calls them; the defaulted JobSet."""
    from manager.webhook import jsonpatch

    body = review(js)
    api_version, req = decode_review(body)
    answer = await jobset_webhooks.mutating_handler()(req)
    encode_review(api_version, req.uid, answer)
    assert answer.allowed
    defaulted = jsonpatch.apply(copy.deepcopy(js), answer.patches)
    api_version, req = decode_review(review(defaulted))
    verdict = await jobset_webhooks.validation_handler()(req)
    encode_review(api_version, req.uid, verdict)
    assert verdict.allowed, verdict.message
    return defaulted


async def one_jobset(js: Json) -> tuple[RecordingClient, Events]:
    client = RecordingClient(await admit(js))
    events = Events()
    reconciler = JobSetReconciler(client, events)
    req = Request(js["metadata"]["namespace"], js["metadata"]["name"])
    await reconciler.reconcile(req)  # the JobSet's ADDED event
    for _ in range(3):  # the Service's and the Job's ADDED, the JobSet's own status MODIFIED
        await reconciler.reconcile(req)
    return client, events


def test_bench_suspended_jobset_pipeline() -> None:
    js = built_jobset("burst-00001")

    async def run() -> tuple[RecordingClient, Events, float]:
        client, events = await one_jobset(js)  # warm-up, and the writes checked below
        start = time.process_time()
        for _ in range(ROUNDS):
            await one_jobset(js)
        return client, events, time.process_time() - start

    client, events, cpu = asyncio.run(run())
    per_jobset_ms = cpu / ROUNDS * 1000
    writes = {verb: n for verb, n in client.requests.items() if verb in ("create", "update", "status.update")}
    print(
        f"\nsuspended torch-distributed JobSet: {per_jobset_ms:.2f} ms CPU (2 admissions, 4 reconciles), {writes}"
    )
    assert client.names("Job") == ["burst-00001-node-0"]
    assert client.names("Service") == ["burst-00001"]
    assert writes == {"create": 2, "status.update": 1}
    assert events.items == [("Normal", "SuspendedJobs", "jobset is suspended")]
    stored = client.stored("JobSet", "burst-00001")
    assert stored is not None
    assert [s["suspended"] for s in stored["status"]["replicatedJobsStatus"]] == [1]
    assert per_jobset_ms < BUDGET_MS_PER_JOBSET
