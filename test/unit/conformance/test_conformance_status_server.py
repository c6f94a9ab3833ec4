"""The conformance runner's TrainJob status server support (``--feature-gates TrainJobStatus=true``,
``StatusRequest`` documents): the managers' launch, the normalisation of what differs per side."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from manager.envtest.certs import TinyCA
from trainer.conformance import cli, harness, originals
from trainer.conformance.normalize import Normaliser


def test_feature_gates_parse_as_a_featuregates_map() -> None:
    assert cli._gates("TrainJobStatus=true, Other=False") == {"TrainJobStatus": True, "Other": False}
    assert cli._gates("") == {}
    with pytest.raises(ValueError, match="not NAME=true"):
        cli._gates("TrainJobStatus")


def test_the_go_trainer_serves_its_status_server_in_a_private_mount_namespace(tmp_path: Path) -> None:
    built = {
        originals.JOBSET.name: (Path("/bin/jobset"), 0.0),
        originals.TRAINER.name: (Path("/bin/trainer"), 0.0),
    }
    sa_dir = tmp_path / "sa"
    go = harness.go_managers(
        built,
        TinyCA("test-ca"),
        tmp_path / "m",
        tmp_path / "kubeconfig",
        feature_gates={"TrainJobStatus": True},
        service_account_dir=sa_dir,
    )
    tr = yaml.safe_load((tmp_path / "m" / "trainer-config.yaml").read_text())
    assert tr["featureGates"] == {"TrainJobStatus": True}
    assert tr["statusServer"] == {"port": go.status_port}
    assert go.trainer.argv[:4] == ["unshare", "-m", "--propagation", "private"]
    assert go.trainer.argv[-2:] == ["/bin/trainer", f"--config={tmp_path / 'm' / 'trainer-config.yaml'}"]
    assert str(sa_dir) in go.trainer.argv
    # without the gate: the plain binary, no status server
    plain = harness.go_managers(built, TinyCA("test-ca"), tmp_path / "p", tmp_path / "kubeconfig")
    assert plain.status_port is None and plain.trainer.argv[0] == "/bin/trainer"


def test_the_mount_namespace_wrapper_shows_the_directories_at_the_fixed_paths(tmp_path: Path) -> None:
    source = tmp_path / "sa"
    source.mkdir()
    (source / "token").write_text("the token")
    argv = harness._in_mount_namespace(
        ["cat", f"{harness.IN_CLUSTER_SA_DIR}/token"], {harness.IN_CLUSTER_SA_DIR: source}
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0 and "Operation not permitted" in done.stderr:
        pytest.fail(f"unshare -m is not permitted here: {done.stderr}")
    assert (done.returncode, done.stdout) == (0, "the token")
    assert not Path(harness.IN_CLUSTER_SA_DIR).exists()  # the host's /run is untouched


def test_each_sides_status_port_and_ca_are_normalised() -> None:
    norm = Normaliser("c-status-1")
    url = "https://svc.kubeflow-system.svc:41234/apis/trainer.kubeflow.org/v1alpha1/namespaces/c-status-1/trainjobs/a/status"
    assert norm.scalar(url) == (
        "https://svc.kubeflow-system.svc:<status-port>/apis/trainer.kubeflow.org/v1alpha1/namespaces/<ns>/trainjobs/a/status"
    )
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a-tls-config"},
        "data": {"ca.crt": "PEM"},
    }
    [(key, obj)] = norm.objects("ConfigMap", [configmap]).items()
    assert key == "ConfigMap/a-tls-config" and obj["data"] == {"ca.crt": "<key material>"}
