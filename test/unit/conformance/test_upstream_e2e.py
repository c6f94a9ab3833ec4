"""The upstream e2e runner's own logic: JUnit results, the stand-in Deployment, the report."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer import levels
from trainer.conformance import originals, upstream_e2e
from trainer.conformance.upstream_e2e import Spec, SuiteResult, parse_junit, report

JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="3" disabled="0" errors="0" failures="1" time="42.1">
  <testsuite name="End To End Suite" tests="3" failures="1" errors="0" time="42.1">
    <testcase name="[BeforeSuite]" classname="End To End Suite" status="passed" time="1.5"></testcase>
    <testcase name="[It] JobSet when ttl seconds after finished is set should clean up" \
classname="End To End Suite" status="passed" time="11.2"></testcase>
    <testcase name="[It] JobSet when DependsOn is enabled on JobSet trainer-node Job depends on" \
classname="End To End Suite" status="failed" time="20.3">
      <failure message="Timed out after 600s" type="failed">Expected 2 to equal 1</failure>
    </testcase>
    <testcase name="[It] JobSet when VolumeClaimPolicies is enabled should create PVCs" \
classname="End To End Suite" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
  </testsuite>
</testsuites>
"""


def test_only_it_specs_that_ran_are_counted_with_their_failure(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    specs = parse_junit(path)
    assert [(s.name.split(" when ")[1][:8], s.passed) for s in specs] == [
        ("ttl seco", True),
        ("DependsO", False),
    ]
    assert specs[0].seconds == pytest.approx(11.2) and specs[0].failure == ""
    assert "Timed out after 600s" in specs[1].failure and "Expected 2 to equal 1" in specs[1].failure


def test_the_stand_in_is_the_deployment_the_jobset_suite_waits_for() -> None:
    deployment = upstream_e2e.stand_in_deployment("jobset-system")
    assert deployment["kind"] == "Deployment"
    assert deployment["metadata"] == {
        "name": "jobset-controller-manager",
        "namespace": "jobset-system",
        "labels": deployment["spec"]["selector"]["matchLabels"],
    }
    assert (
        deployment["spec"]["template"]["metadata"]["labels"] == deployment["spec"]["selector"]["matchLabels"]
    )
    # no probes: KWOK makes its pod Ready at once, so the Deployment becomes Available
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "readinessProbe" not in container and "startupProbe" not in container


def test_the_suites_are_the_test_e2e_packages_of_the_pinned_modules() -> None:
    assert (originals.JOBSET_E2E.module, originals.JOBSET_E2E.version) == ("sigs.k8s.io/jobset", "v0.10.1")
    assert originals.JOBSET_E2E.package == "sigs.k8s.io/jobset/test/e2e" and originals.JOBSET_E2E.test
    assert originals.TRAINER_E2E.version == "v2.1.0" and originals.TRAINER_E2E.test
    assert originals.TRAINER_E2E.package == "github.com/kubeflow/trainer/v2/test/e2e"


def test_report_exits_1_on_any_failed_spec_and_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    good = SuiteResult("trainer", "theirs", [Spec("a", True, 1.0), Spec("b", True, 2.0)], 9.0)
    bad = SuiteResult(
        "trainer", "ours", [Spec("a", True, 1.0), Spec("b", False, 2.0, "boom")], 9.0, log="x.log"
    )
    assert report([good]) == 0
    assert report([good, bad]) == 1
    out = capsys.readouterr().out
    assert "ok     trainer e2e v2.1.0 against theirs (the Go managers): 2/2 passed" in out
    assert "FAILED trainer e2e v2.1.0 against ours (this manager): 1/2 passed" in out
    assert "FAIL b (2.0s)" in out and "boom" in out and "output: x.log" in out


def test_a_suite_that_ran_no_spec_is_not_a_pass() -> None:
    assert report([SuiteResult("jobset", "ours", [], 1.0)]) == 1


def test_bad_options_are_refused_naming_them(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        upstream_e2e.parse_args(["--pod-run-seconds", "-1"])
    assert "--pod-run-seconds" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        upstream_e2e.parse_args(["--sides", "mine"])


def test_an_error_without_text_names_its_type_and_where_it_was_raised() -> None:
    from trainer.conformance.cli import describe_error

    try:
        raise TimeoutError
    except TimeoutError as err:
        text = describe_error(err)
    assert (
        text.startswith("TimeoutError at test_upstream_e2e.py:") and "in test_an_error_without_text" in text
    )
    assert describe_error(RuntimeError("cluster did not start")) == "cluster did not start"


def test_each_level_has_the_e2e_suites_of_its_own_releases() -> None:
    v2_3 = originals.for_level(levels.get("v2.3")).e2e_suites()
    assert {name: (m.module, m.version, m.package, m.test) for name, m in v2_3.items()} == {
        "jobset": ("sigs.k8s.io/jobset", "v0.12.0", "sigs.k8s.io/jobset/test/e2e", True),
        "trainer": (
            "github.com/kubeflow/trainer/v2",
            "v2.3.0",
            "github.com/kubeflow/trainer/v2/test/e2e",
            True,
        ),
    }
    # the default level's are the module constants, as before levels
    assert originals.for_level(levels.get("v2.1")).e2e_suites() == upstream_e2e.SUITES
    assert upstream_e2e.SUITES == {"jobset": originals.JOBSET_E2E, "trainer": originals.TRAINER_E2E}


SETUP_SCRIPT = """
  patches:
  - patch: |-
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --feature-gates=TrainJobStatus=true,Other=false
    --set manager.config.featureGates.TrainJobStatus=true \\
  kubectl create -n gpu-operator -f ./hack/gpu-time-slicing.yml
echo "Installing Flux runtime for E2E"
kubectl apply --server-side \\
  -f examples/flux/flux-runtime.yaml
  kubectl get clustertrainingruntimes -o json | jq '...' | kubectl apply -f -
"""


def test_the_e2e_setup_is_read_from_upstreams_script(tmp_path: Path) -> None:
    setup = originals.E2eSetup.parse(SETUP_SCRIPT, tmp_path)
    assert setup.feature_gates == {"TrainJobStatus": True, "Other": False}
    assert setup.manifests == (tmp_path / "examples/flux/flux-runtime.yaml",)  # not `apply -f -`
    assert originals.E2eSetup.parse("kubectl apply -f -\n", tmp_path) == originals.E2eSetup()


def test_v2_3s_e2e_cluster_gets_the_status_gate_and_the_flux_runtime_v2_1s_nothing() -> None:
    setup = originals.for_level(levels.get("v2.3")).e2e_setup()
    assert setup.feature_gates == {"TrainJobStatus": True}
    (flux,) = setup.manifests
    assert flux.is_file() and "name: flux-distributed" in flux.read_text()
    assert originals.for_level(levels.get("v2.1")).e2e_setup() == originals.E2eSetup()


def test_the_level_option_picks_a_level_and_refuses_others(capsys: pytest.CaptureFixture[str]) -> None:
    assert upstream_e2e.parse_args([]).level == "v2.3"  # the product's default level
    assert upstream_e2e.parse_args(["--level", "v2.1"]).level == "v2.1"
    assert upstream_e2e.parse_args(["--level", "v2.3"]).level == "v2.3"
    with pytest.raises(SystemExit):
        upstream_e2e.parse_args(["--level", "v2.2"])
    assert "--level" in capsys.readouterr().err


def test_the_report_names_the_release_each_suite_ran(capsys: pytest.CaptureFixture[str]) -> None:
    result = SuiteResult("jobset", "ours", [Spec("a", True, 1.0)], 5.0, version="v0.12.0")
    assert report([result]) == 0
    assert "ok     jobset e2e v0.12.0 against ours (this manager): 1/1 passed" in capsys.readouterr().out


def test_the_stand_in_volumes_are_what_the_suites_claims_bind_to() -> None:
    volume = upstream_e2e.stand_in_volume(1)
    assert volume["metadata"]["name"] == "upstream-e2e-1"
    spec = volume["spec"]
    # the VolumeClaimPolicies spec's claims: 1Gi, ReadWriteOnce, no storageClassName (no default class)
    assert spec["capacity"] == {"storage": "1Gi"} and spec["accessModes"] == ["ReadWriteOnce"]
    assert spec["storageClassName"] == "" and spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert upstream_e2e.STAND_IN_VOLUMES == 2


def test_skip_is_passed_to_ginkgo_as_its_skip_option() -> None:
    args = upstream_e2e.parse_args(["--skip", "DeadlineExceeded|status endpoint"])
    assert args.skip == "DeadlineExceeded|status endpoint"
    assert upstream_e2e.parse_args([]).skip is None
