"""The chaos run in its reduced form, inside ``make test`` (e2e tier), at each API level
(``[v2_1]``, ``[v2_3]``; one cluster per level): 40 TrainJobs on the level's mixed runtimes plus
plain JobSets and PodGroups, kube-apiserver SIGKILLed twice, etcd compacted with every watch
expired once, the leader SIGKILLed once, 15 s of proxy faults -- then every object in its state,
exactly one JobSet per TrainJob that keeps one with the right Jobs, no orphan, no duplicate, no
event storm, failover under lease duration + 5 s, the managers' metrics showing the retried
requests. At v2.3 also: runtime patches on the pods, deadlines expired once (Failed
``DeadlineExceeded``, the JobSet deleted and not made again), a patch changed while suspended
then resumed, PVCs made once and deleted with their JobSet, one runtime snapshot per TrainJob.
The full run is ``make test-chaos`` (test/chaos, docs/reliability.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "chaos"))

from harness import CHAOS_LEVELS, Params, level_id, run_and_check


@pytest.mark.parametrize("level", CHAOS_LEVELS, ids=[level_id(n) for n in CHAOS_LEVELS])
async def test_chaos_reduced(level: str, tmp_path: Path) -> None:
    params = Params(
        level=level,
        trainjobs=40,
        jobsets=6,
        podgroups=4,
        apiserver_restarts=2,
        compactions=1,
        leader_kills=1,
        fault_window_seconds=15,
        nodes=3,
        pod_run_seconds=3,
        pod_jitter_seconds=3,
        converge_timeout=300,
        gap_seconds=(1.0, 4.0),
        deadline_seconds=30,
        update_gap_seconds=(2.0, 6.0),
    )
    await run_and_check(params, tmp_path, tmp_path / "chaos.json")
