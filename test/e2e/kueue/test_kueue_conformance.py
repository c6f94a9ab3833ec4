"""The conformance runner with Kueue in front of each side (``conformance --kueue``), at each level.

Two full local clusters, one served by this manager, one by the Go managers of the level, each
with the level's Kueue release (v0.15.0 at v2.1, v0.17.0 at v2.3): the scenarios of
``test/conformance/kueue`` (TrainJobs and plain JobSets admitted into quota, preempted by a higher
priority, admitted again, deleted), every step's end state compared object by object (JobSets,
Jobs, pods, TrainJobs, Kueue's Workloads, events). The only differences are T-13's (listed): the
Go trainer's apply of a preempted TrainJob's JobSet is refused until Kueue admits it again. Not
in ``make test`` (two clusters and two Kueues per level: minutes); ``make test-kueue`` and
``make conformance-kueue`` run it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from kueuee2e import KUEUE_LEVELS, full_only

from trainer.conformance.cli import KUEUE_SCENARIOS, main


@full_only
@pytest.mark.parametrize("level", KUEUE_LEVELS, ids=[n.replace(".", "_") for n in KUEUE_LEVELS])
def test_kueue_scenarios_have_no_unlisted_difference(
    level: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--kueue", "--level", level, "--nodes", "3", "--show-listed", "--dump", str(tmp_path)])
    captured = capsys.readouterr()
    out = captured.out
    print(out)
    summary = [line for line in out.splitlines() if line.startswith("conformance: compared")]
    assert summary, out + captured.err[-3000:]  # no summary: the run's reason is on stderr
    scenarios = len(list(KUEUE_SCENARIOS.glob("*.yaml")))
    counts = re.search(r"compared (\d+) objects and (\d+) admission answers in (\d+) scenarios", summary[0])
    assert counts and int(counts[1]) > 150 and int(counts[3]) == scenarios, summary[0]
    # Kueue's Workloads were compared at every step, on both sides
    for side in ("ours", "theirs"):
        records = json.loads((tmp_path / f"trainjob-preemption.{side}.json").read_text())
        admitted = records["settle-2/Workload/trainjob-a-<hash>"]["status"]["conditions"]
        assert any(c["type"] == "Admitted" and c["status"] == "True" for c in admitted), admitted
        preempted = records["settle-4/Workload/trainjob-a-<hash>"]["status"]["conditions"]
        assert any(c["type"] == "Preempted" and c["status"] == "True" for c in preempted), preempted
    # the Go trainer's T-13 refusals, listed, once a and b are preempted
    assert "[listed T-13] trainjob-preemption: settle-4/JobSet/a" in out, out
    assert code == 0, out
