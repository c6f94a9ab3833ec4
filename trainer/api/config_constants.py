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
# Upstream: 50 / 100 (validated, never applied). Here the one client does the work of the Trainer,
# JobSet (upstream alone: --kube-api-qps 500 / --kube-api-burst 500) and scheduler-plugins
# managers, so it gets twice the JobSet manager's budget (docs/divergences.md, Entry point).
DefaultClientConnectionQPS = 1000.0
DefaultClientConnectionBurst = 2000
# Upstream v2.2 statusServer defaults (the TrainJobStatus endpoint).
# The API levels (trainer/levels): upstream release lines this manager speaks. Not in upstream.
ApiLevels = ("v2.1", "v2.3")
DefaultApiLevel = "v2.3"

DefaultStatusServerPort = 10443
DefaultStatusServerQPS = 5.0
DefaultStatusServerBurst = 10

DecodeErrorPrefix = "failed to decode config file: "
ReadErrorPrefix = "failed to read config file: "
InvalidConfigurationPrefix = "invalid configuration: "
