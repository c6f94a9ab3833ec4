{{- /*
"trainer.runtimes.manifests": the shipped ClusterTrainingRuntimes of the API level, read from files/runtimes/<level> (copies of
config/runtimes at v2.1 and config/overlays/v2.3/runtimes at v2.3, which a test keeps
identical). A runtime whose `image.tag` is set gets that image on its trainer ("node")
containers; otherwise the image is the one in the file. runtimes.commonLabels go on every one.
At v2.3 the runtimes carry trainer.kubeflow.org/webhook-validation: disabled, which the runtime
webhooks skip, so they are admitted before the manager runs; jax and xgboost exist only there.
*/ -}}
{{- define "trainer.runtimes.manifests" -}}
{{- $r := .Values.runtimes }}
{{- $tt := $r.torchtuneDistributed }}
{{- $level := include "trainer.apiLevel" . }}
{{- $runtimes := list
  (dict "file" "torch-distributed.yaml" "enabled" $r.torchDistributed.enabled)
  (dict "file" "deepspeed-distributed.yaml" "enabled" $r.deepspeedDistributed.enabled "image" $r.deepspeedDistributed.image)
  (dict "file" "mlx-distributed.yaml" "enabled" $r.mlxDistributed.enabled "image" $r.mlxDistributed.image)
  (dict "file" "jax-distributed.yaml" "enabled" $r.jaxDistributed.enabled)
  (dict "file" "xgboost-distributed.yaml" "enabled" $r.xgboostDistributed.enabled "image" $r.xgboostDistributed.image)
  (dict "file" "torchtune-llama3.2-1b.yaml" "enabled" $tt.llama3_2_1B.enabled "image" $tt.image)
  (dict "file" "torchtune-llama3.2-3b.yaml" "enabled" $tt.llama3_2_3B.enabled "image" $tt.image)
  (dict "file" "torchtune-qwen2.5-1.5b.yaml" "enabled" $tt.qwen2_5_1_5B.enabled "image" $tt.image)
}}
{{- range $rt := $runtimes }}
{{- $path := printf "files/runtimes/%s/%s" $level $rt.file }}
{{- if and (or $r.defaultEnabled $rt.enabled) ($.Files.Get $path) }}
{{- $obj := $.Files.Get $path | fromYaml }}
{{- $labels := merge (dict) ($obj.metadata.labels | default dict) ($r.commonLabels | default dict) (include "trainer.labels" $ | fromYaml) }}
{{- $_ := set $obj.metadata "labels" $labels }}
{{- with $rt.image }}{{- if .tag }}
{{- $registry := .registry | default "docker.io" }}
{{- $image := printf "%s/%s:%s" $registry .repository .tag }}
{{- if eq $registry "docker.io" }}{{ $image = printf "%s:%s" .repository .tag }}{{ end }}
{{- range $job := $obj.spec.template.spec.replicatedJobs }}
{{- range $c := $job.template.spec.template.spec.containers }}
{{- if eq $c.name "node" }}{{ $_ := set $c "image" $image }}{{ end }}
{{- end }}
{{- end }}
{{- end }}{{- end }}
---
{{ toYaml $obj }}
{{- end }}
{{- end }}
{{- end }}

{{/*
"true" when at least one runtime renders: the runtimes' pre-delete hook (cleanup-job.yaml) and its
ServiceAccount and RBAC (rbac.yaml) exist only then, as upstream v2.3.0's "trainer.runtimes.enabled".
*/}}
{{- define "trainer.runtimes.enabled" -}}
{{- if trim (include "trainer.runtimes.manifests" .) }}true{{ end }}
{{- end }}

{{/* Names and labels of the hook's objects: upstream v2.3.0's (its runtimes installer's). */}}
{{- define "trainer.runtimes.installer.name" -}}
{{ include "trainer.fullname" . }}-runtimes-installer
{{- end }}

{{- define "trainer.runtimes.installer.labels" -}}
{{ include "trainer.labels" . }}
app.kubernetes.io/part-of: kubeflow
app.kubernetes.io/component: runtimes-installer
{{- end }}

{{/* The runtimes of this release, which the hook deletes: Helm's labels on each. */}}
{{- define "trainer.runtimes.selector" -}}
app.kubernetes.io/instance={{ .Release.Name }},app.kubernetes.io/managed-by={{ .Release.Service }}
{{- end }}
