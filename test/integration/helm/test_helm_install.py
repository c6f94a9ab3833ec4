"""`helm install` of charts/kubeflow-trainer onto a real kube-apiserver creates its objects.

A control plane of its own (no CRDs pre-installed: the chart's crds/ must install them, and the
chart's cluster-wide webhook configurations must not reach the session's shared API server).
There is no controller-manager here, so the Deployment never becomes available: the release is
installed without --wait, and everything else is checked as created.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager.envtest import Environment, assets

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "kubeflow-trainer"
RELEASE = "kubeflow-trainer"
NS = "kubeflow-system"
MANAGER = "kubeflow-trainer-controller-manager"
Json = dict[str, Any]


class Tools:
    def __init__(self, env: Environment) -> None:
        found = assets.ensure(["helm", "kubectl"])
        self.helm, self.kubectl, self.kubeconfig = (
            str(found["helm"]),
            str(found["kubectl"]),
            str(env.kubeconfig),
        )
        self.home = env.dir / "helm-home"

    def run(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(self.home),
            "KUBECONFIG": self.kubeconfig,
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_DATA_HOME": str(self.home / "data"),
        }
        binary = self.helm if tool == "helm" else self.kubectl
        return subprocess.run(
            [binary, *args], capture_output=True, text=True, check=False, env=env, timeout=300
        )

    def ok(self, tool: str, *args: str) -> str:
        out = self.run(tool, *args)
        assert out.returncode == 0, f"{tool} {' '.join(args)}: {out.stderr}"
        return out.stdout

    def get(self, kind: str, name: str, namespace: str = "") -> Json | None:
        args = ["get", kind, name, "-o", "json", *(["-n", namespace] if namespace else [])]
        out = self.run("kubectl", *args)
        if out.returncode != 0:
            assert "NotFound" in out.stderr or "not found" in out.stderr, out.stderr
            return None
        return dict(json.loads(out.stdout))


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tools]:
    env = Environment(tmp_path_factory.mktemp("helm-install") / "env")
    asyncio.run(env.start())
    try:
        yield Tools(env)
    finally:
        asyncio.run(env.stop())


def rendered(tools: Tools, *args: str) -> list[Json]:
    out = tools.ok("helm", "template", RELEASE, str(CHART), "-n", NS, "--include-crds", *args)
    return [d for d in yaml.safe_load_all(out) if d]


def _kind_arg(obj: Json) -> str:
    group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
    return f"{obj['kind']}.{group}" if group else obj["kind"]


def test_helm_install_creates_every_object_then_upgrade_and_uninstall(tools: Tools) -> None:
    # level v2.1 (test_helm_install_v2_3.py installs the default level, v2.3)
    out = tools.ok(
        "helm",
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        NS,
        "--create-namespace",
        "--set",
        "apiLevel=v2.1",
    )
    assert "STATUS: deployed" in out, out
    assert tools.get("Namespace", NS) is not None, "--create-namespace made the release namespace"

    objects = rendered(tools, "--set", "apiLevel=v2.1")
    # The deployment object set (README) but the Namespace: 6 CRDs, 15 other objects.
    assert len(objects) == 21
    for obj in objects:
        meta = obj["metadata"]
        live = tools.get(_kind_arg(obj), meta["name"], meta.get("namespace", ""))
        assert live is not None, f"{obj['kind']} {meta['name']} was not created"
        if obj["kind"] == "CustomResourceDefinition":
            conditions = {c["type"]: c["status"] for c in live["status"]["conditions"]}
            assert conditions.get("Established") == "True", meta["name"]
            assert live["spec"]["names"]["kind"] == obj["spec"]["names"]["kind"]
            continue
        assert live["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm", meta["name"]
        assert live["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE

    config = tools.get("ConfigMap", "kubeflow-trainer-config", NS)
    assert config is not None
    expected = next(o for o in objects if o["kind"] == "ConfigMap")["data"]
    assert config["data"] == expected
    hooks = tools.get(
        "ValidatingWebhookConfiguration.admissionregistration.k8s.io", "validator.trainer.kubeflow.org"
    )
    assert hooks is not None
    assert {h["clientConfig"]["service"]["name"] for h in hooks["webhooks"]} == {MANAGER}
    # The CRDs are served: the API knows TrainJobs and JobSets.
    tools.ok("kubectl", "get", "trainjobs.trainer.kubeflow.org,jobsets.jobset.x-k8s.io", "-A")

    # An upgrade changes the live Deployment.
    tools.ok(
        "helm", "upgrade", RELEASE, str(CHART), "-n", NS, "--reuse-values", "--set", "manager.replicas=3"
    )
    deployment = tools.get("Deployment.apps", MANAGER, NS)
    assert deployment is not None and deployment["spec"]["replicas"] == 3

    # Runtimes are off by default because their validating webhook needs a running manager:
    # without one the API server refuses them (failurePolicy Fail) and the upgrade fails.
    refused = tools.run(
        "helm",
        "upgrade",
        RELEASE,
        str(CHART),
        "-n",
        NS,
        "--reuse-values",
        "--set",
        "runtimes.torchDistributed.enabled=true",
    )
    assert refused.returncode != 0
    assert "validator.clustertrainingruntime.trainer.kubeflow.org" in refused.stderr, refused.stderr

    # Uninstall removes the release's objects; CRDs (crds/) and the namespace stay, as Helm does.
    # The failed upgrade's release enables a runtime, so it has the runtimes' pre-delete hook, a
    # Job no kubelet runs here: test_helm_uninstall_hook.py runs it as its pod would.
    tools.ok("helm", "uninstall", RELEASE, "-n", NS, "--wait", "--no-hooks")
    for obj in objects:
        meta = obj["metadata"]
        live = tools.get(_kind_arg(obj), meta["name"], meta.get("namespace", ""))
        if obj["kind"] == "CustomResourceDefinition":
            assert live is not None, f"helm keeps CRDs: {meta['name']}"
        else:
            assert live is None, f"{obj['kind']} {meta['name']} is still there after uninstall"
