"""``conformance --level v2.3 --migrate-from v2.1`` on a few v2.1 scenarios (docs/conformance.md).

Two full local clusters (KWOK). On each: a v2.1 cluster served by our v2.1 manager holding the
first state of every file given, the manager stopped, the bridge CRDs, ``migrate --to v2.3``
(our command, the same on both sides), a second run that changes nothing, v2.3's CRDs; then our
v2.3 manager on one, Go trainer v2.3.0 + jobset v0.12.0 on the other, and what they make of the
migrated objects compared. The files: a suspended TrainJob whose later steps are v2.1 updates
(``trainjob-suspend-managedby``: first state only), torch with spec.labels/annotations and env
overrides (``trainjob-torch-int``), and ``migrate/refused.yaml``: two TrainJobs migrate cannot
translate (refused by name and field, left out) next to one it translates.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from trainer.conformance.cli import DEFAULT_SCENARIOS, main

HERE = Path(__file__).resolve().parent
FILES = (
    DEFAULT_SCENARIOS / "trainjob-suspend-managedby.yaml",
    DEFAULT_SCENARIOS / "trainjob-torch-int.yaml",
    HERE / "migrate" / "refused.yaml",
)


def test_migrated_v2_1_scenarios_reconcile_as_go_v2_3_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = tmp_path / "dump"
    code = main(
        ["--level", "v2.3", "--migrate-from", "v2.1", "--nodes", "3", "--dump", str(dump), *map(str, FILES)]
    )
    captured = capsys.readouterr()
    out = captured.out
    print(out)
    summary = [line for line in out.splitlines() if line.startswith("conformance: compared")]
    assert summary, out + captured.err[-3000:]  # no summary: the run's reason is on stderr
    counts = re.search(r"compared (\d+) objects and \d+ admission answers in (\d+) scenarios", summary[0])
    assert counts and int(counts[1]) > 20 and int(counts[2]) == len(FILES), summary[0]

    # the refusals, by name and field, and left out
    refused = [line for line in out.splitlines() if line.startswith("migrate refused (left out): ")]
    assert any(
        "TrainJob c-refused-" in r and "/gpu-word-no-gpu: spec.trainer.numProcPerNode" in r for r in refused
    ), out
    assert any("/override-missing-container: spec.podTemplateOverrides" in r for r in refused), out
    assert "migrate: 2 object(s) refused and left out; second run: migrate: nothing to change" in out, out
    assert (
        "migrated trainjob-suspend-managedby: 2 document(s) not applied (later steps, direct requests: first state only)"
        in out
    ), out

    # what was compared: the translated TrainJob reconciled by both v2.3 managers
    for side in ("ours", "theirs"):
        records = json.loads((dump / f"refused.{side}.json").read_text())
        assert "final/TrainJob/gpu-word-no-gpu" not in records
        translated = records["final/TrainJob/translated"]
        patches = translated["spec"]["runtimePatches"]
        assert [p["manager"] for p in patches] == ["trainer.kubeflow.org/migrate"], patches
        assert "podTemplateOverrides" not in translated["spec"]
        assert "final/JobSet/translated" in records, sorted(records)
        assert len(records["migrate/refused"]) == 2
    assert code == 0, out
