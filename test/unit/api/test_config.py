"""Configuration: strict decoding, upstream defaults and validation messages (trainer §6.2)."""

from __future__ import annotations

import pytest

from trainer.api.config_v1alpha1 import Configuration, ConfigurationError, load, set_defaults, validate

SHIPPED = {
    "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
    "kind": "Configuration",
    "health": {
        "healthProbeBindAddress": ":8081",
        "readinessEndpointName": "readyz",
        "livenessEndpointName": "healthz",
    },
    "metrics": {"bindAddress": ":8443", "secureServing": True},
    "webhook": {"port": 9443, "host": ""},
    "leaderElection": {
        "leaderElect": True,
        "resourceName": "trainer.kubeflow.org",
        "resourceNamespace": "",
        "leaseDuration": "15s",
        "renewDeadline": "10s",
        "retryPeriod": "2s",
    },
    "controller": {
        "groupKindConcurrency": {
            "TrainJob.trainer.kubeflow.org": 5,
            "TrainingRuntime.trainer.kubeflow.org": 1,
            "ClusterTrainingRuntime.trainer.kubeflow.org": 1,
        }
    },
    "certManagement": {
        "enable": True,
        "webhookServiceName": "kubeflow-trainer-controller-manager",
        "webhookSecretName": "kubeflow-trainer-webhook-cert",
    },
    "clientConnection": {"qps": 1000, "burst": 2000},
}


def test_empty_config_gets_upstream_defaults() -> None:
    cfg = load(None)
    assert cfg.to_dict() == {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "webhook": {"port": 9443, "host": ""},
        "metrics": {"bindAddress": ":8443", "secureServing": True},
        "health": {
            "healthProbeBindAddress": ":8081",
            "readinessEndpointName": "readyz",
            "livenessEndpointName": "healthz",
        },
        "certManagement": {
            "enable": True,
            "webhookServiceName": "kubeflow-trainer-controller-manager",
            "webhookSecretName": "kubeflow-trainer-webhook-cert",
        },
        "clientConnection": {"qps": 1000.0, "burst": 2000},
    }
    # Leader election stays off when absent; groupKindConcurrency stays unset.
    assert cfg.leader_election is None and cfg.controller is None


def test_shipped_config_is_kept() -> None:
    cfg = load(SHIPPED)
    assert cfg.to_dict() == SHIPPED
    assert cfg.leader_election is not None and cfg.leader_election.lease_duration == "15s"


def test_explicit_values_win_over_defaults() -> None:
    cfg = set_defaults(Configuration.from_dict({"metrics": {"bindAddress": "0", "secureServing": False}}))
    assert cfg.metrics is not None
    assert (cfg.metrics.bind_address, cfg.metrics.secure_serving) == ("0", False)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"webhook": {"port": 0}},
            "invalid configuration: webhook.port: Invalid value: 0: must be between 1 and 65535",
        ),
        ({"webhook": {"port": 65536}}, "webhook.port: Invalid value: 65536: must be between 1 and 65535"),
        (
            {"clientConnection": {"qps": -1}},
            "invalid configuration: clientConnection.qps: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            {"clientConnection": {"burst": -1}},
            "clientConnection.burst: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            {"controller": {"groupKindConcurrency": {"TrainJob.trainer.kubeflow.org": 0}}},
            "controller.groupKindConcurrency[TrainJob.trainer.kubeflow.org]: Invalid value: 0: must be greater than 0",
        ),
        ({"unknown": 1}, 'failed to decode config file: strict decoding error: unknown field "unknown"'),
        ({"webhook": {"hots": ""}}, 'strict decoding error: unknown field "webhook.hots"'),
        ({"webhook": {"port": "9443"}}, "failed to decode config file: "),
    ],
)
def test_rejections(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError) as err:
        load(data)
    assert message in str(err.value)


def test_several_errors_are_aggregated() -> None:
    cfg = Configuration.from_dict({"webhook": {"port": 0}, "clientConnection": {"qps": -0.5, "burst": -2}})
    assert validate(cfg) == [
        "webhook.port: Invalid value: 0: must be between 1 and 65535",
        "clientConnection.qps: Invalid value: -0.5: must be greater than or equal to 0",
        "clientConnection.burst: Invalid value: -2: must be greater than or equal to 0",
    ]
    with pytest.raises(ConfigurationError, match=r"^invalid configuration: \[webhook.port"):
        load(cfg.to_dict())


def test_status_server_errors_follow_the_pod_cache_error_in_upstream_order() -> None:
    cfg = Configuration.from_dict(
        {"podCache": "Some", "statusServer": {"port": 70000, "qps": -1.5, "burst": -1}}
    )
    assert validate(cfg) == [
        'podCache: Unsupported value: "Some": supported values: "Full", "Minimal"',
        "statusServer.port: Invalid value: 70000: must be between 1 and 65535",
        "statusServer.qps: Invalid value: -1.5: must be greater than or equal to 0",
        "statusServer.burst: Invalid value: -1: must be greater than or equal to 0",
    ]


def test_feature_gates_decode_and_unknown_gate_is_an_error_naming_it():
    cfg = load({"featureGates": {"TrainJobStatus": True}})
    assert cfg.feature_gates == {"TrainJobStatus": True}
    with pytest.raises(ConfigurationError) as err:
        load({"featureGates": {"TrainJobStatus": True, "NoSuchGate": False}})
    assert str(err.value) == (
        "invalid configuration: featureGates.NoSuchGate: unrecognized feature gate: NoSuchGate"
    )
    with pytest.raises(ConfigurationError, match="featureGates"):
        load({"featureGates": {"TrainJobStatus": "yes"}})


def test_status_server_defaults_are_upstream_v22_and_validated():
    from trainer.api.config_v1alpha1 import status_server_defaults

    cfg = load({})
    assert cfg.status_server is None  # the defaulted v2.1 Configuration is unchanged
    s = status_server_defaults(cfg)
    assert (s.port, s.qps, s.burst) == (10443, 5.0, 10)
    with pytest.raises(ConfigurationError) as err:
        load({"statusServer": {"port": 0}})
    assert "statusServer.port: Invalid value: 0: must be between 1 and 65535" in str(err.value)
