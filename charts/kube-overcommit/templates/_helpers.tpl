{{/*
app.kubernetes.io/name of every object and the selector of the pods: nameOverride or kube-overcommit.
*/}}
{{- define "kube-overcommit.name" -}}
{{- .Values.nameOverride | default "kube-overcommit" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of the objects the webhook does not look up by name (values.yaml, fullnameOverride).
*/}}
{{- define "kube-overcommit.fullname" -}}
{{- .Values.fullnameOverride | default (include "kube-overcommit.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object: those k8s/ sets (name, part-of), Helm's own, and commonLabels.
*/}}
{{- define "kube-overcommit.labels" -}}
app.kubernetes.io/name: {{ include "kube-overcommit.name" . }}
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
"true" when cert-manager issues the serving certificate: certificates.mode cert-manager, or auto
(values.schema.json admits only auto, self-managed and cert-manager) where cert-manager.io/v1 is
served. An installed release keeps its mode under auto: the Secret kube-overcommit-tls is
cert-manager's (kubernetes.io/tls) or the webhook's (Opaque), and cannot change type in place
(docs/certificates.md). `helm template` looks nothing up: the API versions decide.
*/}}
{{- define "kube-overcommit.certManager" -}}
{{- $mode := .Values.certificates.mode }}
{{- if eq $mode "auto" }}
{{- $installed := lookup "v1" "Secret" .Release.Namespace "kube-overcommit-tls" }}
{{- if $installed }}
{{- if eq $installed.type "kubernetes.io/tls" }}true{{ end }}
{{- else if .Capabilities.APIVersions.Has "cert-manager.io/v1" }}true{{ end }}
{{- else if eq $mode "cert-manager" }}true{{ end -}}
{{- end }}

{{/*
The pods' selector labels.
*/}}
{{- define "kube-overcommit.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kube-overcommit.name" . }}
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

{{/*
"true" when the node-status policy is rendered (nodePolicy.enabled): `auto` where the API server
serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy (Kubernetes 1.36 and later).
*/}}
{{- define "kube-overcommit.nodePolicy" -}}
{{- $enabled := toString .Values.nodePolicy.enabled }}
{{- if eq $enabled "auto" }}
{{- if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy" }}true{{ end }}
{{- else if eq $enabled "true" }}true{{ end -}}
{{- end }}
