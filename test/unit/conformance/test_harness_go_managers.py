"""The managers' launch (Go originals and ours) shared by the conformance harness and the scale bench:
its files and process arguments."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from manager.envtest.certs import TinyCA
from trainer.conformance import harness, originals


def test_go_managers_configure_both_managers_on_free_loopback_ports(tmp_path: Path) -> None:
    built = {
        originals.JOBSET.name: (Path("/bin/jobset"), 0.0),
        originals.TRAINER.name: (Path("/bin/trainer"), 0.0),
    }
    go = harness.go_managers(built, TinyCA("test-ca"), tmp_path / "m", tmp_path / "kubeconfig")
    ports = {go.jobset_webhook, go.jobset_health, go.jobset_metrics, go.trainer_webhook, go.trainer_health}
    assert len(ports | {go.trainer_metrics}) == 6
    js = yaml.safe_load((tmp_path / "m" / "jobset-config.yaml").read_text())
    assert js["webhook"] == {
        "port": go.jobset_webhook,
        "host": "127.0.0.1",
        "certDir": str(tmp_path / "m" / "jobset-certs"),
    }
    assert js["clientConnection"] == {"qps": 500, "burst": 500}
    tr = yaml.safe_load((tmp_path / "m" / "trainer-config.yaml").read_text())
    assert tr["health"]["healthProbeBindAddress"] == f"127.0.0.1:{go.trainer_health}"
    assert tr["clientConnection"] == {"qps": 500, "burst": 1000}
    assert (tmp_path / "m" / "trainer-tmp" / "k8s-webhook-server" / "serving-certs" / "tls.crt").exists()
    assert go.trainer.argv == ["/bin/trainer", f"--config={tmp_path / 'm' / 'trainer-config.yaml'}"]
    assert go.webhook_ports() == {
        harness.WEBHOOK_DIR / "jobset.yaml": go.jobset_webhook,
        harness.WEBHOOK_DIR / "trainer.yaml": go.trainer_webhook,
    }


def test_go_managers_keep_the_go_client_defaults_when_asked(tmp_path: Path) -> None:
    built = {
        originals.JOBSET.name: (Path("/bin/jobset"), 0.0),
        originals.TRAINER.name: (Path("/bin/trainer"), 0.0),
    }
    harness.go_managers(built, TinyCA("test-ca"), tmp_path, tmp_path / "kubeconfig", client_connection=False)
    tr = yaml.safe_load((tmp_path / "trainer-config.yaml").read_text())
    assert "clientConnection" not in tr


def test_our_manager_configures_python_trainer_on_free_loopback_ports(tmp_path: Path) -> None:
    base = tmp_path / "ours"
    ours = harness.our_manager(
        TinyCA("test-ca"),
        base,
        tmp_path / "kubeconfig",
        controllers="*,-scheduling",
        config_overrides={"clientConnection": {"qps": 50, "burst": 100}},
    )
    assert len({ours.webhook, ours.health, ours.metrics}) == 3
    config = yaml.safe_load((base / "config.yaml").read_text())
    assert config == {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "webhook": {"host": "127.0.0.1", "port": ours.webhook},
        "metrics": {"bindAddress": f"127.0.0.1:{ours.metrics}", "secureServing": False},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ours.health}"},
        "leaderElection": {"leaderElect": False},
        "certManagement": {"enable": False},
        "clientConnection": {"qps": 50, "burst": 100},
    }
    assert (base / "webhook-certs" / "tls.crt").exists() and (base / "webhook-certs" / "tls.key").exists()
    assert ours.process.argv == [
        sys.executable,
        "-m",
        "trainer",
        f"--config={base / 'config.yaml'}",
        f"--webhook-cert-dir={base / 'webhook-certs'}",
        "--log-format=console",
        "--controllers=*,-scheduling",
    ]
    assert ours.process.extra_env == {"KUBECONFIG": str(tmp_path / "kubeconfig")}
    assert ours.webhook_ports() == {
        harness.WEBHOOK_DIR / "jobset.yaml": ours.webhook,
        harness.WEBHOOK_DIR / "trainer.yaml": ours.webhook,
    }


def test_our_manager_runs_every_component_unless_told(tmp_path: Path) -> None:
    ours = harness.our_manager(TinyCA("test-ca"), tmp_path, tmp_path / "kubeconfig")
    assert not any(arg.startswith("--controllers") for arg in ours.process.argv)
