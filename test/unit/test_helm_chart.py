"""The Helm chart (charts/kubeflow-trainer), rendered by the helm of the asset cache.

With default values it renders the objects of `kubectl kustomize config/default` (level v2.3),
with `apiLevel: v2.1` those of `config/overlays/v2.1`, field by field (the only allowed
differences are listed in ``HELM_LABELS`` and ``NOT_RENDERED``). Tests that name no level render
at v2.1 (``helm_template``'s ``level``), the level they were written for; its
values land where a user expects them (JobSet's chart tests, spec 6.V); bad values are refused
by values.schema.json with a message naming the field; the copies the chart carries (CRDs,
runtimes) are the files of config/.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager.envtest import assets
from trainer import levels
from trainer.api.config_v1alpha1 import load as load_configuration

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kubeflow-trainer"
RELEASE = "kubeflow-trainer"
NS = "kubeflow-system"
MANAGER = "kubeflow-trainer-controller-manager"
CONFIG_KEY = "controller_manager_config.yaml"
Json = dict[str, Any]
Key = tuple[str, str, str]

#: Helm's bookkeeping labels: on every chart object, on no config/default object.
HELM_LABELS = {
    "helm.sh/chart",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
}
#: In config/default, not in the chart: Helm stores the release in its namespace before it
#: creates anything, so the namespace comes from `helm install --create-namespace`.
NOT_RENDERED = {("Namespace", "", NS)}
#: On the chart's CRDs only: `helm uninstall` keeps them (and the objects stored in them).
KEEP = "helm.sh/resource-policy"


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False)


def helm_template(
    *args: str, values: Json | None = None, tmp: Path | None = None, level: str | None = "v2.1"
) -> list[Json]:
    out = _template(*args, values=values, tmp=tmp, level=level)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.load_all(out.stdout, Loader=yaml.CSafeLoader) if d]


def _template(
    *args: str, values: Json | None = None, tmp: Path | None = None, level: str | None = "v2.1"
) -> subprocess.CompletedProcess[str]:
    """``helm template``; ``level``: the ``apiLevel`` set unless ``args`` or ``values`` set one
    (None: the chart's default, v2.3)."""
    helm = assets.ensure(["helm"])["helm"]
    argv = [str(helm), "template", RELEASE, str(CHART), "-n", NS, *args]
    if (
        level is not None
        and "apiLevel" not in (values or {})
        and not any(a.startswith("apiLevel=") for a in args)
    ):
        argv += ["--set", f"apiLevel={level}"]
    if values is not None:
        assert tmp is not None
        path = tmp / "values.yaml"
        path.write_text(yaml.safe_dump(values))
        argv += ["-f", str(path)]
    return _run(argv)


def kustomize(directory: Path) -> list[Json]:
    kubectl = assets.ensure(["kubectl"])["kubectl"]
    out = _run([str(kubectl), "kustomize", str(directory)])
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.load_all(out.stdout, Loader=yaml.CSafeLoader) if d]


def key(obj: Json) -> Key:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace", ""), meta["name"])


def normalise(obj: Json) -> Json:
    """Helm's four labels dropped; the Configuration compared as the YAML the manager parses."""
    out: Json = json.loads(json.dumps(obj))
    meta = out["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in HELM_LABELS}
    if labels:
        meta["labels"] = labels
    else:
        meta.pop("labels", None)
    if out["kind"] == "CustomResourceDefinition":
        annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != KEEP}
        if annotations:
            meta["annotations"] = annotations
        else:
            meta.pop("annotations", None)
        out["spec"] = without_descriptions(out["spec"])
    if out["kind"] == "ConfigMap" and CONFIG_KEY in out.get("data", {}):
        out["data"][CONFIG_KEY] = yaml.safe_load(out["data"][CONFIG_KEY])
    return out


def without_descriptions(value: Any) -> Any:
    """The chart's CRDs carry no field descriptions (hack/chart_crds.py: the 1 MiB release Secret)."""
    if isinstance(value, dict):
        return {k: without_descriptions(v) for k, v in value.items() if k != "description"}
    if isinstance(value, list):
        return [without_descriptions(v) for v in value]
    return value


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        found: list[str] = []
        for k in sorted(set(a) | set(b)):
            if k not in a:
                found.append(f"{path}.{k}: only in config/default: {b[k]!r}")
            elif k not in b:
                found.append(f"{path}.{k}: only in the chart: {a[k]!r}")
            else:
                found += differences(a[k], b[k], f"{path}.{k}")
        return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: chart {a!r} != config/default {b!r}"]


def by_key(objs: list[Json]) -> dict[Key, Json]:
    found: dict[Key, Json] = {}
    for obj in objs:
        assert key(obj) not in found, f"{key(obj)} rendered twice"
        found[key(obj)] = obj
    return found


def one(objs: list[Json], kind: str, name: str | None = None) -> Json:
    matching = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(matching) == 1, f"{len(matching)} {kind} {name or ''} rendered"
    return matching[0]


def container(objs: list[Json]) -> Json:
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["manager"]
    return dict(pod["containers"][0])


def pod_spec(objs: list[Json]) -> Json:
    return dict(one(objs, "Deployment")["spec"]["template"]["spec"])


# -- the chart renders config/default -------------------------------------------------------


def compare_with_kustomize(chart_objs: list[Json], directory: Path) -> None:
    """The chart's objects are ``kubectl kustomize directory``'s, field by field (normalised)."""
    chart = by_key(chart_objs)
    kust = by_key(kustomize(directory))
    assert set(kust) >= NOT_RENDERED, "the agreed Namespace is no longer in config/default"
    only_chart = sorted(set(chart) - set(kust))
    only_kustomize = sorted(set(kust) - NOT_RENDERED - set(chart))
    assert not only_chart and not only_kustomize, (
        f"only in the chart: {only_chart}; only in config/default: {only_kustomize}"
    )
    problems = [
        f"{k}: {d}" for k in sorted(chart) for d in differences(normalise(chart[k]), normalise(kust[k]))
    ]
    assert not problems, "\n".join(problems)


def test_default_values_render_the_objects_of_config_default() -> None:
    # the chart's own default level (v2.3), as config/default's
    compare_with_kustomize(helm_template(level=None), ROOT / "config" / "default")


def test_api_level_v2_1_renders_the_objects_of_the_v2_1_overlay() -> None:
    compare_with_kustomize(helm_template("--set", "apiLevel=v2.1"), ROOT / "config" / "overlays" / "v2.1")


def test_api_level_v2_3_renders_the_objects_of_the_v2_3_overlay() -> None:
    compare_with_kustomize(helm_template("--set", "apiLevel=v2.3"), ROOT / "config" / "overlays" / "v2.3")


def test_every_chart_object_carries_helms_labels_and_the_common_labels(tmp_path: Path) -> None:
    objs = helm_template(values={"commonLabels": {"team": "ml"}}, tmp=tmp_path)
    for obj in objs:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "Helm", key(obj)
        assert labels["app.kubernetes.io/instance"] == RELEASE, key(obj)
        assert labels["team"] == "ml", key(obj)


LEVEL_SOURCES = {
    # level: (the CRD directories the chart's files/crds/<level> copies, the runtimes directory)
    "v2.1": ((ROOT / "config" / "crd" / "bases",), ROOT / "config" / "runtimes"),
    "v2.3": (
        (ROOT / "config" / "overlays" / "v2.3" / "crd", ROOT / "config" / "crd" / "bases"),
        ROOT / "config" / "overlays" / "v2.3" / "runtimes",
    ),
}


@pytest.mark.parametrize("level", sorted(LEVEL_SOURCES))
def test_chart_crds_are_the_generated_crds(level: str) -> None:
    """One source: the CRDs are generated, and `make manifests` writes the chart's copies
    (hack/chart_crds.py): the same documents without descriptions; at v2.3 the level's four and
    v2.1's PodGroup and ElasticQuota (the overlay keeps those)."""
    generated: dict[str, Path] = {}
    for directory in LEVEL_SOURCES[level][0]:
        for path in directory.glob("*.yaml"):
            generated.setdefault(path.name, path)
    chart = {p.name: p for p in (CHART / "files" / "crds" / level).glob("*.yaml")}
    assert sorted(chart) == sorted(generated), "run `make manifests`"
    loader = yaml.CSafeLoader
    stale = [
        name
        for name, path in generated.items()
        if yaml.load(chart[name].read_text(), Loader=loader)
        != without_descriptions(yaml.load(path.read_text(), Loader=loader))
    ]
    assert not stale, f"charts/kubeflow-trainer/files/crds/{level} is stale ({stale}): run `make manifests`"
    assert "description:" not in "".join(p.read_text() for p in chart.values())


def test_the_release_fits_helms_one_mib_secret() -> None:
    """Helm stores the chart and the rendered manifest in one Secret (at most 1 MiB): measured as
    Helm encodes it (files base64 in the release JSON, gzip, base64) for the larger level."""
    import base64
    import gzip

    files = {
        str(p.relative_to(CHART)): base64.b64encode(p.read_bytes()).decode()
        for p in CHART.rglob("*")
        if p.is_file()
    }
    manifest = _template("--set", "apiLevel=v2.3").stdout
    blob = json.dumps({"chart": {"files": files}, "manifest": manifest}).encode()
    size = len(base64.b64encode(gzip.compress(blob)))
    assert size < 1024 * 1024 * 0.6, f"the release would be {size} bytes"


@pytest.mark.parametrize("level", sorted(LEVEL_SOURCES))
def test_chart_runtimes_are_the_shipped_runtimes(level: str) -> None:
    shipped = {p.name: p.read_bytes() for p in LEVEL_SOURCES[level][1].glob("*.yaml")}
    shipped.pop("kustomization.yaml")
    chart = {p.name: p.read_bytes() for p in (CHART / "files" / "runtimes" / level).glob("*.yaml")}
    assert sorted(chart) == sorted(shipped), "run `make manifests`"
    stale = [name for name in shipped if chart[name] != shipped[name]]
    assert not stale, (
        f"charts/kubeflow-trainer/files/runtimes/{level} is stale ({stale}): run `make manifests`"
    )


def test_crds_enabled_false_renders_no_crd_and_the_crds_are_kept_on_uninstall(tmp_path: Path) -> None:
    for level in LEVEL_SOURCES:
        crds = [
            o for o in helm_template("--set", f"apiLevel={level}") if o["kind"] == "CustomResourceDefinition"
        ]
        assert len(crds) == 6, level
        assert all(c["metadata"]["annotations"][KEEP] == "keep" for c in crds), level
    off = helm_template("--set", "apiLevel=v2.3", "--set", "crds.enabled=false")
    assert [o for o in off if o["kind"] == "CustomResourceDefinition"] == []


def test_the_rendered_configuration_is_one_the_manager_accepts(tmp_path: Path) -> None:
    values = {
        "manager": {
            "config": {
                "leaderElection": {"leaderElect": False, "leaseDuration": "30s"},
                "metrics": {"bindAddress": ":9090", "secureServing": False},
                "webhook": {"port": 9444},
                "controller": {"groupKindConcurrency": {"trainJob": 12, "jobSet": 3}},
                "clientConnection": {"qps": 7.5, "burst": 15},
                "featureGates": {"TrainJobStatus": True},
                "statusServer": {"port": 10444, "qps": 3, "burst": 6},
                "runtimePlugins": ["example"],
                "podCache": "Full",
            }
        }
    }
    objs = helm_template(values=values, tmp=tmp_path)
    data = one(objs, "ConfigMap", "kubeflow-trainer-config")["data"][CONFIG_KEY]
    cfg = load_configuration(yaml.safe_load(data))
    assert cfg.leader_election is not None and cfg.leader_election.leader_elect is False
    assert cfg.leader_election.lease_duration == "30s"
    assert cfg.metrics is not None and cfg.metrics.bind_address == ":9090"
    assert cfg.metrics.secure_serving is False
    assert cfg.webhook is not None and cfg.webhook.port == 9444
    assert cfg.controller is not None and cfg.controller.group_kind_concurrency is not None
    assert cfg.controller.group_kind_concurrency["TrainJob.trainer.kubeflow.org"] == 12
    assert cfg.controller.group_kind_concurrency["JobSet.jobset.x-k8s.io"] == 3
    assert cfg.client_connection is not None and cfg.client_connection.qps == 7.5
    assert cfg.cert_management is not None
    assert cfg.cert_management.webhook_service_name == MANAGER
    assert cfg.cert_management.webhook_secret_name == "kubeflow-trainer-webhook-cert"
    # The ports follow the Configuration.
    ports = {p["name"]: p["containerPort"] for p in container(objs)["ports"]}
    assert ports == {"webhook-server": 9444, "metrics": 9090, "health": 8081, "status-server": 10444}
    service = one(objs, "Service", MANAGER)
    assert {p["name"]: p["targetPort"] for p in service["spec"]["ports"]}["webhook-server"] == 9444
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]}["status-server"] == 10444
    # Beyond v2.1: gates, the status server and plugins pass through as the manager reads them.
    assert cfg.feature_gates == {"TrainJobStatus": True}
    assert cfg.status_server is not None and cfg.status_server.port == 10444
    assert cfg.runtime_plugins == ["example"]
    assert cfg.pod_cache == "Full"


@pytest.mark.parametrize("mode", ["Minimal", "Full"])
def test_pod_cache_is_rendered_into_the_configuration_only_when_set(mode: str, tmp_path: Path) -> None:
    def configuration(values: Json | None) -> Json:
        objs = helm_template(values=values, tmp=tmp_path)
        data: Json = yaml.safe_load(one(objs, "ConfigMap", "kubeflow-trainer-config")["data"][CONFIG_KEY])
        return data

    assert "podCache" not in configuration(None)  # the default Configuration stays upstream's
    rendered = configuration({"manager": {"config": {"podCache": mode}}})
    assert rendered["podCache"] == mode
    assert load_configuration(rendered).pod_cache == mode


def test_fullname_override_renames_objects_and_keeps_every_reference(tmp_path: Path) -> None:
    objs = helm_template(values={"fullnameOverride": "trn"}, tmp=tmp_path)
    service = one(objs, "Service")["metadata"]["name"]
    assert service == "trn-controller-manager"
    assert one(objs, "Deployment")["metadata"]["name"] == "trn-controller-manager"
    assert pod_spec(objs)["serviceAccountName"] == one(objs, "ServiceAccount")["metadata"]["name"]
    cfg = yaml.safe_load(one(objs, "ConfigMap")["data"][CONFIG_KEY])
    assert cfg["certManagement"]["webhookServiceName"] == service
    volumes = {v["name"]: v for v in pod_spec(objs)["volumes"]}
    assert volumes["config"]["configMap"]["name"] == one(objs, "ConfigMap")["metadata"]["name"]
    assert volumes["cert"]["secret"]["secretName"] == cfg["certManagement"]["webhookSecretName"]
    assert volumes["cert"]["secret"]["secretName"] == one(objs, "Secret")["metadata"]["name"]
    for binding in (o for o in objs if o["kind"] == "ClusterRoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": service, "namespace": NS}]
    for hook in (h for o in objs if o["kind"].endswith("WebhookConfiguration") for h in o["webhooks"]):
        assert hook["clientConfig"]["service"]["name"] == service, hook["name"]


# -- components and webhooks ----------------------------------------------------------------


def _webhook_configurations(objs: list[Json]) -> set[str]:
    return {o["metadata"]["name"] for o in objs if o["kind"].endswith("WebhookConfiguration")}


def test_every_webhook_calls_the_one_service_on_443_with_the_failure_policy(tmp_path: Path) -> None:
    objs = helm_template(values={"webhook": {"failurePolicy": "Ignore"}}, tmp=tmp_path)
    hooks = [h for o in objs if o["kind"].endswith("WebhookConfiguration") for h in o["webhooks"]]
    assert len(hooks) == 7
    for hook in hooks:
        assert hook["clientConfig"]["service"]["name"] == MANAGER
        assert hook["clientConfig"]["service"]["namespace"] == NS
        assert hook["clientConfig"]["service"].get("port", 443) == 443
        assert hook["failurePolicy"] == "Ignore", hook["name"]
    service_ports = {p["name"]: p for p in one(objs, "Service", MANAGER)["spec"]["ports"]}
    assert service_ports["webhook-server"]["port"] == 443


@pytest.mark.parametrize(
    ("controllers", "configurations"),
    [
        (
            "*",
            {
                "validator.trainer.kubeflow.org",
                "jobset-mutating-webhook-configuration",
                "jobset-validating-webhook-configuration",
            },
        ),
        ("*,-jobset", {"validator.trainer.kubeflow.org"}),
        (
            "jobset,scheduling",
            {"jobset-mutating-webhook-configuration", "jobset-validating-webhook-configuration"},
        ),
    ],
)
def test_a_component_switched_off_leaves_out_its_webhooks(
    controllers: str, configurations: set[str], tmp_path: Path
) -> None:
    objs = helm_template(values={"manager": {"controllers": controllers}}, tmp=tmp_path)
    assert _webhook_configurations(objs) == configurations
    args = container(objs)["args"]
    if controllers == "*":
        assert not any(a.startswith("--controllers") for a in args)
    else:
        assert f"--controllers={controllers}" in args


# -- spec 6.V: values rendered in place ------------------------------------------------------


def test_image_repository_and_tag(tmp_path: Path) -> None:
    # spec: jobset 6.V.1
    objs = helm_template(values={"image": {"repository": "example.com/ml/tcm", "tag": "v9"}}, tmp=tmp_path)
    assert container(objs)["image"] == "example.com/ml/tcm:v9"
    objs = helm_template(
        values={"image": {"registry": "ghcr.io", "repository": "me/tcm", "tag": "v1"}}, tmp=tmp_path
    )
    assert container(objs)["image"] == "ghcr.io/me/tcm:v1"
    assert container(helm_template())["image"] == "trainer-controller-manager-py:latest"


def test_image_pull_policy(tmp_path: Path) -> None:
    # spec: jobset 6.V.2
    assert container(helm_template())["imagePullPolicy"] == "IfNotPresent"
    objs = helm_template(values={"image": {"pullPolicy": "Always"}}, tmp=tmp_path)
    assert container(objs)["imagePullPolicy"] == "Always"


def test_replicas_ten(tmp_path: Path) -> None:
    # spec: jobset 6.V.3
    objs = helm_template(values={"manager": {"replicas": 10}}, tmp=tmp_path)
    assert one(objs, "Deployment")["spec"]["replicas"] == 10


def test_replicas_zero(tmp_path: Path) -> None:
    # spec: jobset 6.V.4
    objs = helm_template(values={"manager": {"replicas": 0}}, tmp=tmp_path)
    assert one(objs, "Deployment")["spec"]["replicas"] == 0


def test_pod_and_container_values_are_rendered_in_place(tmp_path: Path) -> None:
    # spec: jobset 6.V.5
    env = [{"name": "EXTRA", "value": "1"}]
    env_from = [{"configMapRef": {"name": "more-env"}}]
    mounts = [{"name": "scratch", "mountPath": "/scratch"}]
    volumes = [{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}]
    resources = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}}
    security = {"runAsUser": 65532, "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False}
    pull_secrets = [{"name": "regcred"}]
    node_selector = {"kubernetes.io/os": "linux"}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["sys"]}]}
                ]
            }
        }
    }
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "sys", "effect": "NoSchedule"}]
    values = {
        "image": {"pullSecrets": pull_secrets},
        "manager": {
            "env": env,
            "envFrom": env_from,
            "volumeMounts": mounts,
            "volumes": volumes,
            "resources": resources,
            "securityContext": security,
            "nodeSelector": node_selector,
            "affinity": affinity,
            "tolerations": tolerations,
            "labels": {"team": "ml"},
            "annotations": {"example.com/owner": "ml"},
        },
    }
    objs = helm_template(values=values, tmp=tmp_path)
    c, pod = container(objs), pod_spec(objs)
    assert c["env"][-1:] == env
    assert [e["name"] for e in c["env"]][:1] == ["POD_NAMESPACE"], "the manager's own env comes first"
    assert c["envFrom"] == env_from
    assert c["volumeMounts"][-1:] == mounts
    assert {m["name"] for m in c["volumeMounts"]} == {"tmp", "cert", "config", "scratch"}
    assert pod["volumes"][-1:] == volumes
    assert c["resources"] == resources
    # Helm merges maps with the defaults: the hardening stays unless a key is set to null.
    hardened = container(helm_template())["securityContext"]
    assert c["securityContext"] == {**hardened, **security}
    assert pod["imagePullSecrets"] == pull_secrets
    assert pod["nodeSelector"] == node_selector
    assert pod["affinity"] == affinity
    assert pod["tolerations"] == tolerations
    template = one(objs, "Deployment")["spec"]["template"]["metadata"]
    assert template["labels"]["team"] == "ml"
    assert template["annotations"] == {"example.com/owner": "ml"}
    assert "team" not in one(objs, "Deployment")["spec"]["selector"]["matchLabels"]


def test_defaults_harden_the_manager_pod() -> None:
    c, pod = container(helm_template()), pod_spec(helm_template())
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert c["resources"]["requests"] == {"cpu": "100m", "memory": "256Mi"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert c["command"] == ["trainer-controller-manager"]
    assert {"name": "tmp", "emptyDir": {}} in pod["volumes"]


def test_webhook_secret_and_service_are_rendered_by_default() -> None:
    # spec: jobset 6.V.8
    objs = helm_template()
    secret = one(objs, "Secret", "kubeflow-trainer-webhook-cert")
    assert secret["metadata"]["namespace"] == NS and not secret.get("data")
    service = one(objs, "Service", MANAGER)
    ports = {p["name"]: (p["port"], p["targetPort"]) for p in service["spec"]["ports"]}
    assert ports == {
        "webhook-server": (443, 9443),
        "monitoring-port": (8080, 8080),
        "status-server": (10443, 10443),
    }


def _manager_configuration(objs: list[Json]) -> Json:
    cm = one(objs, "ConfigMap", "kubeflow-trainer-config")
    loaded: Json = yaml.safe_load(cm["data"][CONFIG_KEY])
    return loaded


def test_cert_manager_issues_the_webhook_certificate(tmp_path: Path) -> None:
    # spec: jobset 6.V.6
    default = helm_template()
    assert not [o for o in default if o["apiVersion"].startswith("cert-manager.io/")]
    assert _manager_configuration(default)["certManagement"]["enable"] is True

    objs = helm_template(values={"certManager": {"enable": True}}, tmp=tmp_path)
    issuer = one(objs, "Issuer", "kubeflow-trainer-self-signed-issuer")
    assert issuer["spec"] == {"selfSigned": {}}
    cert = one(objs, "Certificate", "kubeflow-trainer-cert")
    assert cert["metadata"]["namespace"] == NS
    assert cert["spec"]["issuerRef"] == {
        "group": "cert-manager.io",
        "kind": "Issuer",
        "name": "kubeflow-trainer-self-signed-issuer",
    }
    # The certificate lands in the Secret the Deployment mounts and names the one Service.
    assert cert["spec"]["secretName"] == "kubeflow-trainer-webhook-cert"
    assert f"{MANAGER}.{NS}.svc" in cert["spec"]["dnsNames"]
    volumes = {v["name"]: v for v in pod_spec(objs)["volumes"]}
    assert volumes["cert"]["secret"]["secretName"] == cert["spec"]["secretName"]
    # cert-manager creates the Secret and injects the CA; the manager's rotator is off.
    assert not [o for o in objs if o["kind"] == "Secret"]
    assert _manager_configuration(objs)["certManagement"]["enable"] is False
    for name in _webhook_configurations(objs):
        conf = next(o for o in objs if o["metadata"]["name"] == name)
        assert conf["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": f"{NS}/kubeflow-trainer-cert"
        }

    ref = {"name": "corp-ca", "kind": "ClusterIssuer"}
    objs = helm_template(values={"certManager": {"enable": True, "issuerRef": ref}}, tmp=tmp_path)
    assert not [o for o in objs if o["kind"] == "Issuer"]
    assert one(objs, "Certificate")["spec"]["issuerRef"] == ref


def test_prometheus_renders_a_service_monitor_only_where_the_api_exists(tmp_path: Path) -> None:
    # spec: jobset 6.V.7
    default = helm_template("--api-versions", "monitoring.coreos.com/v1/ServiceMonitor")
    assert not [o for o in default if o["kind"] == "ServiceMonitor"]
    # The Service that carries the metrics Pods' traffic is rendered by default.
    service = one(default, "Service", MANAGER)
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "manager"

    values = {"prometheus": {"enable": True}}
    objs = helm_template(
        "--api-versions", "monitoring.coreos.com/v1/ServiceMonitor", values=values, tmp=tmp_path
    )
    monitor = one(objs, "ServiceMonitor", MANAGER)
    service = one(objs, "Service", MANAGER)
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items(), "the monitor selects the Service"
    (endpoint,) = monitor["spec"]["endpoints"]
    metrics_port = {p["name"]: p for p in container(objs)["ports"]}["metrics"]
    assert endpoint["targetPort"] == metrics_port["name"] and metrics_port["containerPort"] == 8443
    assert endpoint["scheme"] == "https" and endpoint["path"] == "/metrics"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"

    out = _template(values=values, tmp=tmp_path)
    assert out.returncode != 0
    assert (
        "The cluster does not support the required API resource `monitoring.coreos.com/v1/ServiceMonitor`."
        in out.stderr
    )


# -- runtimes -------------------------------------------------------------------------------


def _runtimes(objs: list[Json]) -> dict[str, Json]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == "ClusterTrainingRuntime"}


def test_runtimes_are_off_by_default_and_all_on_with_default_enabled(tmp_path: Path) -> None:
    assert _runtimes(helm_template()) == {}
    rendered = _runtimes(helm_template(values={"runtimes": {"defaultEnabled": True}}, tmp=tmp_path))
    shipped = {
        o["metadata"]["name"]: o
        for o in kustomize(ROOT / "config" / "runtimes")
        if o["kind"] == "ClusterTrainingRuntime"
    }
    assert sorted(rendered) == sorted(shipped)
    problems = [
        f"{name}: {d}"
        for name in rendered
        for d in differences(normalise(rendered[name]), normalise(shipped[name]))
    ]
    assert not problems, "\n".join(problems)


def test_one_runtime_on_with_another_image(tmp_path: Path) -> None:
    values = {
        "runtimes": {
            "deepspeedDistributed": {
                "enabled": True,
                "image": {"registry": "registry.example.com", "repository": "ml/deepspeed", "tag": "v7"},
            }
        }
    }
    rendered = _runtimes(helm_template(values=values, tmp=tmp_path))
    assert sorted(rendered) == ["deepspeed-distributed"]
    jobs = rendered["deepspeed-distributed"]["spec"]["template"]["spec"]["replicatedJobs"]
    images = {c["image"] for j in jobs for c in j["template"]["spec"]["template"]["spec"]["containers"]}
    assert images == {"registry.example.com/ml/deepspeed:v7"}
    assert (
        rendered["deepspeed-distributed"]["metadata"]["labels"]["trainer.kubeflow.org/framework"]
        == "deepspeed"
    )


def test_v2_3_runtimes_are_the_levels_with_common_labels_and_skip_the_webhook(tmp_path: Path) -> None:
    values = {"apiLevel": "v2.3", "runtimes": {"defaultEnabled": True, "commonLabels": {"team": "ml"}}}
    rendered = _runtimes(helm_template(values=values, tmp=tmp_path))
    shipped = {
        o["metadata"]["name"]: o
        for o in kustomize(ROOT / "config" / "overlays" / "v2.3" / "runtimes")
        if o["kind"] == "ClusterTrainingRuntime"
    }
    assert sorted(rendered) == sorted(shipped)
    assert {"jax-distributed", "xgboost-distributed"} <= set(rendered)
    for name, obj in rendered.items():
        labels = obj["metadata"].pop("labels")
        assert labels.pop("team") == "ml", name
        obj["metadata"]["labels"] = labels
        assert labels["trainer.kubeflow.org/webhook-validation"] == "disabled", name
        assert not differences(normalise(obj), normalise(shipped[name])), name
    # jax and xgboost are v2.3.0's: at v2.1 their values render nothing
    v2_1 = {"runtimes": {"jaxDistributed": {"enabled": True}, "xgboostDistributed": {"enabled": True}}}
    assert _runtimes(helm_template(values=v2_1, tmp=tmp_path)) == {}


def test_v2_3_runtime_image_override(tmp_path: Path) -> None:
    image = {"registry": "registry.example.com", "repository": "ml/xgb", "tag": "v9"}
    values = {"apiLevel": "v2.3", "runtimes": {"xgboostDistributed": {"enabled": True, "image": image}}}
    rendered = _runtimes(helm_template(values=values, tmp=tmp_path))
    jobs = rendered["xgboost-distributed"]["spec"]["template"]["spec"]["replicatedJobs"]
    nodes = {
        c["image"]
        for j in jobs
        for c in j["template"]["spec"]["template"]["spec"]["containers"]
        if c["name"] == "node"
    }
    assert nodes == {"registry.example.com/ml/xgb:v9"}


def test_v2_3_objects_a_user_sees(tmp_path: Path) -> None:
    objs = helm_template("--set", "apiLevel=v2.3")
    assert "--api-level=v2.3" in container(objs)["args"]
    assert "--api-level=v2.3" not in container(helm_template())["args"]
    public = one(objs, "ConfigMap", "kubeflow-trainer-public")
    assert public["data"] == {"kubeflow_trainer_version": "v2.3.0"}
    binding = one(objs, "RoleBinding", "kubeflow-trainer-public")
    assert binding["subjects"] == [
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"}
    ]
    defaulter = one(objs, "MutatingWebhookConfiguration", "defaulter.trainer.kubeflow.org")
    assert (
        defaulter["webhooks"][0]["clientConfig"]["service"]["path"]
        == "/mutate-trainer-kubeflow-org-v1alpha1-trainjob"
    )
    ports = {p["name"]: (p["port"], p["targetPort"]) for p in one(objs, "Service")["spec"]["ports"]}
    assert ports == {
        "monitoring-port": (8443, "metrics"),
        "webhook-server": (443, "webhook"),
        "status-server": (10443, "status-server"),
    }
    # cert-manager annotates the defaulter too; a trainer component switched off drops it
    managed = helm_template(values={"apiLevel": "v2.3", "certManager": {"enable": True}}, tmp=tmp_path)
    assert (
        "cert-manager.io/inject-ca-from"
        in one(managed, "MutatingWebhookConfiguration", "defaulter.trainer.kubeflow.org")["metadata"][
            "annotations"
        ]
    )
    off = helm_template(values={"apiLevel": "v2.3", "manager": {"controllers": "*,-trainer"}}, tmp=tmp_path)
    assert not [o for o in off if o["metadata"]["name"] == "defaulter.trainer.kubeflow.org"]


HOOK = "kubeflow-trainer-runtimes-installer"


def _selects(selector: str, labels: dict[str, str]) -> bool:
    """An equality-only label selector (``a=b,c=d``) against ``labels``."""
    return all(labels.get(k) == v for k, v in (term.split("=", 1) for term in selector.split(",")))


@pytest.mark.parametrize("level", ["v2.1", "v2.3"])
def test_runtimes_bring_upstreams_pre_delete_hook_that_deletes_exactly_them(
    level: str, tmp_path: Path
) -> None:
    """Upstream v2.3.0's charts/kubeflow-trainer/templates/runtimes/cleanup-job.yaml and rbac.yaml:
    the Job's name, labels, hook annotations and delete policy; here it runs the manager's image
    and command, hardened as the manager, and its selector picks the release's runtimes."""
    assert not [o for o in helm_template(level=level) if HOOK in o["metadata"]["name"]]
    values = {
        "apiLevel": level,
        "runtimes": {"defaultEnabled": True},
        "image": {"pullSecrets": [{"name": "r"}]},
    }
    objs = helm_template(values=values, tmp=tmp_path)
    job = one(objs, "Job", f"{HOOK}-cleanup")
    assert job["metadata"]["namespace"] == NS
    assert job["metadata"]["annotations"] == {
        "helm.sh/hook": "pre-delete",
        "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded",
    }
    assert {
        "app.kubernetes.io/component": "runtimes-installer",
        "app.kubernetes.io/part-of": "kubeflow",
        "app.kubernetes.io/instance": RELEASE,
    }.items() <= job["metadata"]["labels"].items()
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["serviceAccountName"] == HOOK
    assert pod["imagePullSecrets"] == [{"name": "r"}]
    (hook,) = pod["containers"]
    manager = container(objs)
    assert (hook["name"], hook["image"], hook["command"]) == (
        "delete-runtimes",
        manager["image"],
        ["trainer-controller-manager"],
    )
    assert hook["securityContext"] == manager["securityContext"]
    assert pod["securityContext"] == pod_spec(objs)["securityContext"]
    assert hook["args"][0] == "delete-runtimes"
    (selector,) = [a.removeprefix("--selector=") for a in hook["args"] if a.startswith("--selector=")]
    runtimes = _runtimes(objs)
    assert runtimes and all(_selects(selector, r["metadata"]["labels"]) for r in runtimes.values())
    shipped = kustomize(ROOT / "config" / levels.get(level).runtimes)
    assert not any(_selects(selector, o["metadata"].get("labels") or {}) for o in shipped)

    # Its ServiceAccount may delete runtimes and list TrainJobs, nothing else.
    assert one(objs, "ServiceAccount", HOOK)["metadata"]["namespace"] == NS
    rules = one(objs, "ClusterRole", HOOK)["rules"]
    assert {(r["resources"][0], v) for r in rules for v in r["verbs"]} == {
        ("clustertrainingruntimes", "get"),
        ("clustertrainingruntimes", "list"),
        ("clustertrainingruntimes", "delete"),
        ("trainjobs", "list"),
    }
    binding = one(objs, "ClusterRoleBinding", HOOK)
    assert binding["roleRef"]["name"] == HOOK
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": HOOK, "namespace": NS}]

    # Upstream's runtimes.installer scheduling and resource values land on the hook's pod.
    installer = {
        "nodeSelector": {"disktype": "ssd"},
        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
        "resources": {"requests": {"cpu": "100m"}},
        "imagePullSecrets": [{"name": "hook"}],
    }
    values["runtimes"] = {"torchDistributed": {"enabled": True}, "installer": installer}
    pod = one(helm_template(values=values, tmp=tmp_path), "Job")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == installer["nodeSelector"] and pod["tolerations"] == installer["tolerations"]
    assert pod["affinity"] == installer["affinity"]
    assert pod["containers"][0]["resources"] == installer["resources"]
    assert pod["imagePullSecrets"] == [{"name": "r"}, {"name": "hook"}]


def test_no_hook_when_the_enabled_runtimes_are_not_the_levels(tmp_path: Path) -> None:
    # jax and xgboost are v2.3.0's: at v2.1 they render nothing, and so no hook either
    values = {"runtimes": {"jaxDistributed": {"enabled": True}, "xgboostDistributed": {"enabled": True}}}
    assert not [o for o in helm_template(values=values, tmp=tmp_path) if HOOK in o["metadata"]["name"]]


def test_tls_is_rendered_into_the_configuration_only_when_set(tmp_path: Path) -> None:
    assert "tls" not in _manager_configuration(helm_template())
    tls = {
        "minVersion": "1.3",
        "cipherSuites": ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"],
        "nextProtos": ["http/1.1"],
    }
    cfg = _manager_configuration(helm_template(values={"manager": {"config": {"tls": tls}}}, tmp=tmp_path))
    assert cfg["tls"] == tls
    assert load_configuration(cfg).tls is not None


# -- values.schema.json ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "field", "reason"),
    [
        ({"manager": {"replicas": -1}}, "manager.replicas", "minimum"),
        ({"manager": {"replicas": "two"}}, "manager.replicas", "integer"),
        ({"image": {"pullPolicy": "Sometimes"}}, "image.pullPolicy", "Always"),
        ({"image": {"repository": ""}}, "image.repository", "length"),
        ({"webhook": {"failurePolicy": "Maybe"}}, "webhook.failurePolicy", "Fail"),
        ({"manager": {"controllers": "jobset,kueue"}}, "manager.controllers", "pattern"),
        ({"manager": {"config": {"webhook": {"port": 70000}}}}, "manager.config.webhook.port", "maximum"),
        (
            {"manager": {"config": {"leaderElection": {"leaseDuration": "15"}}}},
            "leaderElection.leaseDuration",
            "pattern",
        ),
        (
            {"manager": {"config": {"metrics": {"secureServing": "yes"}}}},
            "manager.config.metrics.secureServing",
            "boolean",
        ),
        ({"manger": {"replicas": 2}}, "manger", "additional"),
        ({"manager": {"config": {"podCache": "Tiny"}}}, "manager.config.podCache", "Minimal"),
        ({"manager": {"config": {"podCache": "minimal"}}}, "manager.config.podCache", "Full"),
        ({"manager": {"env": {"A": "1"}}}, "manager.env", "array"),
        (
            {"runtimes": {"torchDistributed": {"enabled": "true"}}},
            "runtimes.torchDistributed.enabled",
            "boolean",
        ),
        ({"apiLevel": "v2.2"}, "apiLevel", "v2.3"),
        ({"crds": {"enabled": "no"}}, "crds.enabled", "boolean"),
        ({"runtimes": {"installer": {"image": {"tag": "3.21"}}}}, "runtimes.installer", "additional"),
        (
            {"runtimes": {"installer": {"tolerations": {"key": "x"}}}},
            "runtimes.installer.tolerations",
            "array",
        ),
        ({"manager": {"config": {"tls": {"minVersion": "1.4"}}}}, "manager.config.tls.minVersion", "1.3"),
        (
            {"manager": {"config": {"tls": {"nextProtos": ["x" * 33]}}}},
            "manager.config.tls.nextProtos",
            "length",
        ),
    ],
)
def test_schema_refuses_bad_values_naming_the_field(
    values: Json, field: str, reason: str, tmp_path: Path
) -> None:
    out = _template(values=values, tmp=tmp_path)
    assert out.returncode != 0, f"{values} was accepted"
    message = out.stderr
    assert "values don't meet the specifications of the schema" in message, message
    flat = message.replace("/", ".")
    assert field in flat, message
    assert reason.lower() in message.lower(), message


def test_schema_accepts_the_documented_values() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["manager"]["controllers"] == "*"
    lint = _run([str(assets.ensure(["helm"])["helm"]), "lint", "--strict", str(CHART)])
    assert lint.returncode == 0, lint.stdout + lint.stderr
