"""The Kueue harness's pure parts: URL rewriting, its Configuration, the metrics certificate."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from manager.envtest.errors import EnvtestError
from trainer import levels
from trainer.conformance import kueue as kq

CA = b"-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"

RELEASE = [
    {
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "workloads.kueue.x-k8s.io"},
        "spec": {
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {
                        "service": {
                            "name": "kueue-webhook-service",
                            "namespace": "kueue-system",
                            "path": "/convert",
                        }
                    },
                    "conversionReviewVersions": ["v1"],
                },
            }
        },
    },
    {"kind": "CustomResourceDefinition", "metadata": {"name": "resourceflavors.kueue.x-k8s.io"}, "spec": {}},
    {"kind": "MutatingWebhookConfiguration", "metadata": {"name": "kueue-mutating-webhook-configuration"}},
    {"kind": "Deployment", "metadata": {"name": "kueue-controller-manager"}},
]


def test_conversion_webhooks_point_at_the_local_server_with_the_ca() -> None:
    crds = kq.crds(RELEASE, "https://127.0.0.1:9999", CA)
    assert [c["metadata"]["name"] for c in crds] == [
        "workloads.kueue.x-k8s.io",
        "resourceflavors.kueue.x-k8s.io",
    ]
    client = crds[0]["spec"]["conversion"]["webhook"]["clientConfig"]
    assert client == {"url": "https://127.0.0.1:9999/convert", "caBundle": base64.b64encode(CA).decode()}
    assert "conversion" not in crds[1]["spec"]
    # The release's documents are left as they were (the harness installs copies).
    assert "service" in RELEASE[0]["spec"]["conversion"]["webhook"]["clientConfig"]


def test_only_the_webhook_configurations_are_taken_besides_the_crds() -> None:
    assert [d["kind"] for d in kq.webhook_configurations(RELEASE)] == ["MutatingWebhookConfiguration"]


def test_configuration_for_a_process_outside_the_cluster(tmp_path: Path) -> None:
    config = kq.configuration(
        webhook_port=1,
        health_port=2,
        cert_dir=tmp_path,
        wait_for_pods_ready={"timeout": "5m"},
        overrides={"manageJobsWithoutQueueName": False},
    )
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["internalCertManagement"] == {"enable": False}
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["featureGates"] == {"VisibilityOnDemand": False}
    assert config["integrations"]["frameworks"] == ["trainer.kubeflow.org/trainjob", "jobset.x-k8s.io/jobset"]
    assert config["webhook"] == {"host": "127.0.0.1", "port": 1, "certDir": str(tmp_path)}
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:2"
    assert config["metrics"] == {"bindAddress": "0"}
    assert config["waitForPodsReady"] == {"timeout": "5m"}
    assert config["manageJobsWithoutQueueName"] is False
    assert yaml.safe_load(yaml.safe_dump(config)) == config


def test_metrics_certificate_written_once(tmp_path: Path) -> None:
    target = tmp_path / "etc" / "kueue" / "metrics" / "certs"
    kq.ensure_metrics_certificate(target)
    crt = (target / "tls.crt").read_bytes()
    assert crt.startswith(b"-----BEGIN CERTIFICATE-----")
    assert (target / "tls.key").read_bytes().startswith(b"-----BEGIN")
    kq.ensure_metrics_certificate(target)
    assert (target / "tls.crt").read_bytes() == crt
    assert sorted(p.name for p in target.iterdir()) == ["tls.crt", "tls.key"]


def test_the_kueue_release_follows_the_api_level(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(kq.VERSION_ENV, raising=False)
    assert set(kq.KUEUE_VERSIONS) == set(levels.LEVELS)
    v2_1, v2_3 = kq.kueue_main(levels.get("v2.1")), kq.kueue_main(levels.get("v2.3"))
    assert (v2_1.version, v2_3.version) == ("v0.15.0", "v0.17.0")
    assert v2_1.package == v2_3.package == "sigs.k8s.io/kueue/cmd/kueue"
    # each release is cached under its own key
    assert v2_1.key == "sigs.k8s.io_kueue@v0.15.0" and v2_3.key == "sigs.k8s.io_kueue@v0.17.0"
    monkeypatch.setenv(kq.VERSION_ENV, "v0.15.1")
    assert kq.kueue_main(levels.get("v2.1")).version == "v0.15.1"


def _crd(name: str, *versions: tuple[str, bool]) -> dict[str, object]:
    return {
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {"versions": [{"name": v, "served": True, "storage": stored} for v, stored in versions]},
    }


def test_the_conversion_probe_creates_at_the_version_not_stored() -> None:
    # v0.15 stores v1beta1, v0.17 stores v1beta2: the probe's create must go through /convert
    v0_15 = [_crd("localqueues.kueue.x-k8s.io", ("v1beta1", True), ("v1beta2", False))]
    v0_17 = [_crd("localqueues.kueue.x-k8s.io", ("v1beta1", False), ("v1beta2", True))]
    assert kq.converted_version(v0_15) == "v1beta2"
    assert kq.converted_version(v0_17) == "v1beta1"
    with pytest.raises(EnvtestError, match=r"localqueues\.kueue\.x-k8s\.io serves no version"):
        kq.converted_version([_crd("localqueues.kueue.x-k8s.io", ("v1beta2", True))])


def test_kueue_v0_17_runs_the_job_integration_too(tmp_path: Path) -> None:
    # v0.17.0's Job webhook panics on every Job while batch/job is off
    for name, extra in (("v2.1", []), ("v2.3", ["batch/job"])):
        frameworks = kq.frameworks_for(levels.get(name))
        config = kq.configuration(webhook_port=1, health_port=2, cert_dir=tmp_path, frameworks=frameworks)
        expected = ["trainer.kubeflow.org/trainjob", "jobset.x-k8s.io/jobset", *extra]
        assert config["integrations"]["frameworks"] == expected


def test_multikueue_objects_name_the_worker_kubeconfig_secret_and_the_check() -> None:
    objects = kq.multikueue_objects({"worker": b"kubeconfig-bytes"}, check="mk")
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Secret", "multikueue-worker"),
        ("MultiKueueCluster", "worker"),
        ("MultiKueueConfig", "multikueue"),
        ("AdmissionCheck", "mk"),
    ]
    secret, cluster, config, check = objects
    assert secret["metadata"]["namespace"] == kq.NAMESPACE
    assert base64.b64decode(secret["data"]["kubeconfig"]) == b"kubeconfig-bytes"
    assert cluster["spec"] == {
        "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "multikueue-worker"}}
    }
    assert config["spec"] == {"clusters": ["worker"]}
    assert check["spec"] == {
        "controllerName": "kueue.x-k8s.io/multikueue",
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "multikueue"},
    }
    assert all(o["apiVersion"] == kq.API_VERSION for o in objects[1:])


def test_the_release_controller_concurrency_is_kept() -> None:
    release = [
        *RELEASE,
        {
            "kind": "ConfigMap",
            "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
            "data": {
                "controller_manager_config.yaml": yaml.safe_dump(
                    {"controller": {"groupKindConcurrency": {"Workload.kueue.x-k8s.io": 5}}, "qps": 50}
                )
            },
        },
    ]
    controller = kq.release_controller(release)
    assert controller == {"groupKindConcurrency": {"Workload.kueue.x-k8s.io": 5}}
    config = kq.configuration(webhook_port=1, health_port=2, cert_dir=Path("/c"), controller=controller)
    assert config["controller"] == controller
    assert kq.release_controller(RELEASE) == {}
    assert "controller" not in kq.configuration(webhook_port=1, health_port=2, cert_dir=Path("/c"))
