"""`kubectl apply -k config/overlays/v2.3`: config/default at API level v2.3, as kustomize renders it."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

import yaml

from manager.envtest import assets
from trainer import levels

ROOT = Path(__file__).resolve().parents[3]
Json = dict[str, Any]


@functools.cache
def _render(directory: str) -> str:
    kubectl = assets.ensure(["kubectl"])["kubectl"]
    out = subprocess.run([str(kubectl), "kustomize", directory], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout


def rendered(directory: Path) -> list[Json]:
    return [d for d in yaml.load_all(_render(str(directory)), Loader=yaml.CSafeLoader) if d]


def key(doc: Json) -> tuple[str, str, str]:
    meta = doc["metadata"]
    return doc["kind"], meta.get("namespace", ""), meta["name"]


def test_each_levels_manifests_install_its_own_crds_and_start_the_manager_at_its_level() -> None:
    for level in levels.LEVELS.values():
        docs = rendered(ROOT / "config" / level.manifests)
        crds = {d["metadata"]["name"]: d for d in docs if d["kind"] == "CustomResourceDefinition"}
        assert levels.of_trainjob_crd(crds["trainjobs.trainer.kubeflow.org"]) is level
        for path in (ROOT / "config" / level.crd_dir).glob("*.yaml"):
            generated = yaml.safe_load(path.read_text())
            assert crds[generated["metadata"]["name"]] == generated, (
                f"{path} is not what {level.name} installs"
            )
        deployment = next(d for d in docs if d["kind"] == "Deployment")
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        flags = [a for a in args if a.startswith("--api-level")]
        assert flags == ([] if level is levels.DEFAULT else [f"--api-level={level.name}"])


def test_the_v2_3_overlay_changes_only_the_crds_the_managers_flag_and_its_events_rule() -> None:
    default = {key(d): d for d in rendered(ROOT / "config" / "default")}
    overlay = {key(d): d for d in rendered(ROOT / "config" / "overlays" / "v2.3")}
    defaulter = ("MutatingWebhookConfiguration", "", "defaulter.trainer.kubeflow.org")
    assert sorted(overlay) == sorted([*default, defaulter])
    del overlay[defaulter]
    changed = sorted(k for k in overlay if overlay[k] != default[k])
    assert changed == [
        ("ClusterRole", "", "kubeflow-trainer-controller-manager"),
        ("CustomResourceDefinition", "", "clustertrainingruntimes.trainer.kubeflow.org"),
        ("CustomResourceDefinition", "", "jobsets.jobset.x-k8s.io"),
        ("CustomResourceDefinition", "", "trainingruntimes.trainer.kubeflow.org"),
        ("CustomResourceDefinition", "", "trainjobs.trainer.kubeflow.org"),
        ("Deployment", "kubeflow-system", "kubeflow-trainer-controller-manager"),
    ]


def test_the_v2_3_role_writes_events_k8s_io_events_as_v2_3_0s_does() -> None:
    role_key = ("ClusterRole", "", "kubeflow-trainer-controller-manager")
    default = {key(d): d for d in rendered(ROOT / "config" / "default")}[role_key]
    overlay = {key(d): d for d in rendered(ROOT / "config" / "overlays" / "v2.3")}[role_key]
    changed = [(a, b) for a, b in zip(default["rules"], overlay["rules"], strict=True) if a != b]
    assert changed == [
        (
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "update", "watch"]},
            {
                "apiGroups": ["", "events.k8s.io"],
                "resources": ["events"],
                "verbs": ["create", "patch", "update", "watch"],
            },
        )
    ]


def test_the_v2_3_overlay_ships_v2_3_0s_trainjob_defaulter_configuration() -> None:
    (mwc,) = [
        d
        for d in rendered(ROOT / "config" / "overlays" / "v2.3")
        if key(d) == ("MutatingWebhookConfiguration", "", "defaulter.trainer.kubeflow.org")
    ]
    assert mwc["webhooks"] == [
        {
            "admissionReviewVersions": ["v1"],
            "clientConfig": {
                "service": {
                    "name": "kubeflow-trainer-controller-manager",
                    "namespace": "kubeflow-system",
                    "path": "/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
                }
            },
            "failurePolicy": "Fail",
            "name": "defaulter.trainjob.trainer.kubeflow.org",
            "rules": [
                {
                    "apiGroups": ["trainer.kubeflow.org"],
                    "apiVersions": ["v1alpha1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["trainjobs"],
                }
            ],
            "sideEffects": "None",
        }
    ]
    assert levels.LEVELS["v2.3"].runtime.trainjob_defaulter == mwc["metadata"]["name"]
    assert levels.LEVELS["v2.1"].runtime.trainjob_defaulter is None
