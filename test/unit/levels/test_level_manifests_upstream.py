"""`config/overlays/v2.3` against upstream Trainer v2.3.0's own manifests (read from its Go module,
as the conformance harness does): the ClusterRole, the public ConfigMap with its Role and
RoleBinding, the Service's ports and the runtime webhooks' object selectors are upstream's."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

import yaml
from test_level_manifests import ROOT, key, rendered

from manager.envtest import assets
from trainer import levels
from trainer.conformance import originals

Json = dict[str, Any]
NS = "kubeflow-system"
LEVEL = levels.get("v2.3")


@functools.cache
def upstream() -> Path:
    """Trainer v2.3.0's module source (the Go module cache; downloaded when missing)."""
    return originals.module_dir(originals.for_level(LEVEL).trainer)


def upstream_rendered(directory: str) -> list[Json]:
    kubectl = assets.ensure(["kubectl"])["kubectl"]
    out = subprocess.run(
        [str(kubectl), "kustomize", str(upstream() / directory)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@functools.cache
def overlay() -> dict[tuple[str, str, str], Json]:
    return {key(d): d for d in rendered(ROOT / "config" / "overlays" / "v2.3")}


def one(docs: list[Json], kind: str, name: str) -> Json:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def test_the_manager_role_is_upstream_v2_3_0s_rule_for_rule() -> None:
    theirs = one(
        upstream_rendered("manifests/base/rbac"), "ClusterRole", "kubeflow-trainer-controller-manager"
    )
    ours = overlay()[("ClusterRole", "", "kubeflow-trainer-controller-manager")]
    assert ours["rules"] == theirs["rules"]


def test_every_authenticated_user_may_read_the_public_configmap_as_upstream_lets_them() -> None:
    theirs = upstream_rendered("manifests/base/rbac")
    for kind in ("Role", "RoleBinding"):
        upstream_doc = one(theirs, kind, "kubeflow-trainer-public")
        ours = overlay()[(kind, NS, "kubeflow-trainer-public")]
        # upstream's overlay (manifests/overlays/manager) puts everything into kubeflow-system
        assert ours == {**upstream_doc, "metadata": {**upstream_doc["metadata"], "namespace": NS}}
    role = overlay()[("Role", NS, "kubeflow-trainer-public")]
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["kubeflow-trainer-public"],
            "verbs": ["get", "list", "watch"],
        }
    ]


def test_the_public_configmap_carries_the_levels_trainer_release_as_upstreams_release_writes_it() -> None:
    """Upstream's kustomization generates it from a literal its release workflow sets to the
    tag (`kubeflow_trainer_version=v2.3.0` in v2.3.0); the SDK reads that key."""
    kustomization = yaml.safe_load((upstream() / "manifests/overlays/manager/kustomization.yaml").read_text())
    (generator,) = [g for g in kustomization["configMapGenerator"] if g["name"] == "kubeflow-trainer-public"]
    assert generator["literals"] == [f"kubeflow_trainer_version={LEVEL.trainer_version}"]
    assert generator["options"] == {"disableNameSuffixHash": True}
    ours = overlay()[("ConfigMap", NS, "kubeflow-trainer-public")]
    assert ours == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kubeflow-trainer-public", "namespace": NS},
        "data": {"kubeflow_trainer_version": "v2.3.0"},
    }


def test_the_service_has_upstream_v2_3_0s_ports_and_each_targets_a_port_the_manager_listens_on() -> None:
    theirs = one(
        upstream_rendered("manifests/base/manager"), "Service", "kubeflow-trainer-controller-manager"
    )
    service = overlay()[("Service", NS, "kubeflow-trainer-controller-manager")]
    assert service["spec"]["ports"] == theirs["spec"]["ports"]
    deployment = overlay()[("Deployment", NS, "kubeflow-trainer-controller-manager")]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert {p["name"]: ports[p["targetPort"]] for p in service["spec"]["ports"]} == {
        "monitoring-port": 8443,  # the Configuration's metrics.bindAddress
        "webhook-server": 9443,
        "status-server": 10443,  # statusServer.port, served with the TrainJobStatus gate on
    }
    config = yaml.safe_load(
        overlay()[("ConfigMap", NS, "kubeflow-trainer-config")]["data"]["controller_manager_config.yaml"]
    )
    assert config["metrics"]["bindAddress"] == ":8443"


def test_the_runtime_webhooks_skip_runtimes_with_validation_disabled_as_upstreams_do() -> None:
    patch = yaml.safe_load((upstream() / "manifests/base/webhook/patch_validating.yaml").read_text())
    selectors = [op["value"] for op in patch if op["op"] == "add" and op["path"].endswith("/objectSelector")]
    theirs = yaml.safe_load_all((upstream() / "manifests/base/webhook/manifests.yaml").read_text())
    validating = next(d for d in theirs if d and d["kind"] == "ValidatingWebhookConfiguration")
    expected = {hook["name"]: None for hook in validating["webhooks"]}
    for index, selector in enumerate(selectors):
        expected[validating["webhooks"][index]["name"]] = selector
    ours = overlay()[("ValidatingWebhookConfiguration", "", "validator.trainer.kubeflow.org")]
    assert {hook["name"]: hook.get("objectSelector") for hook in ours["webhooks"]} == expected
    assert expected["validator.trainjob.trainer.kubeflow.org"] is None
    assert expected["validator.trainingruntime.trainer.kubeflow.org"] == {
        "matchExpressions": [
            {"key": "trainer.kubeflow.org/webhook-validation", "operator": "NotIn", "values": ["disabled"]}
        ]
    }
