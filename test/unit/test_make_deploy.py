"""`make deploy` / `make undeploy` as kubectl sees them (no container runtime here to run the Pod).

A recording KUBECTL stands in for kubectl: it logs each call and renders what `apply -k` /
`delete -k` would send with the real kubectl's kustomize. The Deployment's rollout needs a Pod
that runs the image, which these machines cannot build; the in-cluster e2e test runs the same
manifests with the manager started as the Pod would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from manager.envtest import assets

ROOT = Path(__file__).resolve().parents[2]

RECORDER = """#!/bin/bash
# Records the call; for -k DIR also renders DIR with the real kubectl (relative to make's cwd).
n=$(ls "$REC_DIR" | grep -c '^call-' || true)
printf '%s\\n' "$@" > "$REC_DIR/call-$n"
prev=""
for a in "$@"; do
  if [ "$prev" = "-k" ]; then "$REAL_KUBECTL" kustomize "$a" > "$REC_DIR/render-$n" || exit 1; fi
  prev="$a"
done
"""


def _make(target: str, tmp_path: Path, *variables: str) -> list[tuple[list[str], list[dict]]]:
    recorder = tmp_path / "kubectl"
    recorder.write_text(RECORDER)
    recorder.chmod(0o755)
    calls = tmp_path / "calls"
    calls.mkdir()
    env = {
        **os.environ,
        "REC_DIR": str(calls),
        "REAL_KUBECTL": str(assets.ensure(["kubectl"])["kubectl"]),
    }
    proc = subprocess.run(
        ["make", "-s", target, f"KUBECTL={recorder}", *variables],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = []
    for i in range(len(list(calls.glob("call-*")))):
        args = (calls / f"call-{i}").read_text().splitlines()
        render = calls / f"render-{i}"
        docs = (
            [d for d in yaml.load_all(render.read_text(), Loader=yaml.CSafeLoader) if d]
            if render.exists()
            else []
        )
        out.append((args, docs))
    return out


def _level_crds(level: str) -> list[str]:
    """The CRD files of LEVEL, as `make undeploy` names them to kubectl."""
    out = subprocess.run(
        [sys.executable, "-m", "trainer.install", "--level", level, "paths", "crds"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()


def test_make_deploy_applies_config_default_with_img_then_waits_then_the_runtimes(tmp_path: Path) -> None:
    calls = _make("deploy", tmp_path, "IMG=registry.example:5000/team/trainer:v9")
    assert [c[0][:2] for c in calls] == [
        ["apply", "--server-side"],
        ["-n", "kubeflow-system"],
        ["apply", "--server-side"],
    ]
    (_, manager), (rollout, _), (_, runtimes) = calls
    kinds = {d["kind"] for d in manager}
    assert {
        "Namespace",
        "CustomResourceDefinition",
        "Deployment",
        "Service",
        "MutatingWebhookConfiguration",
    } <= kinds
    assert "ClusterTrainingRuntime" not in kinds
    (deployment,) = [d for d in manager if d["kind"] == "Deployment"]
    assert (
        deployment["spec"]["template"]["spec"]["containers"][0]["image"]
        == "registry.example:5000/team/trainer:v9"
    )
    assert rollout[2:4] == ["rollout", "status"]
    assert "deployment/kubeflow-trainer-controller-manager" in rollout
    assert {d["kind"] for d in runtimes} == {"ClusterTrainingRuntime"}


def test_make_deploy_defaults_to_level_v2_3_and_level_v2_1_takes_its_overlay_and_runtimes(
    tmp_path: Path,
) -> None:
    def deployed(calls: list[tuple[list[str], list[dict]]]) -> tuple[list[str], set[str], set[str]]:
        (_, manager), _, (_, runtimes) = calls
        (deployment,) = [d for d in manager if d["kind"] == "Deployment"]
        crds = {d["metadata"]["name"] for d in manager if d["kind"] == "CustomResourceDefinition"}
        assert "trainjobs.trainer.kubeflow.org" in crds
        public = {d["metadata"]["name"] for d in manager if d["kind"] == "ConfigMap"}
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        return (
            [a for a in args if a.startswith("--api-level")],
            public,
            {d["metadata"]["name"] for d in runtimes},
        )

    (tmp_path / "default").mkdir()
    (tmp_path / "v2.1").mkdir()
    flags, public, runtimes = deployed(_make("deploy", tmp_path / "default"))
    assert flags == ["--api-level=v2.3"]
    assert "kubeflow-trainer-public" in public
    assert {"jax-distributed", "xgboost-distributed", "torch-distributed"} <= runtimes
    flags, public, runtimes = deployed(_make("deploy", tmp_path / "v2.1", "LEVEL=v2.1"))
    assert flags == ["--api-level=v2.1"]
    assert "kubeflow-trainer-public" not in public
    assert "jax-distributed" not in runtimes and "torch-distributed" in runtimes


def test_make_deploy_default_image_is_the_agreed_one(tmp_path: Path) -> None:
    (_, manager), *_ = _make("deploy", tmp_path)
    (deployment,) = [d for d in manager if d["kind"] == "Deployment"]
    assert (
        deployment["spec"]["template"]["spec"]["containers"][0]["image"]
        == "trainer-controller-manager-py:latest"
    )


def test_make_undeploy_deletes_the_runtimes_while_the_manager_runs_then_the_rest(tmp_path: Path) -> None:
    # Runtimes first, marked for deletion without waiting (one in use keeps its finalizer); then
    # the CRDs while the manager still runs, so it drops the in-use finalizers as the TrainJobs
    # go; then the manager itself.
    (first, runtimes), (second, _), (third, manager) = _make("undeploy", tmp_path)
    assert first[:3] == ["delete", "--ignore-not-found", "--wait=false"]
    assert {d["kind"] for d in runtimes} == {"ClusterTrainingRuntime"}
    assert second[:2] == third[:2] == ["delete", "--ignore-not-found"]
    assert [second[i + 1] for i, a in enumerate(second) if a == "-f"] == _level_crds("v2.3")  # the default
    assert "Deployment" in {d["kind"] for d in manager}


def test_make_deploy_applies_a_deploy_patch_on_top_and_nothing_else_changes(tmp_path: Path) -> None:
    patch = ROOT / "test" / "e2e" / "realnode" / "deploy-patch.yaml"
    (tmp_path / "plain").mkdir()
    (tmp_path / "patched").mkdir()
    plain = _make("deploy", tmp_path / "plain", "IMG=trainer:v1")
    patched = _make("deploy", tmp_path / "patched", "IMG=trainer:v1", f"DEPLOY_PATCH={patch}")

    def deployment(calls: list[tuple[list[str], list[dict]]]) -> dict:
        (found,) = [d for d in calls[0][1] if d["kind"] == "Deployment"]
        return found

    spec = deployment(patched)["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"envtest/real-node": "true"}
    assert spec["tolerations"] == [
        {"key": "envtest/real-node", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]
    for key in ("nodeSelector", "tolerations"):
        del spec[key]
    assert deployment(patched) == deployment(plain)
    assert [d for d in patched[0][1] if d["kind"] != "Deployment"] == [
        d for d in plain[0][1] if d["kind"] != "Deployment"
    ]


def test_make_deploy_at_level_v2_3_applies_the_v2_3_overlay_then_v2_3_0s_runtimes(tmp_path: Path) -> None:
    """`make deploy LEVEL=v2.3`: config/overlays/v2.3 (its CRDs, webhooks, RBAC, the public
    ConfigMap, the manager with --api-level=v2.3), then Trainer v2.3.0's shipped runtimes."""
    (_, manager), (rollout, _), (_, runtimes) = _make("deploy", tmp_path, "LEVEL=v2.3", "IMG=trainer:v2")
    names = {(d["kind"], d["metadata"]["name"]) for d in manager}
    assert {
        ("ConfigMap", "kubeflow-trainer-public"),
        ("Role", "kubeflow-trainer-public"),
        ("RoleBinding", "kubeflow-trainer-public"),
        ("MutatingWebhookConfiguration", "defaulter.trainer.kubeflow.org"),
    } <= names
    (deployment,) = [d for d in manager if d["kind"] == "Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "trainer:v2"
    assert "--api-level=v2.3" in container["args"]
    assert rollout[2:4] == ["rollout", "status"]
    assert {d["metadata"]["name"] for d in runtimes} == {
        "deepspeed-distributed",
        "jax-distributed",
        "mlx-distributed",
        "torch-distributed",
        "torchtune-llama3.2-1b",
        "torchtune-llama3.2-3b",
        "torchtune-qwen2.5-1.5b",
        "xgboost-distributed",
    }
    # `make undeploy LEVEL=v2.3` deletes the same two
    (tmp_path / "undeploy").mkdir()
    (_, gone_runtimes), (crds, _), (_, gone_manager) = _make("undeploy", tmp_path / "undeploy", "LEVEL=v2.3")
    assert [crds[i + 1] for i, a in enumerate(crds) if a == "-f"] == _level_crds("v2.3")
    assert "config/overlays/v2.3/crd/trainer.kubeflow.org_trainjobs.yaml" in _level_crds("v2.3")
    assert gone_runtimes == runtimes
    assert {(d["kind"], d["metadata"]["name"]) for d in gone_manager} == names
