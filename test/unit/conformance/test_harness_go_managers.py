"""The managers' launch (Go originals and ours) shared by the conformance harness and the scale bench:
its files and process arguments."""

from __future__ import annotations

import asyncio
import copy
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager.envtest.certs import TinyCA
from trainer import levels
from trainer.conformance import harness, originals
from trainer.conformance.webhook_probes import configurations, needs_runtimes


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


def test_each_go_manager_gets_its_own_feature_gates(tmp_path: Path) -> None:
    """JobSet's gates go to the Go jobset's Configuration (v0.12.0 has ``featureGates``), the
    others to the Go trainer's; ours takes them all in its one Configuration."""
    built = {
        originals.JOBSET.name: (Path("/bin/jobset"), 0.0),
        originals.TRAINER.name: (Path("/bin/trainer"), 0.0),
    }
    gates = {"RestartJob": True, "InPlaceRestart": True, "ElasticJobSet": False, "TrainJobState": True}
    harness.go_managers(
        built,
        TinyCA("test-ca"),
        tmp_path,
        tmp_path / "kubeconfig",
        feature_gates=gates,
        jobset_release="v0.12.0",
    )
    js = yaml.safe_load((tmp_path / "jobset-config.yaml").read_text())
    tr = yaml.safe_load((tmp_path / "trainer-config.yaml").read_text())
    assert js["featureGates"] == {"RestartJob": True, "InPlaceRestart": True, "ElasticJobSet": False}
    assert tr["featureGates"] == {"TrainJobState": True}
    # JobSet v0.10.1's Configuration has no featureGates: the run would fail before its start
    with pytest.raises(ValueError, match='strict decoding error: unknown field "featureGates"'):
        harness.go_managers(
            built, TinyCA("test-ca"), tmp_path / "old", tmp_path / "kubeconfig", feature_gates=gates
        )


def test_the_cli_refuses_gates_the_level_has_not(capsys: pytest.CaptureFixture[str]) -> None:
    from trainer.conformance import cli

    with pytest.raises(SystemExit):
        cli.parse_args(["--level", "v2.1", "--feature-gates", "RestartJob=true"])
    assert (
        "featureGates.RestartJob: Forbidden: RestartJob is a feature gate of jobset v0.12.0"
        in capsys.readouterr().err
    )
    with pytest.raises(SystemExit):
        cli.parse_args(["--feature-gates", "Bogus=true"])
    assert "featureGates.Bogus: unrecognized feature gate: Bogus" in capsys.readouterr().err
    args = cli.parse_args(["--level", "v2.3", "--feature-gates", "RestartJob=true,ElasticJobSet=true"])
    assert args.feature_gates == {"RestartJob": True, "ElasticJobSet": True}


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
        "--api-level=v2.1",  # named: the level of callers that name none, not the binary's default
    ]
    assert ours.process.extra_env == {"KUBECONFIG": str(tmp_path / "kubeconfig")}
    assert ours.webhook_ports() == {
        harness.WEBHOOK_DIR / "jobset.yaml": ours.webhook,
        harness.WEBHOOK_DIR / "trainer.yaml": ours.webhook,
    }


def test_our_manager_runs_every_component_unless_told(tmp_path: Path) -> None:
    ours = harness.our_manager(TinyCA("test-ca"), tmp_path, tmp_path / "kubeconfig")
    assert not any(arg.startswith("--controllers") for arg in ours.process.argv)


def test_our_manager_is_told_its_api_level(tmp_path: Path) -> None:
    ours = harness.our_manager(
        TinyCA("test-ca"), tmp_path, tmp_path / "kubeconfig", api_level=levels.get("v2.3")
    )
    assert ours.process.argv[-1] == "--api-level=v2.3"


def _routed(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Configurations by name, service references left out (the harness makes them URLs)."""
    out = {}
    for doc in copy.deepcopy(docs):
        for hook in doc.get("webhooks", []):
            hook["clientConfig"].pop("service", None)
        out[doc["metadata"]["name"]] = doc
    return out


def test_at_the_default_level_both_sides_get_the_configurations_of_config_webhook() -> None:
    inputs = harness.LevelInputs(levels.get("v2.1"))
    today = _routed(
        configurations([harness.WEBHOOK_DIR / "jobset.yaml", harness.WEBHOOK_DIR / "trainer.yaml"])
    )
    jobset, trainer = inputs.their_webhooks()
    assert _routed(jobset + trainer) == today  # upstream's of jobset v0.10.1 and trainer v2.1.0
    assert _routed(inputs.our_webhooks()) == today  # config/default's
    assert inputs.runtimes_source() == "config/runtimes"
    assert inputs.runtimes() == harness._runtime_files()
    assert inputs.our_crds() == [harness.ROOT / "config/crd/bases"]


def test_at_v2_3_theirs_are_upstreams_and_ours_the_overlays() -> None:
    inputs = harness.LevelInputs(levels.get("v2.3"))
    assert inputs.originals.describe() == "jobset v0.12.0 + trainer v2.3.0"
    jobset, trainer = inputs.their_webhooks()
    names = {d["metadata"]["name"] for d in trainer}
    assert names == {"defaulter.trainer.kubeflow.org", "validator.trainer.kubeflow.org"}
    defaulter = next(d for d in trainer if d["kind"] == "MutatingWebhookConfiguration")
    assert defaulter["webhooks"][0]["clientConfig"]["service"]["path"] == (
        "/mutate-trainer-kubeflow-org-v1alpha1-trainjob"
    )
    assert needs_runtimes(defaulter) and not any(needs_runtimes(d) for d in jobset)
    assert {d["metadata"]["name"] for d in jobset} == {
        "jobset-mutating-webhook-configuration",
        "jobset-validating-webhook-configuration",
    }
    ours = {d["metadata"]["name"] for d in inputs.our_webhooks()}
    assert {"jobset-mutating-webhook-configuration", "validator.trainer.kubeflow.org"} <= ours
    if levels.get("v2.3").runtime.trainjob_defaulter:
        assert levels.get("v2.3").runtime.trainjob_defaulter in ours
    assert inputs.our_crds() == [
        harness.ROOT / "config/overlays/v2.3/crd",
        *harness.THIRD_PARTY_CRDS,
    ]
    assert inputs.their_crds()[0].match("sigs.k8s.io/jobset@v0.12.0/config/components/crd/bases/*.yaml")
    # config/runtimes are v2.1's: both sides get upstream v2.3.0's
    assert inputs.runtimes() == [inputs.originals.runtimes()]
    assert "v2.3.0" in inputs.runtimes_source()
    shipped = {p.name for p in inputs.originals.runtimes().rglob("*.yaml")}
    assert {"jax_distributed.yaml", "xgboost_distributed.yaml", "torch_distributed.yaml"} <= shipped


async def test_starting_the_go_side_builds_the_originals_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The migrated run starts both sides at once: a Go build of minutes on the event loop froze
    ours' readiness wait, which then found its 180 s gone (the cold CI of 4 December)."""

    class Built(Exception):
        pass

    def build(self: originals.Originals, *, quiet: bool = False) -> dict[str, tuple[Path, float]]:
        time.sleep(0.3)  # a build: blocking, as go build is
        raise Built

    monkeypatch.setattr(originals.Originals, "build", build)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        with pytest.raises(Built):
            await harness.start_theirs(tmp_path, 0, None, level=levels.get("v2.3"))
    finally:
        task.cancel()
    assert ticks >= 10  # the loop ran on while the build blocked its thread
