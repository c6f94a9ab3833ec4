"""The chaos run in its reduced form, inside ``make test`` (e2e tier): 40 TrainJobs on the mixed
runtimes plus plain JobSets and PodGroups, kube-apiserver SIGKILLed twice, etcd compacted with
every watch expired once, the leader SIGKILLed once, 15 s of proxy faults -- then every object in
its state, exactly one JobSet per TrainJob with the right Jobs, no orphan, no duplicate, no event
storm, failover under lease duration + 5 s, the managers' metrics showing the retried requests.
The full run is ``make test-chaos`` (test/chaos, docs/reliability.md)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "chaos"))

from harness import ChaosRun, Params, check, write


async def test_chaos_reduced(tmp_path: Path) -> None:
    params = Params(
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
    )
    fig = await ChaosRun(params, tmp_path).run()
    write(fig, tmp_path / "chaos.json")
    print(fig.table())
    check(fig, params)
