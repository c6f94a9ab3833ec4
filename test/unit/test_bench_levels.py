"""The benchmarks at an API level (test/bench/bench_level.py): each scenario's ``--level`` and
what a level gives it (CRDs, webhooks, shipped runtimes, our ``--api-level``, the Go originals,
a TrainJob valid at it), and the report naming each figure's level. No cluster."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from bench_scripts import load

from manager.envtest.certs import TinyCA
from trainer import levels

ROOT = Path(__file__).resolve().parents[2]


bench_level = load("bench_level")
burst = load("burst")
floor = load("floor")
scale = load("scale")
admission = load("admission")
report = load("report")

SCENARIOS = {"burst": burst, "floor": floor, "scale": scale, "report": report}
V2_3 = levels.get("v2.3")
V2_1 = levels.get("v2.1")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_each_scenario_runs_the_default_level_unless_told(name: str) -> None:
    parser = SCENARIOS[name].parser()
    assert parser.parse_args([]).level == levels.DEFAULT.name == "v2.3"
    for level in levels.LEVELS:
        assert parser.parse_args(["--level", level]).level == level


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_level_that_does_not_exist_is_refused_naming_the_option(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        SCENARIOS[name].parser().parse_args(["--level", "v2.2"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument --level: invalid choice: 'v2.2'" in err
    assert "'v2.1'" in err and "'v2.3'" in err


def test_admission_runs_the_levels_named_else_every_level() -> None:
    parser = admission.parser()
    assert parser.parse_args([]).level is None  # main: every level, v2.1 then v2.3
    assert parser.parse_args(["--level", "v2.3"]).level == ["v2.3"]
    assert parser.parse_args(["--level", "v2.1", "--level", "v2.3"]).level == ["v2.1", "v2.3"]


TRAINJOB_CRD = "trainjobs.trainer.kubeflow.org"
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _trainjob_crd(paths: list[Path]) -> dict[str, Any]:
    """The TrainJob CRD among the CRD files and directories ``paths`` (named after it, as
    controller-gen names them: ``<group>_trainjobs.yaml``)."""
    for path in paths:
        files = sorted(path.rglob("*_trainjobs.yaml")) if path.is_dir() else [path]
        for file in files:
            doc = _crd_file(file)
            if doc is not None:
                return doc
    raise AssertionError(f"no TrainJob CRD in {paths}")


@functools.cache
def _crd_file(file: Path) -> dict[str, Any] | None:
    for doc in yaml.load_all(file.read_text(), Loader=LOADER):
        if isinstance(doc, dict) and doc.get("metadata", {}).get("name") == TRAINJOB_CRD:
            return doc
    return None


def test_v2_3_gives_the_level_crds_runtimes_manager_flag_and_go_originals(tmp_path: Path) -> None:
    at = bench_level.get("v2.3")
    assert at.api is V2_3 and at.harness_level is V2_3
    # the cluster's CRDs: the level's, whose TrainJob CRD the manager's start-up check accepts
    crds = at.crds()
    assert crds[0] == ROOT / "config" / "overlays" / "v2.3" / "crd"
    assert levels.of_trainjob_crd(_trainjob_crd(crds)) is V2_3
    # the runtimes Trainer v2.3.0 ships, as `make deploy LEVEL=v2.3` applies them
    runtimes = at.runtimes()
    assert {p.parent for p in runtimes} == {ROOT / "config" / "overlays" / "v2.3" / "runtimes"}
    assert {p.stem for p in runtimes} >= {"torch-distributed", "jax-distributed", "xgboost-distributed"}
    # our manager at the level, the Go originals of the level
    ours = at.our_manager(TinyCA("bench-level-test"), tmp_path / "ours", tmp_path / "kubeconfig")
    assert "--api-level=v2.3" in ours.process.argv
    go = at.originals()
    assert (go.jobset.module, go.jobset.version) == ("sigs.k8s.io/jobset", "v0.12.0")
    assert (go.trainer.module, go.trainer.version) == ("github.com/kubeflow/trainer/v2", "v2.3.0")
    # the level's webhooks: a TrainJob create goes through the defaulter, then the validator
    names = {d["metadata"]["name"] for d in at.our_configurations()}
    assert "defaulter.trainer.kubeflow.org" in names
    assert at.trainjob_webhooks() == [
        "defaulter.trainjob.trainer.kubeflow.org",
        "validator.trainjob.trainer.kubeflow.org",
    ]
    assert at.result_name("burst-running", ".json") == "burst-running-v2.3.json"


def test_v2_1_is_started_as_every_earlier_benchmark(tmp_path: Path) -> None:
    at = bench_level.get("v2.1")
    assert at.api is V2_1 and at.harness_level is None  # the harness's config/crd, config/webhook
    assert at.crds() == [ROOT / "config" / "crd"]
    assert levels.of_trainjob_crd(_trainjob_crd(at.crds())) is V2_1
    assert {p.parent for p in at.runtimes()} == {ROOT / "config" / "runtimes"}
    ours = at.our_manager(TinyCA("bench-level-test"), tmp_path / "ours", tmp_path / "kubeconfig")
    assert "--api-level=v2.1" in ours.process.argv
    go = at.originals()
    assert (go.jobset.version, go.trainer.version) == ("v0.10.1", "v2.1.0")
    assert at.trainjob_webhooks() == ["validator.trainjob.trainer.kubeflow.org"]


def _schema_allows(schema: dict[str, Any], value: Any, path: str) -> None:
    if not isinstance(value, dict):
        return
    props = schema.get("properties") or {}
    for key, inner in value.items():
        assert key in props, f"{path}.{key} is not in the level's TrainJob schema"
        _schema_allows(props[key], inner, f"{path}.{key}")


@pytest.mark.parametrize("name", list(levels.LEVELS))
def test_the_benchmark_trainjob_is_valid_at_its_level_and_names_a_runtime_it_ships(name: str) -> None:
    at = bench_level.get(name)
    trainjob = at.trainjob("t", "default", True)
    crd = _trainjob_crd(at.crds())
    schema = next(v for v in crd["spec"]["versions"] if v.get("storage"))["schema"]["openAPIV3Schema"]
    _schema_allows(schema["properties"]["spec"], trainjob["spec"], "spec")
    assert trainjob["apiVersion"] == f"{crd['spec']['group']}/{crd['spec']['versions'][0]['name']}"
    shipped = {
        doc["metadata"]["name"]
        for path in at.runtimes()
        for doc in yaml.safe_load_all(path.read_text())
        if isinstance(doc, dict) and doc.get("kind") == "ClusterTrainingRuntime"
    }
    assert trainjob["spec"]["runtimeRef"]["name"] in shipped
    # the scenarios create exactly this TrainJob
    assert burst.trainjob("t", True, at) == at.trainjob("t", burst.NAMESPACE, True)


def test_admission_reports_the_webhooks_of_its_level() -> None:
    v23 = [label for label, _get in admission._figures("v2.3")]
    v21 = [label for label, _get in admission._figures("v2.1")]
    assert any("defaulter.trainjob" in label for label in v23)
    assert not any("defaulter.trainjob" in label for label in v21)
    assert any("validator.trainjob" in label for label in v21)


def _side(name: str, level: str | None) -> dict[str, Any]:
    lat = {"p50": 1.0, "p99": 2.0, "max": 3.0}
    out: dict[str, Any] = {
        "side": name,
        "n": 10,
        "running": False,
        "to_jobset_s": lat,
        "to_job_s": lat,
        "total_s": 4.0,
        "cpu_s_total": 5.0,
        "peak_rss_mb_total": 100.0,
        "reconcile_errors_total": 0,
    }
    if level is not None:
        out["level"] = level
    return out


def test_the_report_reads_one_level_and_names_it_on_each_figure(tmp_path: Path) -> None:
    # a burst at v2.3 as burst.py now names it, and one from before --level (v2.1, unnamed)
    (tmp_path / "burst-v2.3.json").write_text(
        json.dumps({"ours": _side("ours", "v2.3"), "theirs": _side("theirs", "v2.3")})
    )
    (tmp_path / "burst.json").write_text(json.dumps({"ours": _side("ours", None)}))
    (tmp_path / "floor-v2.3.json").write_text(json.dumps({"n": 10, "total_s": 2.0, "level": "v2.3"}))
    s2 = {"caches_synced_s": 1.0, "rss_mb_total": 90.0, "cpu_s_total": 1.0, "processes": ["trainer-py"]}
    scale_run = {"level": "v2.3", "pods": {"relevant": 30, "unrelated": 270}, "states": {"S2": {"ours": s2}}}
    (tmp_path / "scale-300-v2.3.json").write_text(json.dumps(scale_run))
    at23 = report.collect(tmp_path, bench_level.get("v2.3"))
    assert at23["level"] == "v2.3"
    assert at23["burst"]["theirs"]["level"] == "v2.3"
    assert at23["levels"] == {"burst": "v2.3", "floor": "v2.3", "scale": "v2.3"}
    text = report.summary(at23)
    assert "| scale 300 Pods: steady RSS (MB) | v2.3 | 90 | n/a |" in text
    assert "| burst 10 suspended: TrainJob to JobSet p99 (s) | v2.3 | 2 | 2 | 1.00x |" in text
    assert "against the floor | v2.3 | 4 | 2 | 2.00x |" in text
    at21 = report.collect(tmp_path, bench_level.get("v2.1"))
    assert at21["levels"] == {"burst": "v2.1"}  # the unnamed file records no level: v2.1
    assert "| burst 10 suspended: TrainJob to JobSet p99 (s) | v2.1 | 2 | n/a |" in report.summary(at21)
