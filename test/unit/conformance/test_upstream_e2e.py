"""The upstream e2e runner's own logic: JUnit results, the stand-in Deployment, the report."""

from __future__ import annotations

from pathlib import Path

import pytest

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
  </testsuite>
</testsuites>
"""


def test_only_it_specs_are_counted_with_their_failure(tmp_path: Path) -> None:
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
