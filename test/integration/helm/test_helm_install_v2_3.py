"""`helm install --set apiLevel=v2.3` of charts/kubeflow-trainer onto a real kube-apiserver.

A control plane of its own with no CRDs: the chart installs the level's (TrainJob with
`spec.runtimePatches`, JobSet v0.12.0 with `volumeClaimPolicies`), the TrainJob defaulter's
MutatingWebhookConfiguration, ConfigMap kubeflow-trainer-public readable by every authenticated
user, the v2.3 ClusterRole and Service ports and a manager started with --api-level=v2.3.
There is no kubelet, so the Deployment never runs: the runtimes, labelled
`trainer.kubeflow.org/webhook-validation: disabled`, are admitted without a manager (the runtime
webhooks skip them; at v2.1 the same upgrade is refused), with their pre-delete hook. Uninstall
keeps the CRDs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
import yaml
from test_helm_install import CHART, MANAGER, NS, RELEASE, Json, Tools, _kind_arg

from manager.envtest import Environment


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tools]:
    env = Environment(tmp_path_factory.mktemp("helm-install-v2.3") / "env")
    asyncio.run(env.start())
    try:
        yield Tools(env)
    finally:
        asyncio.run(env.stop())


def rendered(tools: Tools, *args: str) -> list[Json]:
    out = tools.ok("helm", "template", RELEASE, str(CHART), "-n", NS, "--set", "apiLevel=v2.3", *args)
    return [d for d in yaml.load_all(out, Loader=yaml.CSafeLoader) if d]


def spec_properties(crd: Json) -> set[str]:
    version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    return set(version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"])


def test_helm_install_at_v2_3_creates_the_levels_objects_and_admits_its_runtimes(tools: Tools) -> None:
    out = tools.ok(
        "helm", "install", RELEASE, str(CHART), "-n", NS, "--create-namespace", "--set", "apiLevel=v2.3"
    )
    assert "STATUS: deployed" in out, out

    objects = rendered(tools)
    # config/overlays/v2.3 but the Namespace: 6 CRDs, 19 other objects
    assert len(objects) == 25
    for obj in objects:
        meta = obj["metadata"]
        live = tools.get(_kind_arg(obj), meta["name"], meta.get("namespace", ""))
        assert live is not None, f"{obj['kind']} {meta['name']} was not created"
        assert live["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE, meta["name"]
        if obj["kind"] == "CustomResourceDefinition":
            conditions = {c["type"]: c["status"] for c in live["status"]["conditions"]}
            assert conditions.get("Established") == "True", meta["name"]

    trainjobs = tools.get("CustomResourceDefinition", "trainjobs.trainer.kubeflow.org")
    assert trainjobs is not None
    assert "runtimePatches" in spec_properties(trainjobs)
    assert "podTemplateOverrides" not in spec_properties(trainjobs)
    jobsets = tools.get("CustomResourceDefinition", "jobsets.jobset.x-k8s.io")
    assert jobsets is not None and "volumeClaimPolicies" in spec_properties(jobsets)

    deployment = tools.get("Deployment.apps", MANAGER, NS)
    assert deployment is not None
    assert "--api-level=v2.3" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    defaulter = tools.get(
        "MutatingWebhookConfiguration.admissionregistration.k8s.io", "defaulter.trainer.kubeflow.org"
    )
    assert defaulter is not None
    assert defaulter["webhooks"][0]["clientConfig"]["service"] == {
        "name": MANAGER,
        "namespace": NS,
        "path": "/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
        "port": 443,
    }
    service = tools.get("Service", MANAGER, NS)
    assert service is not None
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {
        "monitoring-port": 8443,
        "webhook-server": 443,
        "status-server": 10443,
    }
    public = tools.get("ConfigMap", "kubeflow-trainer-public", NS)
    assert public is not None and public["data"] == {"kubeflow_trainer_version": "v2.3.0"}

    # Every authenticated user may read kubeflow-trainer-public, and not the manager's config.
    def can(verb_resource: str, name: str) -> str:
        out = tools.run(
            "kubectl",
            "auth",
            "can-i",
            verb_resource,
            name,
            "-n",
            NS,
            "--as=alice",
            "--as-group=system:authenticated",
        )
        return out.stdout.strip()

    assert can("get", "configmap/kubeflow-trainer-public") == "yes"
    assert can("get", "configmap/kubeflow-trainer-config") == "no"

    # The v2.3 runtimes skip the runtime webhooks (their label), so no manager is needed.
    tools.ok(
        "helm",
        "upgrade",
        RELEASE,
        str(CHART),
        "-n",
        NS,
        "--reuse-values",
        "--set",
        "runtimes.defaultEnabled=true",
    )
    runtimes = json.loads(tools.ok("kubectl", "get", "clustertrainingruntimes", "-o", "json"))["items"]
    names = sorted(r["metadata"]["name"] for r in runtimes)
    assert names == sorted(
        o["metadata"]["name"]
        for o in rendered(tools, "--set", "runtimes.defaultEnabled=true")
        if o["kind"] == "ClusterTrainingRuntime"
    )
    assert {"jax-distributed", "xgboost-distributed", "torch-distributed"} <= set(names)

    # The runtimes bring their pre-delete hook (upstream v2.3.0's): a Job, which no kubelet runs
    # here (test_helm_uninstall_hook.py runs its command as its pod would; the real node runs
    # the Job: test/e2e/realnode), so the uninstall skips it.
    hooks = [d for d in yaml.safe_load_all(tools.ok("helm", "get", "hooks", RELEASE, "-n", NS)) if d]
    assert [
        (h["kind"], h["metadata"]["name"], h["metadata"]["annotations"]["helm.sh/hook"]) for h in hooks
    ] == [("Job", f"{RELEASE}-runtimes-installer-cleanup", "pre-delete")]
    # Uninstall removes the release's objects and the runtimes; the CRDs stay (resource-policy keep).
    tools.ok("helm", "uninstall", RELEASE, "-n", NS, "--wait", "--no-hooks")
    for obj in objects:
        meta = obj["metadata"]
        live = tools.get(_kind_arg(obj), meta["name"], meta.get("namespace", ""))
        if obj["kind"] == "CustomResourceDefinition":
            assert live is not None, f"the CRD {meta['name']} was deleted"
        else:
            assert live is None, f"{obj['kind']} {meta['name']} is still there after uninstall"
    left = json.loads(tools.ok("kubectl", "get", "clustertrainingruntimes", "-o", "json"))["items"]
    assert left == []
