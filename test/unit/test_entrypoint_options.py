from __future__ import annotations

import pytest

from manager.config import RestConfig
from trainer.api.config_v1alpha1 import ConfigurationError, load
from trainer.options import apply_client_connection, duration, manager_options


@pytest.mark.parametrize(
    ("text", "seconds"), [("15s", 15), ("1m30s", 90), ("500ms", 0.5), ("2h", 7200), ("1.5s", 1.5)]
)
def test_go_durations(text: str, seconds: float) -> None:
    assert duration(text, 0) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("15", 'time: missing unit in duration "15"'),
        ("s", 'time: invalid duration "s"'),
        ("1x", 'time: unknown unit "x" in duration "1x"'),
        ("1m3", 'time: missing unit in duration "1m3"'),
    ],
)
def test_bad_durations_are_errors_in_go_words(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        duration(text, 0)
    assert str(caught.value) == message


def test_a_bad_lease_duration_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match='time: invalid duration "soon"'):
        manager_options(load({"leaderElection": {"leaderElect": True, "leaseDuration": "soon"}}))


def test_shipped_configuration_maps_to_manager_options() -> None:
    cfg = load(
        {
            "leaderElection": {
                "leaderElect": True,
                "resourceName": "trainer.kubeflow.org",
                "resourceNamespace": "",
                "leaseDuration": "15s",
                "renewDeadline": "10s",
                "retryPeriod": "2s",
            },
            "controller": {"groupKindConcurrency": {"TrainJob.trainer.kubeflow.org": 5}},
        }
    )
    options = manager_options(cfg)
    assert options.leader_election and options.leader_election_id == "trainer.kubeflow.org"
    assert (options.lease_duration, options.renew_deadline, options.retry_period) == (15, 10, 2)
    assert options.metrics_bind_address == ":8443" and options.health_probe_bind_address == ":8081"
    assert options.group_kind_concurrency == {"TrainJob.trainer.kubeflow.org": 5}


def test_the_shipped_configuration_gives_the_jobset_controller_two_workers() -> None:
    # One process runs the Trainer and JobSet controllers: one JobSet worker left a TrainJob
    # burst's Jobs queued behind it, five made it compete with the TrainJob stage (docs/bench.md).
    from pathlib import Path

    import yaml

    shipped = Path(__file__).resolve().parents[2] / "config" / "manager" / "config.yaml"
    data = yaml.safe_load(yaml.safe_load(shipped.read_text())["data"]["controller_manager_config.yaml"])
    concurrency = manager_options(load(data)).group_kind_concurrency
    assert concurrency["JobSet.jobset.x-k8s.io"] == 2
    assert concurrency["TrainJob.trainer.kubeflow.org"] == 5


def test_no_leader_election_section_means_off() -> None:
    assert manager_options(load(None)).leader_election is False


def test_client_connection_throttles_the_client() -> None:
    # spec: scheduling 75
    # Fixed on purpose: upstream Trainer validates clientConnection but never applies it, and the
    # scheduler-plugins controller ignores --qps/--burst; here the one manager's client is
    # throttled by them (divergences.md; the bucket itself: test_fw_rest.py).
    rest = RestConfig(host="https://127.0.0.1:6443")
    apply_client_connection(rest, load(None))
    assert (rest.qps, rest.burst) == (1000, 2000)
    apply_client_connection(rest, load({"clientConnection": {"qps": 5, "burst": 7}}))
    assert (rest.qps, rest.burst) == (5, 7)
    apply_client_connection(rest, load({"clientConnection": {"qps": 0}}))
    assert rest.qps is None


def test_secure_serving_turns_on_https_and_the_auth_filter() -> None:
    from manager.metrics.filters import with_authentication_and_authorization

    secure = manager_options(load({}))  # upstream's default: metrics.secureServing true
    assert secure.metrics_secure_serving is True
    assert secure.metrics_filter_provider is with_authentication_and_authorization
    assert secure.metrics_cert_dir is None, "a self-signed certificate, as upstream passes no cert dir"
    plain = manager_options(load({"metrics": {"secureServing": False}}))
    assert plain.metrics_secure_serving is False and plain.metrics_filter_provider is None
