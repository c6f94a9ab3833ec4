"""The plumbing of ``conformance --level v2.3 --migrate-from v2.1`` (trainer/conformance/migrated.py):
which scenarios and documents it takes, how it reads migrate's refusals, what it reports, and the
options it refuses. The run itself is test/e2e/conformance/test_conformance_migrated.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from manager.envtest import Environment
from trainer.conformance import migrated
from trainer.conformance.cli import DEFAULT_SCENARIOS, parse_args
from trainer.conformance.migrated import (
    MigratedRun,
    MigratedScenario,
    Prepared,
    Refused,
    first_state,
    parse_refusals,
)
from trainer.conformance.runner import CONFORMANCE_API, Settings, load_scenario, scenario_files
from trainer.migrate.v2_3 import Refusal


def _step(**fields: object) -> dict[str, object]:
    return {"apiVersion": CONFORMANCE_API, "kind": "Step", **fields}


def test_first_state_is_the_documents_before_the_first_step_without_direct_requests() -> None:
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "r"},
    }
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "j"}}
    direct = {"apiVersion": CONFORMANCE_API, "kind": "WebhookRequest", "path": "/validate"}
    later = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "k"}}
    docs: list[dict[str, Any]] = [runtime, direct, job, _step(settle=True), _step(patch={}), later]
    kept, left_out = first_state(docs)
    assert kept == [runtime, job]
    assert left_out == 4  # the direct request, both steps and the TrainJob after them


def test_first_state_of_a_real_multi_step_v2_1_scenario() -> None:
    docs = load_scenario(DEFAULT_SCENARIOS / "trainjob-suspend-managedby.yaml")
    kept, left_out = first_state(docs)
    assert kept and all(d.get("apiVersion") != CONFORMANCE_API for d in kept)
    assert left_out == len(docs) - len(kept) > 0


def test_the_mode_takes_the_v2_1_scenarios() -> None:
    files = {p.name for p in scenario_files([DEFAULT_SCENARIOS], "v2.1")}
    assert "trainjob-torch-auto.yaml" in files  # `# levels: v2.1`
    assert "jobset-success-all.yaml" in files  # `# levels: v2.1 v2.3`
    assert not any(p.parent.name == "v2.3" for p in scenario_files([DEFAULT_SCENARIOS], "v2.1"))


def test_refusals_are_read_from_the_lines_migrate_prints() -> None:
    # what trainer/migrate/cli.py prints: a translation's refusal, a server dry run's refusal
    refusal = Refusal(
        "TrainJob", "c-x-1", "gpu-job", "spec.trainer.numProcPerNode", '"gpu" cannot be decided'
    )
    output = "\n".join(
        [
            "--- TrainJob c-x-1/ok (v2.1)",
            f"migrate: refused: {refusal}",
            "migrate: refused: ClusterTrainingRuntime wide: the API server refuses the update: 422; nothing was changed",
            "migrate: refused: the installed TrainJob CRD is v2.1's (it prunes spec.runtimePatches): ...",
            "migrate: 2 refusal(s) in 2 object(s): nothing was changed",
        ]
    )
    found = parse_refusals(output)
    assert found == [
        Refused("TrainJob", "c-x-1/gpu-job", 'spec.trainer.numProcPerNode: "gpu" cannot be decided'),
        Refused("ClusterTrainingRuntime", "wide", "the API server refuses the update: 422"),
    ]
    assert (found[0].namespace, found[0].name) == ("c-x-1", "gpu-job")
    assert (found[1].namespace, found[1].name) == (None, "wide")


def test_a_scenario_reports_its_own_refusals_namespaced_and_cluster_scoped(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: ClusterTrainingRuntime\nmetadata: {name: wide}\n"
        "---\napiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: j}\n"
    )
    refused = [
        Refused("TrainJob", "c-s-1/j", "spec.x: no"),
        Refused("TrainJob", "c-other-1/j", "spec.x: no"),
        Refused("ClusterTrainingRuntime", "wide", "spec.y: no"),
        Refused("ClusterTrainingRuntime", "elsewhere", "spec.y: no"),
    ]
    scenario = MigratedScenario(path, "c-s-1", Settings(), refused, None)
    assert scenario.docs == []  # nothing is created again: the objects are on the cluster
    mine = [r for r in refused if r.namespace == scenario.namespace or scenario._cluster_doc(r)]
    assert [str(r) for r in mine] == [
        "TrainJob c-s-1/j: spec.x: no",
        "ClusterTrainingRuntime wide: spec.y: no",
    ]


def test_the_report_names_left_out_steps_admission_refusals_and_migrate_refusals(tmp_path: Path) -> None:
    env = Environment(tmp_path / "env")
    prepared = Prepared(env)
    prepared.left_out = {"a": 3, "b": 0}
    prepared.created = {"a": [], "b": ["TrainJob/bad: denied"]}
    prepared.refused = [Refused("TrainJob", "c-a-1/j", "spec.x: no")]
    prepared.second_output = "migrate: nothing to change\n"
    lines = MigratedRun(prepared, prepared, [Path("a.yaml"), Path("b.yaml")], {"c": "no state"}).lines()
    assert lines == [
        "migrated c: left out: no state",
        "migrated a: 3 document(s) not applied (later steps, direct requests: first state only)",
        "migrated b: 1 refused by v2.1's admission (not on a v2.1 cluster)",
        "migrate refused (left out): TrainJob c-a-1/j: spec.x: no",
        "migrate: 1 object(s) refused and left out; second run: migrate: nothing to change",
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--migrate-from", "v2.1", "--level", "v2.1"],
            "--migrate-from v2.1 --level v2.1: supported: --migrate-from v2.1 --level v2.3",
        ),
        (
            [
                "--migrate-from",
                "v2.1",
                "--level",
                "v2.3",
                "--kubeconfig-ours",
                "a",
                "--kubeconfig-theirs",
                "b",
            ],
            "--migrate-from runs on local clusters only",
        ),
        (
            ["--migrate-from", "v2.1", "--level", "v2.3", "--feature-gates", "TrainJobStatus=true"],
            "--migrate-from takes no --feature-gates",
        ),
    ],
)
def test_options_the_mode_refuses(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_the_mode_parses() -> None:
    args = parse_args(["--level", "v2.3", "--migrate-from", "v2.1", "x.yaml"])
    assert (args.level, args.migrate_from, args.paths) == ("v2.3", "v2.1", [Path("x.yaml")])
    assert ("v2.1", "v2.3") in migrated.MIGRATIONS


def test_dump_writes_both_sides_records(tmp_path: Path) -> None:
    # --dump in this mode too: the migrated records of each side, as for any scenario
    from trainer.conformance.cli import dump
    from trainer.conformance.runner import ScenarioResult

    result = ScenarioResult(
        "s", [], 1, 0, [], {"migrate/refused": []}, {"migrate/refused": ["TrainJob <ns>/j: x"]}
    )
    dump(tmp_path / "d", result)
    assert (tmp_path / "d" / "s.ours.json").read_text().strip().startswith("{")
    assert "TrainJob <ns>/j: x" in (tmp_path / "d" / "s.theirs.json").read_text()
    dump(None, result)  # no --dump: nothing written


def test_a_file_whose_first_state_is_no_state_says_why_it_is_left_out(tmp_path: Path) -> None:
    path = DEFAULT_SCENARIOS / "jobset-failure-ignore-max-restarts.yaml"
    assert migrated.left_out_reason(path) == (
        "its first state restarts for ever (the later steps stop it), no state to compare"
    )
    assert scenario_files([path], "v2.1") == [path]  # still a v2.1 (and v2.3) scenario
    plain = tmp_path / "p.yaml"
    plain.write_text(
        "# levels: v2.1\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n# migrate-from: left out: x\n"
    )
    assert migrated.left_out_reason(plain) is None  # only a header line counts
