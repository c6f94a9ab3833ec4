"""The Go managers' launch shared by the conformance harness and the scale bench: its files."""

from __future__ import annotations

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
