"""The reduced conformance set (CI): this manager against the Go originals, side by side.

Two full local clusters (KWOK), one served by ``python -m trainer``, one by the Go jobset v0.10.1
and trainer v2.1.0 managers (built from the Go module proxy on first use, cached). Any
difference in the objects, statuses, events or admission answers that is not a listed
divergence fails this test; the full set is ``make conformance``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from trainer.conformance.cli import DEFAULT_SCENARIOS, main

# One of each kind: JobSet success, failure rules and suspend/resume, TrainJobs on the torch and
# MPI runtimes, webhook rules through the API server, the Go typed round trip, and ill-typed
# objects sent straight to the webhook servers, and InOrder startup (deterministic now that KWOK
# keeps every pod Running for the harness's fixed run time before it succeeds).
REDUCED = (
    "jobset-success-all.yaml",
    "jobset-startup-in-order.yaml",
    "jobset-failure-rules.yaml",
    "jobset-suspend-resume.yaml",
    "trainjob-torch-auto.yaml",
    "trainjob-deepspeed-mpi.yaml",
    "webhook-jobset-invalid.yaml",
    "webhook-trainer-invalid.yaml",
    "webhook-jobset-pod-failure-policy.yaml",
    "webhook-direct-ill-typed.yaml",
)


def test_reduced_conformance_set_has_no_unlisted_difference(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(DEFAULT_SCENARIOS / name) for name in REDUCED]
    code = main(["--level", "v2.1", "--nodes", "3", *paths])
    captured = capsys.readouterr()
    out = captured.out
    print(out)
    summary = [line for line in out.splitlines() if line.startswith("conformance: compared")]
    # no summary: the comparison could not run; its reason is on stderr
    assert summary, out + captured.err[-3000:]
    # Something was compared on both sides: objects and admission answers.
    counts = re.search(r"compared (\d+) objects and (\d+) admission answers", summary[0])
    assert counts and int(counts[1]) > 50 and int(counts[2]) > 20, summary[0]
    assert code == 0, out


# Level v2.3 (jobset v0.12.0 + trainer v2.3.0 on the other side): the deadline across
# suspend/resume, two managers' runtimePatches and their order, JobSet volumeClaimPolicies, and
# v2.3's admission answers (the CRDs' and the webhooks', typed decoding and torchtune's rules, and
# the doubtful answers admission fuzzing met, sent straight to both webhook servers);
# and, with JobSet v0.12.0's three feature gates on on both sides (the Go jobset gets them in its
# own Configuration), RestartJob recreating one Job up to maxRestarts, in-place restart attempts
# from the pods' annotations, an elastic scale of a running JobSet, and each gate's webhook rules
# (docs/behaviour/jobset-v0.12.md §1.8-1.11, §2.7). One run for both, so CI starts one pair of
# clusters: the gates change nothing for objects that do not use the gated fields, and the full
# `make conformance` runs the other scenarios with the gates off.
REDUCED_V2_3 = (
    "deadline.yaml",
    "patches-two-managers.yaml",
    "jobset-volume-claim-policies.yaml",
    "invalid-inputs.yaml",
    "webhook-runtimes.yaml",
    "webhook-direct-fuzzed.yaml",
)
GATED_V2_3 = ("jobset-gate-restart-job.yaml", "jobset-gate-in-place-restart.yaml", "jobset-gate-elastic.yaml")
JOBSET_GATES = "RestartJob=true,InPlaceRestart=true,ElasticJobSet=true"


def test_reduced_v2_3_conformance_set_has_no_unlisted_difference(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    paths = [str(DEFAULT_SCENARIOS / "v2.3" / name) for name in (*REDUCED_V2_3, *GATED_V2_3)]
    code = main(
        ["--level", "v2.3", "--nodes", "3", "--feature-gates", JOBSET_GATES, "--dump", str(tmp_path), *paths]
    )
    captured = capsys.readouterr()
    out = captured.out
    print(out)
    summary = [line for line in out.splitlines() if line.startswith("conformance: compared")]
    assert summary, out + captured.err[-3000:]
    # The runner says on stderr which level each side ran (theirs: jobset v0.12.0 + trainer v2.3.0).
    said = [line for line in captured.err.splitlines() if "level v2.3: ours with --api-level=v2.3" in line]
    assert said and "v2.3.0" in said[0] and "v0.12.0" in said[0], captured.err[-3000:]
    counts = re.search(r"compared (\d+) objects and (\d+) admission answers in (\d+) scenarios", summary[0])
    assert (
        counts
        and int(counts[1]) > 70
        and int(counts[2]) > 20
        and int(counts[3]) == len(REDUCED_V2_3) + len(GATED_V2_3)
    ), summary[0]
    assert code == 0, out
    # the gates took effect on both sides (not two equal refusals): the failed Job was recreated
    # twice, counted, and its third failure reached maxRestarts
    for side in ("ours", "theirs"):
        records = json.loads((tmp_path / f"jobset-gate-restart-job.{side}.json").read_text())
        status = records["final/JobSet/per-job"]["status"]
        failing = next(s for s in status["replicatedJobsStatus"] if s["name"] == "failing")
        assert (failing.get("jobRestarts"), status["terminalState"]) == ([2], "Failed"), (side, status)
