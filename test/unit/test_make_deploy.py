"""`make deploy` / `make undeploy` as kubectl sees them (no container runtime here to run the Pod).

A recording KUBECTL stands in for kubectl: it logs each call and renders what `apply -k` /
`delete -k` would send with the real kubectl's kustomize. The Deployment's rollout needs a Pod
that runs the image, which these machines cannot build; the in-cluster e2e test runs the same
manifests with the manager started as the Pod would.
"""

from __future__ import annotations

import os
import subprocess
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


def test_make_deploy_default_image_is_the_agreed_one(tmp_path: Path) -> None:
    (_, manager), *_ = _make("deploy", tmp_path)
    (deployment,) = [d for d in manager if d["kind"] == "Deployment"]
    assert (
        deployment["spec"]["template"]["spec"]["containers"][0]["image"]
        == "trainer-controller-manager-py:latest"
    )


def test_make_undeploy_deletes_the_runtimes_while_the_manager_runs_then_the_rest(tmp_path: Path) -> None:
    # Runtimes first: the running manager releases their resource-in-use finalizers.
    (first, runtimes), (second, manager) = _make("undeploy", tmp_path)
    assert first[:2] == second[:2] == ["delete", "--ignore-not-found"]
    assert {d["kind"] for d in runtimes} == {"ClusterTrainingRuntime"}
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
