"""JobSet's Configuration file: defaults, loading, encoding, validation (jobset.md 6.Q) and User-Agent (6.R.10)."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainer.api import jobset_config_v1alpha1 as C

Object = dict[str, Any]
ELECTION = {
    "leaderElect": True,
    "leaseDuration": "15s",
    "renewDeadline": "10s",
    "retryPeriod": "2s",
    "resourceLock": "leases",
    "resourceName": "6d4f6a47.jobset.x-k8s.io",
    "resourceNamespace": "",
}
BASE = {"apiVersion": C.API_VERSION, "kind": C.KIND}


def defaulted(data: Object) -> Object:
    return C.set_defaults(C.decode(data))


def test_defaults() -> None:
    disabled = defaulted({"internalCertManagement": {"enable": False}})  # spec: jobset 6.Q.1
    assert disabled == {
        **BASE,
        "webhook": {"port": 9443},
        "metrics": {"bindAddress": ":8443"},
        "health": {"healthProbeBindAddress": ":8081"},
        "leaderElection": ELECTION,
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": 500, "burst": 500},
    }
    explicit = defaulted({"leaderElection": {"leaderElect": True}})  # spec: jobset 6.Q.2
    assert explicit["leaderElection"] == ELECTION
    custom = defaulted(  # spec: jobset 6.Q.3
        {
            "webhook": {"port": 9444},
            "metrics": {"bindAddress": ":38081"},
            "health": {"healthProbeBindAddress": ":38080"},
            "leaderElection": {"resourceName": "foo.jobset.x-k8s.io"},
        }
    )
    assert custom["webhook"] == {"port": 9444} and custom["metrics"] == {"bindAddress": ":38081"}
    assert custom["health"] == {"healthProbeBindAddress": ":38080"}
    assert custom["leaderElection"]["resourceName"] == "foo.jobset.x-k8s.io"
    assert custom["clientConnection"] == {"qps": 500, "burst": 500}
    off = defaulted({"leaderElection": {"leaderElect": False}})  # spec: jobset 6.Q.4
    assert off["leaderElection"]["leaderElect"] is False
    assert off["leaderElection"]["resourceName"] == "6d4f6a47.jobset.x-k8s.io"
    assert defaulted({})["internalCertManagement"] == {  # spec: jobset 6.Q.5
        "enable": True,
        "webhookServiceName": "jobset-webhook-service",
        "webhookSecretName": "jobset-webhook-server-cert",
    }
    assert defaulted({"internalCertManagement": {"enable": False}})["internalCertManagement"] == {
        "enable": False
    }  # spec: jobset 6.Q.6
    assert defaulted({"clientConnection": {"qps": 123, "burst": 456}})["clientConnection"] == {
        "qps": 123,
        "burst": 456,
    }  # spec: jobset 6.Q.7
    assert defaulted({"clientConnection": {}})["clientConnection"] == {
        "qps": 500,
        "burst": 500,
    }  # spec: jobset 6.Q.8


def write(tmp_path: Path, data: Object) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({**BASE, **data}))
    return path


def test_load_without_file() -> None:  # spec: jobset 6.Q.9
    options, cfg = C.load(None)
    assert options.health_probe_bind_address == ":8081" and options.metrics_bind_address == ":8443"
    assert options.leader_election is True and options.leader_election_id == "6d4f6a47.jobset.x-k8s.io"
    assert options.leader_election_resource_lock == "leases"
    assert (options.lease_duration, options.renew_deadline, options.retry_period) == (15, 10, 2)
    assert options.webhook_port == 9443
    assert cfg["internalCertManagement"]["enable"] is True
    assert options.metrics_cert_dir is None


def test_load_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(C.ConfigError, match=r"^read \.: is a directory$"):  # spec: jobset 6.Q.10
        C.load(".")
    path = write(tmp_path, {"invalidField": 1})
    with pytest.raises(
        C.ConfigError, match=r'strict decoding error: unknown field "invalidField"'
    ):  # spec: jobset 6.Q.18
        C.load(path)
    with pytest.raises(C.ConfigError, match=r'unknown field "webhook.nope"'):
        C.load(write(tmp_path, {"webhook": {"nope": 1}}))


def test_load_files(tmp_path: Path) -> None:
    options, _ = C.load(  # spec: jobset 6.Q.11
        write(
            tmp_path,
            {
                "health": {"healthProbeBindAddress": ":38081"},
                "metrics": {"bindAddress": ":38080"},
                "leaderElection": {"leaderElect": True, "resourceName": "test-id"},
                "webhook": {"port": 9444},
            },
        )
    )
    assert (options.health_probe_bind_address, options.metrics_bind_address) == (":38081", ":38080")
    assert options.leader_election_id == "test-id" and options.webhook_port == 9444
    names = {
        "webhookServiceName": "jobset-tenant-a-webhook-service",
        "webhookSecretName": "jobset-tenant-a-webhook-server-cert",
    }
    options, cfg = C.load(write(tmp_path, {"internalCertManagement": names}))  # spec: jobset 6.Q.12
    assert cfg["internalCertManagement"] == {"enable": True, **names}
    assert options == C.load(None)[0]
    options, _ = C.load(write(tmp_path, {"internalCertManagement": {"enable": False}}))  # spec: jobset 6.Q.13
    assert (options.metrics_cert_dir, options.metrics_cert_name, options.metrics_key_name) == (
        "/tmp/k8s-metrics-server/serving-certs",
        "tls.crt",
        "tls.key",
    )
    options, _ = C.load(write(tmp_path, {"leaderElection": {"leaderElect": False}}))  # spec: jobset 6.Q.14
    assert options.leader_election is False
    _, cfg = C.load(write(tmp_path, {"clientConnection": {"qps": 50, "burst": 100}}))  # spec: jobset 6.Q.15
    assert cfg["clientConnection"] == {"qps": 50, "burst": 100}
    custom_dir = "/tmp/my-metrics-server/my-serving-certs"
    for enable in (True, False):  # spec: jobset 6.Q.16 / spec: jobset 6.Q.17
        options, _ = C.load(
            write(
                tmp_path, {"metrics": {"certDir": custom_dir}, "internalCertManagement": {"enable": enable}}
            )
        )
        assert (options.metrics_cert_dir, options.metrics_cert_name, options.metrics_key_name) == (
            custom_dir,
            "tls.crt",
            "tls.key",
        )


def test_encode() -> None:
    assert yaml.safe_load(C.encode({**BASE})) == {
        **BASE,
        "health": {},
        "metrics": {},
        "webhook": {},
    }  # spec: jobset 6.Q.19
    full = yaml.safe_load(C.encode(defaulted({})))  # spec: jobset 6.Q.20
    assert full == {
        **BASE,
        "webhook": {"port": 9443},
        "metrics": {"bindAddress": ":8443"},
        "health": {"healthProbeBindAddress": ":8081"},
        "leaderElection": ELECTION,
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": "jobset-webhook-service",
            "webhookSecretName": "jobset-webhook-server-cert",
        },
        "clientConnection": {"qps": 500, "burst": 500},
    }
    assert "leaseDuration: 15s" in C.encode(defaulted({}))


def test_validate() -> None:
    bad_secret = C.validate(
        defaulted({"internalCertManagement": {"webhookSecretName": ":)"}})
    )  # spec: jobset 6.Q.21
    assert len(bad_secret) == 1 and bad_secret[0].startswith(
        'internalCertManagement.webhookSecretName: Invalid value: ":)"'
    )
    bad_service = C.validate(
        defaulted({"internalCertManagement": {"webhookServiceName": "0-invalid"}})
    )  # spec: jobset 6.Q.22
    assert len(bad_service) == 1 and bad_service[0].startswith(
        "internalCertManagement.webhookServiceName: Invalid value"
    )
    assert (
        C.validate(
            defaulted({"internalCertManagement": {"enable": False, "webhookServiceName": "0-invalid"}})
        )
        == []
    )  # spec: jobset 6.Q.23
    ok = {"internalCertManagement": {"webhookServiceName": "webhook-svc", "webhookSecretName": "webhook-sec"}}
    assert C.validate(defaulted(ok)) == []  # spec: jobset 6.Q.24


def test_durations() -> None:
    assert C.parse_duration("1m30s") == 90 and C.parse_duration("500ms") == 0.5
    with pytest.raises(C.ConfigError, match=r'time: invalid duration "soon"'):
        C.parse_duration("soon")


def test_user_agent() -> None:  # spec: jobset 6.R.10
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine().lower(), platform.machine().lower())
    assert C.user_agent() == f"jobset/v0.0.0 ({platform.system().lower()}/{arch}) abcd012"
    assert (
        C.user_agent("v0.10.1-3-gabc", "") == f"jobset/v0.10.1 ({platform.system().lower()}/{arch}) unknown"
    )


def test_render_is_what_the_go_manager_reads_and_refuses_what_it_would_refuse(tmp_path: Path) -> None:
    # the conformance harness starts the Go JobSet manager with render()'s output
    text = C.render({"leaderElection": {"leaderElect": False}, "internalCertManagement": {"enable": False}})
    (tmp_path / "c.yaml").write_text(text)
    options, cfg = C.load(tmp_path / "c.yaml")
    assert options.leader_election is False and cfg["leaderElection"]["leaseDuration"] == "15s"
    with pytest.raises(C.ConfigError, match=r'unknown field "webhook\.nope"'):
        C.render({"webhook": {"nope": 1}})
    with pytest.raises(C.ConfigError, match='time: invalid duration "soon"'):
        C.render({"leaderElection": {"retryPeriod": "soon"}})
