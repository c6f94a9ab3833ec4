"""The Kueue harness's pure parts: URL rewriting, its Configuration, the metrics certificate."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

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
