"""Cross-check of the TrainJob status computed from a JobSet (usage as in ``compare.py``)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from runtime_fixtures import FakeReader, RecordingIndexer, training_runtime, trainjob  # noqa: E402

from trainer.runtime.errors import RuntimeFailure  # noqa: E402
from trainer.runtime.registry import TRAINING_RUNTIME_KEY, new_runtimes  # noqa: E402

Json = dict[str, Any]
T1, T2 = "2025-01-02T03:04:05Z", "2025-02-03T04:05:06Z"


def condition(kind: str, status: str, reason: str, when: str = T1, generation: int | None = None) -> Json:
    out = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": f"{reason} message",
        "lastTransitionTime": when,
    }
    if generation is not None:
        out["observedGeneration"] = generation
    return out


def jobset(status: Json) -> Json:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "test-job", "namespace": "default"},
        "spec": {"replicatedJobs": []},
        "status": status,
    }


def with_status(status: Json) -> Json:
    tj = trainjob()
    tj["status"] = status
    return tj


def cases() -> list[tuple[str, Json, list[Json]]]:
    suspended = {"conditions": [condition("Suspended", "False", "Resumed")]}
    complete_before = {"conditions": [condition("Complete", "False", "Old", T2)]}
    return [
        ("no jobset", trainjob(), []),
        (
            "suspended only",
            trainjob(),
            [jobset({"conditions": [condition("Suspended", "True", "SuspendedJobs")]})],
        ),
        (
            "completed",
            trainjob(),
            [jobset({"conditions": [condition("Completed", "True", "AllJobsCompleted", generation=3)]})],
        ),
        (
            "failed",
            with_status(suspended),
            [jobset({"conditions": [condition("Failed", "True", "FailedJobs")]})],
        ),
        (
            "both true",
            with_status(suspended),
            [jobset({"conditions": [condition("Failed", "True", "F"), condition("Completed", "True", "C")]})],
        ),
        (
            "flip",
            with_status(complete_before),
            [jobset({"conditions": [condition("Completed", "True", "C", T1)]})],
        ),
        (
            "jobs",
            with_status(
                {
                    "jobsStatus": [
                        {"name": "old", "ready": 1, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
                    ]
                }
            ),
            [
                jobset(
                    {
                        "replicatedJobsStatus": [
                            {"name": "node", "ready": 2, "active": 2},
                            {"name": "x", "failed": 1},
                        ]
                    }
                )
            ],
        ),
        (
            "jobs removed",
            with_status(
                {
                    "jobsStatus": [
                        {"name": "old", "ready": 1, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
                    ]
                }
            ),
            [jobset({})],
        ),
    ]


async def ours(tj: Json, existing: list[Json]) -> Json:
    runtimes = await new_runtimes(FakeReader([training_runtime(), *existing]), RecordingIndexer())
    try:
        return await runtimes[TRAINING_RUNTIME_KEY].trainjob_status(tj) or {}
    except RuntimeFailure as failure:
        return {"error": failure.message}


def main(binary: str) -> int:
    items = cases()
    stdin = "".join(
        json.dumps({"mode": "status", "runtime": training_runtime(), "trainjob": tj, "existing": ex}) + "\n"
        for _, tj, ex in items
    )
    lines = subprocess.run(
        [binary], input=stdin, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    failed = 0
    for (name, tj, existing), line in zip(items, lines, strict=True):
        upstream, mine = json.loads(line), asyncio.run(ours(tj, existing))
        same = upstream == mine
        failed += not same
        print(("SAME " if same else "DIFF ") + name)
        if not same:
            print("    ours:    ", json.dumps(mine))
            print("    upstream:", json.dumps(upstream))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
