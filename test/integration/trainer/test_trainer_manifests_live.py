"""The shipped deployment manifests (config/rbac, config/manager) are accepted by a real API server,
and the ServiceAccount may do exactly what the controllers, webhooks and cert rotator need (docs/behaviour/trainer.md §7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from manager.envtest import Environment

ROOT = Path(__file__).resolve().parents[3]
SA_USER = "system:serviceaccount:kubeflow-system:kubeflow-trainer-controller-manager"
NS = "kubeflow-system"


def _files(directory: str) -> list[Path]:
    return sorted(p for p in (ROOT / "config" / directory).glob("*.yaml") if p.name != "kustomization.yaml")


@pytest.fixture
async def installed(control_plane: Environment) -> object:
    namespace = ROOT / "config" / "manager" / "namespace.yaml"  # first, as kustomize orders it
    files = [namespace, *_files("rbac"), *(f for f in _files("manager") if f != namespace)]
    applied = await control_plane.apply_manifests(files, field_manager="manifest-test")
    yield applied
    # namespaced leftovers would clash with tests that pre-create the cert Secret themselves
    for path in (
        f"/api/v1/namespaces/{NS}/secrets/kubeflow-trainer-webhook-cert",
        f"/api/v1/namespaces/{NS}/configmaps/kubeflow-trainer-config",
        f"/api/v1/namespaces/{NS}/services/kubeflow-trainer-controller-manager",
        f"/apis/apps/v1/namespaces/{NS}/deployments/kubeflow-trainer-controller-manager",
    ):
        await control_plane.request("DELETE", path)


async def _allowed(
    env: Environment, verb: str, group: str, resource: str, sub: str = "", ns: str = "", *, name: str = ""
) -> bool:
    attributes = {"verb": verb, "group": group, "resource": resource}
    if sub:
        attributes["subresource"] = sub
    if name:
        attributes["name"] = name
    if ns:
        attributes["namespace"] = ns
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": SA_USER, "groups": ["system:serviceaccounts"], "resourceAttributes": attributes},
    }
    status, body = await env.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    assert status == 201, body
    return bool(body["status"].get("allowed"))


NEEDED = [
    # Trainer ClusterRole (upstream's role.yaml)
    *[(v, "jobset.x-k8s.io", "jobsets", "") for v in ("get", "list", "watch", "create", "patch", "update")],
    *[(v, "scheduling.x-k8s.io", "podgroups", "") for v in ("get", "list", "watch", "create", "patch")],
    *[(v, "scheduling.volcano.sh", "podgroups", "") for v in ("get", "list", "watch", "create", "patch")],
    *[
        (v, "", r, "")
        for r in ("configmaps", "secrets")
        for v in ("get", "list", "watch", "create", "patch", "update")
    ],
    ("create", "", "events", ""),
    ("patch", "", "events", ""),
    *[(v, "", "limitranges", "") for v in ("get", "list", "watch")],
    *[(v, "node.k8s.io", "runtimeclasses", "") for v in ("get", "list", "watch")],
    *[
        (v, "trainer.kubeflow.org", r, "")
        for r in ("trainjobs", "trainingruntimes", "clustertrainingruntimes")
        for v in ("get", "list", "watch", "update", "patch")
    ],
    ("update", "trainer.kubeflow.org", "trainjobs", "status"),
    ("update", "trainer.kubeflow.org", "trainingruntimes", "finalizers"),
    ("update", "trainer.kubeflow.org", "clustertrainingruntimes", "finalizers"),
    *[
        (v, "admissionregistration.k8s.io", "validatingwebhookconfigurations", "")
        for v in ("get", "list", "watch", "update")
    ],
    *[(v, "coordination.k8s.io", "leases", "") for v in ("create", "get", "update")],
    # the JobSet and scheduling controllers of this manager (role_extra.yaml)
    *[(v, "batch", "jobs", "") for v in ("create", "delete", "list", "watch")],
    *[(v, "", "services", "") for v in ("create", "delete", "list", "watch")],
    ("delete", "", "pods", ""),
    ("update", "jobset.x-k8s.io", "jobsets", "status"),
    ("delete", "jobset.x-k8s.io", "jobsets", ""),  # ttlSecondsAfterFinished
    ("update", "scheduling.x-k8s.io", "podgroups", "status"),
    ("update", "scheduling.x-k8s.io", "elasticquotas", "status"),
    ("list", "scheduling.x-k8s.io", "elasticquotas", ""),
    ("get", "scheduling.k8s.io", "priorityclasses", ""),
    # the cert rotator injects the JobSet mutating configuration too
    *[
        (v, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "")
        for v in ("get", "list", "watch", "update")
    ],
]
DENIED = [
    ("delete", "trainer.kubeflow.org", "trainjobs", ""),
    ("delete", "", "secrets", ""),
    ("create", "admissionregistration.k8s.io", "validatingwebhookconfigurations", ""),
    ("create", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", ""),
]


async def test_manifests_apply_and_rbac_covers_the_manager(
    control_plane: Environment, installed: object
) -> None:
    assert "ClusterRole/kubeflow-trainer-controller-manager" in installed  # type: ignore[operator]
    assert "Deployment/kubeflow-trainer-controller-manager" in installed  # type: ignore[operator]
    missing = [n for n in NEEDED if not await _allowed(control_plane, n[0], n[1], n[2], n[3], NS)]
    assert missing == []
    granted = [d for d in DENIED if await _allowed(control_plane, d[0], d[1], d[2], d[3], NS)]
    assert granted == []
    # the start-up apiLevel check reads the TrainJob CRD, and no other
    crds = ("get", "apiextensions.k8s.io", "customresourcedefinitions")
    assert await _allowed(control_plane, *crds, name="trainjobs.trainer.kubeflow.org")
    assert not await _allowed(control_plane, *crds, name="jobsets.jobset.x-k8s.io")
