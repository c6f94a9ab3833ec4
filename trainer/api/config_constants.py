"""Exact strings and defaults of ``config.trainer.kubeflow.org`` (Trainer v2.1.0)."""

from __future__ import annotations

GROUP = "config.trainer.kubeflow.org"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "Configuration"

DefaultWebhookPort = 9443
DefaultMetricsBindAddress = ":8443"
DefaultHealthProbeBindAddress = ":8081"
DefaultReadinessEndpointName = "readyz"
DefaultLivenessEndpointName = "healthz"
DefaultWebhookServiceName = "kubeflow-trainer-controller-manager"
DefaultWebhookSecretName = "kubeflow-trainer-webhook-cert"
DefaultClientConnectionQPS = 50.0
DefaultClientConnectionBurst = 100
# Upstream v2.2 statusServer defaults (the TrainJobStatus endpoint).
DefaultStatusServerPort = 10443
DefaultStatusServerQPS = 5.0
DefaultStatusServerBurst = 10

DecodeErrorPrefix = "failed to decode config file: "
ReadErrorPrefix = "failed to read config file: "
InvalidConfigurationPrefix = "invalid configuration: "
