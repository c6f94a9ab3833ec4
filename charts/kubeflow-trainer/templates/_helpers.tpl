{{/*
Names, labels and small computations shared by the templates. Object names follow upstream's
chart (release `kubeflow-trainer` gives `kubeflow-trainer-controller-manager`,
`kubeflow-trainer-config`, `kubeflow-trainer-webhook-cert`); the webhook configurations keep the
fixed names the manager's certificate rotator looks up.
*/}}

{{- define "trainer.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "trainer.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "trainer.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every object: Helm's bookkeeping labels and commonLabels. The objects of
config/default carry none of Helm's four labels; the chart-vs-kustomize test allows exactly
these four keys as the difference.
*/}}
{{- define "trainer.labels" -}}
helm.sh/chart: {{ include "trainer.chart" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The manager's selector labels (as config/manager; immutable once installed). */}}
{{- define "trainer.manager.selectorLabels" -}}
app.kubernetes.io/name: trainer
app.kubernetes.io/component: manager
app.kubernetes.io/part-of: kubeflow
{{- end }}

{{- define "trainer.manager.labels" -}}
{{ include "trainer.labels" . }}
{{ include "trainer.manager.selectorLabels" . }}
{{- end }}

{{- define "trainer.manager.name" -}}
{{ include "trainer.fullname" . }}-controller-manager
{{- end }}

{{- define "trainer.manager.configmap.name" -}}
{{ include "trainer.fullname" . }}-config
{{- end }}

{{- define "trainer.webhook.service.name" -}}
{{- .Values.manager.config.certManagement.webhookServiceName | default (include "trainer.manager.name" .) }}
{{- end }}

{{- define "trainer.webhook.secret.name" -}}
{{- .Values.manager.config.certManagement.webhookSecretName | default (printf "%s-webhook-cert" (include "trainer.name" .)) }}
{{- end }}

{{- define "trainer.image" -}}
{{- $registry := .Values.image.registry | default "docker.io" }}
{{- $tag := .Values.image.tag | default .Chart.AppVersion }}
{{- if eq $registry "docker.io" }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- else }}
{{- printf "%s/%s:%s" $registry .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* The port of a Go listen address such as ":8443" or "0.0.0.0:8443". */}}
{{- define "trainer.port" -}}
{{- splitList ":" (toString .) | last }}
{{- end }}

{{/*
"true" when component NAME runs under manager.controllers (kube-controller-manager's syntax, as
trainer/components.py select: `*` all, `name` on, `-name` off). Usage:
  include "trainer.componentEnabled" (list "jobset" .)
*/}}
{{- define "trainer.componentEnabled" -}}
{{- $name := index . 0 }}
{{- $root := index . 1 }}
{{- $on := false }}
{{- $off := false }}
{{- range $raw := splitList "," (toString $root.Values.manager.controllers) }}
{{- $item := trim $raw }}
{{- if or (eq $item "*") (eq $item $name) }}{{ $on = true }}{{ end }}
{{- if eq $item (printf "-%s" $name) }}{{ $off = true }}{{ end }}
{{- end }}
{{- if and $on (not $off) }}true{{ end }}
{{- end }}

{{/* A webhook's clientConfig: every webhook calls the manager's one Service. */}}
{{- define "trainer.webhook.clientConfig" -}}
clientConfig:
  service:
    name: {{ include "trainer.webhook.service.name" .root }}
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
{{- end }}

{{/*
cert-manager (certManager.enable): names as JobSet's chart; the webhook configurations get the
annotation by which cert-manager's CA injector fills their caBundle.
*/}}
{{- define "trainer.certManager.issuer.name" -}}
{{ include "trainer.name" . }}-self-signed-issuer
{{- end }}

{{- define "trainer.certManager.certificate.name" -}}
{{ include "trainer.name" . }}-cert
{{- end }}

{{- define "trainer.webhook.annotations" -}}
{{- if .Values.certManager.enable }}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "trainer.certManager.certificate.name" . }}
{{- end }}
{{- end }}

{{/*
The API level the chart installs (docs/levels.md): "v2.1" (Trainer v2.1.0 + JobSet v0.10.1, the
default) or "v2.3" (Trainer v2.3.0 + JobSet v0.12.0: what `kubectl kustomize config/overlays/v2.3`
renders). The level chooses the CRDs, the manager's --api-level, the ClusterRoles, the Service
ports, the TrainJob defaulter and the runtime webhooks' objectSelector.
*/}}
{{- define "trainer.apiLevel" -}}
{{- .Values.apiLevel | default "v2.3" }}
{{- end }}

{{/* "true" at level v2.3 (templates read the level only through this and trainer.apiLevel). */}}
{{- define "trainer.v2_3" -}}
{{- if eq (include "trainer.apiLevel" .) "v2.3" }}true{{ end }}
{{- end }}

{{/* The Trainer release of the level: kubeflow-trainer-public's kubeflow_trainer_version. */}}
{{- define "trainer.levelVersion" -}}
{{- if include "trainer.v2_3" . }}v2.3.0{{ else }}v2.1.0{{ end }}
{{- end }}
