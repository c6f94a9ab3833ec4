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
        # each level's Deployment names its level (the binary's default would do for one only)
        assert flags == [f"--api-level={level.name}"]


def test_config_default_is_the_default_levels_manifests() -> None:
    assert levels.DEFAULT.name == "v2.3"
    assert rendered(ROOT / "config" / "default") == rendered(ROOT / "config" / levels.DEFAULT.manifests)


def test_the_v2_3_overlay_adds_v2_3_0s_objects_and_changes_only_what_v2_3_0_changed() -> None:
    default = {key(d): d for d in rendered(ROOT / "config" / "overlays" / "v2.1")}
    overlay = {key(d): d for d in rendered(ROOT / "config" / "overlays" / "v2.3")}
    added = [
        ("ConfigMap", "kubeflow-system", "kubeflow-trainer-public"),
        ("MutatingWebhookConfiguration", "", "defaulter.trainer.kubeflow.org"),
        ("Role", "kubeflow-system", "kubeflow-trainer-public"),
        ("RoleBinding", "kubeflow-system", "kubeflow-trainer-public"),
    ]
    assert sorted(overlay) == sorted([*default, *added])
    changed = sorted(k for k in default if overlay[k] != default[k])
    assert changed == [
        ("ClusterRole", "", "kubeflow-trainer-controller-manager"),
        ("ClusterRole", "", "kubeflow-trainer-controller-manager-extra"),
        ("CustomResourceDefinition", "", "clustertrainingruntimes.trainer.kubeflow.org"),
        ("CustomResourceDefinition", "", "jobsets.jobset.x-k8s.io"),
        ("CustomResourceDefinition", "", "trainingruntimes.trainer.kubeflow.org"),
        ("CustomResourceDefinition", "", "trainjobs.trainer.kubeflow.org"),
        ("Deployment", "kubeflow-system", "kubeflow-trainer-controller-manager"),
        ("Service", "kubeflow-system", "kubeflow-trainer-controller-manager"),
        ("ValidatingWebhookConfiguration", "", "validator.trainer.kubeflow.org"),
    ]


def test_the_v2_3_roles_grant_what_v2_1s_do_plus_v2_3_0s_new_grants() -> None:
    """The -extra role loses only the two grants upstream's role now has: together the
    ServiceAccount may do exactly what it may at v2.1, and also write events.k8s.io Events and
    create PVCs (JobSet v0.12.0's volumeClaimPolicies)."""

    def grants(docs: list[Json]) -> set[tuple[str, str, str, str]]:
        out = set()
        for doc in docs:
            if doc["kind"] != "ClusterRole" or not doc["metadata"]["name"].startswith(
                "kubeflow-trainer-controller-manager"
            ):
                continue
            for rule in doc["rules"]:
                for group in rule.get("apiGroups") or ():
                    for resource in rule["resources"]:
                        for verb in rule["verbs"]:
                            out.add((group, resource, verb, ",".join(rule.get("resourceNames") or ())))
        return out

    v2_1 = grants(rendered(ROOT / "config" / "overlays" / "v2.1"))
    v2_3 = grants(rendered(ROOT / "config" / "overlays" / "v2.3"))
    assert v2_3 - v2_1 == {
        *(("events.k8s.io", "events", v, "") for v in ("create", "patch", "update", "watch")),
        # JobSet v0.12.0's volumeClaimPolicies
        *(("", "persistentvolumeclaims", v, "") for v in ("create", "get", "list", "watch")),
    }
    assert v2_1 - v2_3 == set()


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
