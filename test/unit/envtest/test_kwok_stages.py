"""The KWOK pod stages envtest writes when a pod run time is asked for."""

from __future__ import annotations

import pytest
import yaml

from manager.envtest import Environment, kwokstages
from manager.envtest.environment import POD_PROBE_DELAYS_ENV, POD_RUN_SECONDS_ENV, POD_START_SECONDS_ENV


def _by_name(run: float, jitter: float = 0.0) -> dict[str, dict]:
    return {s["metadata"]["name"]: s for s in kwokstages.pod_stages(run, jitter)}


def test_all_three_pod_transitions_are_given_because_one_pod_stage_replaces_kwoks_defaults() -> None:
    stages = _by_name(2.5)
    assert sorted(stages) == ["pod-complete", "pod-delete", "pod-ready"]
    for stage in stages.values():
        assert stage["apiVersion"] == "kwok.x-k8s.io/v1alpha1"
        assert stage["kind"] == "Stage"
        assert stage["spec"]["resourceRef"] == {"apiGroup": "v1", "kind": "Pod"}


def test_job_pods_succeed_after_the_run_time_without_jitter_by_default() -> None:
    complete = _by_name(2.5)["pod-complete"]["spec"]
    assert complete["delay"] == {
        "durationMilliseconds": 2500,
        "durationFrom": {"expressionFrom": kwokstages._RUN_SECONDS_JQ},
    }
    selectors = complete["selector"]["matchExpressions"]
    assert {"key": ".status.phase", "operator": "In", "values": ["Running"]} in selectors
    assert {"key": ".metadata.ownerReferences.[].kind", "operator": "In", "values": ["Job"]} in selectors
    assert "phase: Succeeded" in complete["next"]["statusTemplate"]
    ready = _by_name(2.5)["pod-ready"]["spec"]
    assert "delay" not in ready
    assert "phase: Running" in ready["next"]["statusTemplate"]


def test_jitter_is_an_upper_bound_on_top_of_the_run_time() -> None:
    # KWOK draws the delay uniformly between durationMilliseconds and jitterDurationMilliseconds.
    assert _by_name(1, 3)["pod-complete"]["spec"]["delay"] == {
        "durationMilliseconds": 1000,
        "jitterDurationMilliseconds": 4000,
    }


def test_a_pod_annotation_sets_its_own_run_time() -> None:
    # KWOK's durationFrom: a jq expression over the pod; a Go duration string is parsed, no output
    # falls back to durationMilliseconds.
    assert kwokstages._RUN_SECONDS_JQ == (
        '.metadata.annotations["envtest.trainer.kubeflow.org/pod-run-seconds"] // empty | tostring + "s"'
    )
    annotated = {"metadata": {"annotations": {kwokstages.RUN_SECONDS_ANNOTATION: "45"}}}
    assert kwokstages.pod_run_seconds(annotated, 2.0) == 45.0
    assert kwokstages.pod_run_seconds({"metadata": {}}, 2.0) == 2.0
    assert (
        kwokstages.pod_run_seconds({"metadata": {"annotations": {kwokstages.RUN_SECONDS_ANNOTATION: "x"}}}, 2)
        == 2
    )
    # With jitter KWOK would cap the annotation's delay at the jitter bound: not read then.
    assert "durationFrom" not in _by_name(1, 3)["pod-complete"]["spec"]["delay"]


def test_stages_survive_a_yaml_round_trip() -> None:
    text = yaml.safe_dump_all(kwokstages.pod_stages(2), sort_keys=False)
    assert list(yaml.safe_load_all(text)) == kwokstages.pod_stages(2)


def test_a_negative_run_time_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        Environment(full=True, pod_run_seconds=-1)


def test_run_time_defaults_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(POD_RUN_SECONDS_ENV, "3")
    assert Environment(full=True).pod_run_seconds == 3.0
    monkeypatch.delenv(POD_RUN_SECONDS_ENV)
    assert Environment(full=True).pod_run_seconds is None


def test_without_start_time_or_probe_delays_the_stages_are_as_before() -> None:
    stages = _by_name(2.5)
    assert "delay" not in stages["pod-ready"]["spec"]
    assert "{{ if false }}" in stages["pod-ready"]["spec"]["next"]["statusTemplate"]
    assert not any(
        "Ready" in e["key"] for e in stages["pod-complete"]["spec"]["selector"]["matchExpressions"]
    )


def test_a_start_time_keeps_a_scheduled_pod_pending_that_long() -> None:
    stages = {s["metadata"]["name"]: s for s in kwokstages.pod_stages(2, start_seconds=3)}
    assert stages["pod-ready"]["spec"]["delay"] == {"durationMilliseconds": 3000}
    assert stages["pod-complete"]["spec"]["delay"]["durationMilliseconds"] == 2000


def test_probe_delays_add_a_readiness_stage_and_only_ready_pods_complete() -> None:
    stages = {s["metadata"]["name"]: s for s in kwokstages.pod_stages(2, probe_delays=True)}
    assert sorted(stages) == ["pod-complete", "pod-delete", "pod-probed-ready", "pod-ready"]
    assert "{{ if true }}" in stages["pod-ready"]["spec"]["next"]["statusTemplate"]
    probed = stages["pod-probed-ready"]["spec"]
    assert {"key": kwokstages._READY_IS, "operator": "In", "values": ["False"]} in probed["selector"][
        "matchExpressions"
    ]
    assert "initialDelaySeconds" in probed["delay"]["durationFrom"]["expressionFrom"]
    complete = stages["pod-complete"]["spec"]["selector"]["matchExpressions"]
    assert {"key": kwokstages._READY_IS, "operator": "In", "values": ["True"]} in complete


def test_a_negative_start_time_is_refused() -> None:
    with pytest.raises(ValueError, match="start -1"):
        kwokstages.pod_stages(1, start_seconds=-1)


def test_start_time_and_probe_delays_default_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(POD_START_SECONDS_ENV, "2")
    monkeypatch.setenv(POD_PROBE_DELAYS_ENV, "true")
    env = Environment(full=True)
    # our stages are needed for either: Job pods then finish at once, as with KWOK's own
    assert (env.pod_start_seconds, env.pod_probe_delays, env.pod_run_seconds) == (2.0, True, 0.0)
