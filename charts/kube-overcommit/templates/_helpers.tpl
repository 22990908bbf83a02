{{/*
Labels of every object: those k8s/ sets (name, part-of), Helm's own, and commonLabels.
*/}}
{{- define "kube-overcommit.labels" -}}
app.kubernetes.io/name: kube-overcommit
app.kubernetes.io/part-of: kube-overcommit
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
metadata: of an object. Call with (dict "root" $ "name" NAME "namespaced" true/false
"labels" MORE "annotations" MORE).
*/}}
{{- define "kube-overcommit.metadata" -}}
metadata:
  name: {{ .name }}
  {{- if .namespaced }}
  namespace: {{ .root.Release.Namespace }}
  {{- end }}
  labels:
    {{- include "kube-overcommit.labels" .root | nindent 4 }}
    {{- with .labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- $annotations := merge (dict) (.annotations | default dict) .root.Values.commonAnnotations }}
  {{- with $annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

{{/*
"true" when cert-manager issues the serving certificate (values.schema.json admits only
self-managed and cert-manager).
*/}}
{{- define "kube-overcommit.certManager" -}}
{{- if eq .Values.certificates.mode "cert-manager" }}true{{ end -}}
{{- end }}

{{/*
clientConfig of one webhook entry: its path (/mutate/<entry>) on the Service, or under
webhook.url (the URL of /mutate) with webhook.caBundle. Call with (dict "root" $ "entry" ENTRY).
*/}}
{{- define "kube-overcommit.clientConfig" -}}
{{- $webhook := .root.Values.webhook }}
{{- if $webhook.url }}
{{- $clientConfig := dict "url" (printf "%s/%s" (trimSuffix "/" $webhook.url) .entry) }}
{{- with $webhook.caBundle }}{{ $_ := set $clientConfig "caBundle" . }}{{ end }}
{{- toYaml $clientConfig }}
{{- else }}
{{- toYaml (dict "service" (dict "name" "kube-overcommit" "namespace" .root.Release.Namespace "path" (printf "/mutate/%s" .entry) "port" 443)) }}
{{- end }}
{{- end }}
