"""What `kubectl apply --server-side -k config/default` (level v2.3) and `-k config/overlays/v2.1`
install, rendered by kubectl's kustomize.

The object set is the deployment's (README, "Deploy"): every name here is what a user
or a Helm upgrade finds in the cluster, and every webhook must call the one Service that fronts
the manager, or JobSet and Pod creation is refused once deployed.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from manager.envtest import assets
from manager.testing.fake import FakeClient
from trainer import install, local_run
from webhooks.certs import MWC_GVK, VWC_GVK

ROOT = Path(__file__).resolve().parents[2]
NS = "kubeflow-system"
SERVICE = "kubeflow-trainer-controller-manager"
Json = dict[str, Any]

CRDS = {
    "clustertrainingruntimes.trainer.kubeflow.org",
    "trainingruntimes.trainer.kubeflow.org",
    "trainjobs.trainer.kubeflow.org",
    "jobsets.jobset.x-k8s.io",
    "podgroups.scheduling.x-k8s.io",
    "elasticquotas.scheduling.x-k8s.io",
}
AGREED: set[tuple[str, str, str]] = {
    ("Namespace", "", NS),
    *{("CustomResourceDefinition", "", name) for name in CRDS},
    ("ServiceAccount", NS, SERVICE),
    ("ClusterRole", "", "kubeflow-trainer-controller-manager"),
    ("ClusterRoleBinding", "", "kubeflow-trainer-controller-manager"),
    ("ClusterRole", "", "kubeflow-trainer-controller-manager-extra"),
    ("ClusterRoleBinding", "", "kubeflow-trainer-controller-manager-extra"),
    ("ClusterRole", "", "kubeflow-trainer-metrics-reader"),
    ("ClusterRole", "", "kubeflow-trainer-metrics-auth-role"),
    ("ClusterRoleBinding", "", "kubeflow-trainer-metrics-auth-rolebinding"),
    ("ConfigMap", NS, "kubeflow-trainer-config"),
    ("Secret", NS, "kubeflow-trainer-webhook-cert"),
    ("Service", NS, SERVICE),
    ("Deployment", NS, SERVICE),
    ("ValidatingWebhookConfiguration", "", "validator.trainer.kubeflow.org"),
    ("MutatingWebhookConfiguration", "", "jobset-mutating-webhook-configuration"),
    ("ValidatingWebhookConfiguration", "", "jobset-validating-webhook-configuration"),
}
#: Level v2.3 adds upstream v2.3.0's public ConfigMap (the SDK's version lookup), its Role and
#: RoleBinding, and the TrainJob defaulter's configuration.
AGREED_V2_3 = AGREED | {
    ("ConfigMap", NS, "kubeflow-trainer-public"),
    ("Role", NS, "kubeflow-trainer-public"),
    ("RoleBinding", NS, "kubeflow-trainer-public"),
    ("MutatingWebhookConfiguration", "", "defaulter.trainer.kubeflow.org"),
}
HOOKS = {
    "validator.clustertrainingruntime.trainer.kubeflow.org",
    "validator.trainingruntime.trainer.kubeflow.org",
    "validator.trainjob.trainer.kubeflow.org",
    "mjobset.kb.io",
    "mpod.kb.io",
    "vjobset.kb.io",
    "vpod.kb.io",
}
#: Per deployment: its objects, its webhooks, the Service's webhook target port and the
#: container's webhook port name (upstream v2.3.0 renamed it `webhook`), its shipped runtimes.
LEVELS = {
    "default": (
        AGREED_V2_3,
        HOOKS | {"defaulter.trainjob.trainer.kubeflow.org"},
        "webhook",
        "webhook",
        "overlays/v2.3/runtimes",
    ),
    "overlays/v2.1": (AGREED, HOOKS, 9443, "webhook-server", "runtimes"),
}


@functools.cache
def _render(directory: Path) -> str:
    """`kubectl kustomize DIR` with the kubectl of the asset cache (CI machines may have none)."""
    kubectl = assets.ensure(["kubectl"])["kubectl"]
    out = subprocess.run(
        [str(kubectl), "kustomize", str(directory)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def kustomize(directory: Path) -> list[Json]:
    return [d for d in yaml.load_all(_render(directory), Loader=yaml.CSafeLoader) if d]


@pytest.fixture(scope="module", params=sorted(LEVELS))
def deployment_dir(request: pytest.FixtureRequest) -> str:
    """config/default (= level v2.3) and config/overlays/v2.1."""
    return str(request.param)


@pytest.fixture(scope="module")
def default(deployment_dir: str) -> list[Json]:
    return kustomize(ROOT / "config" / deployment_dir)


def _key(doc: Json) -> tuple[str, str, str]:
    meta = doc["metadata"]
    return doc["kind"], meta.get("namespace", ""), meta["name"]


def _one(docs: list[Json], kind: str, name: str) -> Json:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def test_config_default_installs_exactly_the_agreed_objects(default: list[Json], deployment_dir: str) -> None:
    keys = [_key(d) for d in default]
    assert len(keys) == len(set(keys)), "an object is rendered twice"
    assert set(keys) == LEVELS[deployment_dir][0]


def test_every_webhook_calls_the_one_manager_service(default: list[Json], deployment_dir: str) -> None:
    _, names, target_port, _, _ = LEVELS[deployment_dir]
    hooks = [
        (doc["metadata"]["name"], hook)
        for doc in default
        if doc["kind"].endswith("WebhookConfiguration")
        for hook in doc["webhooks"]
    ]
    assert {h["name"] for _, h in hooks} == names
    for config, hook in hooks:
        service = hook["clientConfig"]["service"]
        assert "url" not in hook["clientConfig"], (config, hook["name"])
        assert (service["namespace"], service["name"], service.get("port", 443)) == (NS, SERVICE, 443), (
            config,
            hook["name"],
        )
        assert service["path"].startswith(("/validate-", "/mutate-")), hook["name"]
    ports = {p["name"]: p for p in _one(default, "Service", SERVICE)["spec"]["ports"]}
    assert (ports["webhook-server"]["port"], ports["webhook-server"]["targetPort"]) == (443, target_port)
    assert "monitoring-port" in ports


def test_the_deployment_is_hardened_and_runs_the_console_script(
    default: list[Json], deployment_dir: str
) -> None:
    deployment = _one(default, "Deployment", SERVICE)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == SERVICE
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["image"] == "trainer-controller-manager-py:latest"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["command"] == ["trainer-controller-manager"]
    assert "--config=/controller_manager_config.yaml" in container["args"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    # SIGTERM only once the deleted Pod has left kube-proxy's rules (docs/divergences.md), well
    # within the default 30 s grace period
    assert container["lifecycle"] == {"preStop": {"sleep": {"seconds": 10}}}
    assert "terminationGracePeriodSeconds" not in pod
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    # The only writable place is the /tmp emptyDir; the Secret is mounted where the rotator
    # waits for it, the shipped Configuration where --config reads it.
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    cert = volumes[mounts["/tmp/k8s-webhook-server/serving-certs"]["name"]]
    assert cert["secret"]["secretName"] == "kubeflow-trainer-webhook-cert"
    config = volumes[mounts["/controller_manager_config.yaml"]["name"]]
    assert config["configMap"]["name"] == "kubeflow-trainer-config"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports[LEVELS[deployment_dir][3]] == 9443


def test_the_shipped_configuration_matches_the_objects(default: list[Json]) -> None:
    text = _one(default, "ConfigMap", "kubeflow-trainer-config")["data"]["controller_manager_config.yaml"]
    cfg = yaml.safe_load(text)
    assert cfg["webhook"]["port"] == 9443
    assert cfg["certManagement"] == {
        "enable": True,
        "webhookServiceName": SERVICE,
        "webhookSecretName": "kubeflow-trainer-webhook-cert",
    }
    secret = _one(default, "Secret", "kubeflow-trainer-webhook-cert")
    assert not secret.get("data"), "the Secret is pre-created empty; the rotator fills it"


def test_the_service_account_is_bound_to_both_roles(default: list[Json]) -> None:
    for name in ("kubeflow-trainer-controller-manager", "kubeflow-trainer-controller-manager-extra"):
        binding = _one(default, "ClusterRoleBinding", name)
        assert binding["roleRef"]["name"] == name
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SERVICE, "namespace": NS}]


def test_runtimes_are_not_part_of_config_default(default: list[Json], deployment_dir: str) -> None:
    assert not [d for d in default if d["kind"] == "ClusterTrainingRuntime"]
    runtimes = kustomize(ROOT / "config" / LEVELS[deployment_dir][4])
    assert {d["kind"] for d in runtimes} == {"ClusterTrainingRuntime"}
    assert "torch-distributed" in {d["metadata"]["name"] for d in runtimes}


def test_the_builtin_reader_renders_config_local_as_kubectl_does() -> None:
    """`make install`/`make run` read config/local without kubectl: same objects, same content."""
    ours = {_key(d): d for d in install.render(ROOT / "config" / "local")}
    theirs = {_key(d): d for d in kustomize(ROOT / "config" / "local")}
    assert ours == theirs
    crds, objects, hooks = install.split(ours.values())
    assert {d["metadata"]["name"] for d in crds} == CRDS
    assert {d["kind"] for d in objects} == {"ClusterTrainingRuntime"}
    assert {d["metadata"]["name"] for d in hooks} == {
        "validator.trainer.kubeflow.org",
        "jobset-mutating-webhook-configuration",
        "jobset-validating-webhook-configuration",
    }


def test_the_builtin_reader_refuses_what_it_cannot_render(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: [a.yaml]\nnamespace: x\n")
    with pytest.raises(install.InstallError, match=r"field\(s\) namespace are not supported"):
        install.render(tmp_path)
    (tmp_path / "kustomization.yaml").write_text("resources: [missing.yaml]\n")
    with pytest.raises(install.InstallError, match=r"resource 'missing\.yaml' does not exist"):
        install.render(tmp_path)


async def test_make_run_registers_every_webhook_as_a_url_with_its_ca() -> None:
    _, _, hooks = install.split(install.render(ROOT / "config" / "local"))
    client = FakeClient([], cluster_scoped=[MWC_GVK, VWC_GVK])
    names = await install.register_webhooks(client, hooks, host="172.18.0.1", port=19443, ca_pem=b"CA")
    assert len(names) == 3
    for doc in hooks:
        gvk = MWC_GVK if doc["kind"].startswith("Mutating") else VWC_GVK
        live = await client.get(gvk, doc["metadata"]["name"])
        for shipped, hook in zip(doc["webhooks"], live["webhooks"], strict=True):
            path = shipped["clientConfig"]["service"]["path"]
            assert hook["clientConfig"] == {"url": f"https://172.18.0.1:19443{path}", "caBundle": "Q0E="}
            assert hook["rules"] == shipped["rules"]
    # an earlier run's configurations go away; a deployment's (Service form) are refused, not taken
    assert sorted(await install.remove_run_webhooks(client, hooks)) == sorted(
        f"{d['kind']}/{d['metadata']['name']}" for d in hooks
    )
    deployed = {k: v for k, v in hooks[0].items() if k != "metadata"} | {
        "metadata": {"name": hooks[0]["metadata"]["name"]}
    }
    await client.create(deployed)
    with pytest.raises(install.InstallError, match="calls an in-cluster Service"):
        await install.register_webhooks(client, hooks, host="::1", port=1, ca_pem=b"CA")
    assert await install.remove_run_webhooks(client, hooks) == []


@pytest.mark.parametrize(
    ("host", "bind", "ips", "dns"),
    [
        ("", "127.0.0.1", ["127.0.0.1"], ["localhost"]),
        ("172.18.0.1", "172.18.0.1", ["127.0.0.1", "172.18.0.1"], ["localhost"]),
        ("host.docker.internal", "0.0.0.0", ["127.0.0.1"], ["host.docker.internal", "localhost"]),
    ],
)
def test_make_run_serves_where_webhook_host_says_with_a_certificate_for_it(
    tmp_path: Path, host: str, bind: str, ips: list[str], dns: list[str]
) -> None:
    config_path, cert_dir, ca_pem = local_run.write_local_config(
        tmp_path, webhook_host=host, webhook_port=19443, metrics_port=18443, health_port=18081
    )
    cfg = yaml.safe_load(config_path.read_text())
    assert cfg["webhook"] == {"host": bind, "port": 19443}
    assert cfg["certManagement"] == {"enable": False}
    assert cfg["health"]["healthProbeBindAddress"] == "127.0.0.1:18081"
    assert cfg["metrics"]["bindAddress"] == "127.0.0.1:18443"
    cert = x509.load_pem_x509_certificate((cert_dir / "tls.crt").read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sorted(str(ip) for ip in sans.get_values_for_type(x509.IPAddress)) == ips
    assert sorted(sans.get_values_for_type(x509.DNSName)) == dns
    assert cert.issuer == x509.load_pem_x509_certificate(ca_pem).subject
