{{/*
Names. The full name defaults to the scheduler name ("troupe-scheduler"), so the Deployment is
troupe-scheduler whatever the release is called; fullnameOverride wins. Cut to 63 characters.
*/}}
{{- define "troupe.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "troupe.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- .Values.schedulerName | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "troupe.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "troupe.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels: stable across upgrades. */}}
{{- define "troupe.selectorLabels" -}}
app.kubernetes.io/name: {{ include "troupe.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "troupe.labels" -}}
helm.sh/chart: {{ include "troupe.chart" . }}
{{ include "troupe.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: scheduler
app.kubernetes.io/part-of: troupe
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "troupe.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "troupe.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "troupe.troupeImage" -}}
{{- printf "%s:%s" .Values.troupe.image.repository (default .Chart.AppVersion .Values.troupe.image.tag) }}
{{- end }}

{{/* Whether the pod IP serves Troupe's metrics port (probes, Service, ServiceMonitor, PodMonitor). */}}
{{- define "troupe.podReachable" -}}
{{- if ne .Values.troupe.metricsListenAddress "127.0.0.1" }}true{{ end }}
{{- end }}

{{/* --metrics-listen value: HOST:PORT, an IPv6 host in brackets. */}}
{{- define "troupe.metricsListen" -}}
{{- $host := .Values.troupe.metricsListenAddress }}
{{- if contains ":" $host }}{{ $host = printf "[%s]" $host }}{{ end }}
{{- printf "%s:%d" $host (int .Values.troupe.metricsPort) }}
{{- end }}

{{/* extender httpTimeout: gang timeout + margin. Gang binds wait at the barrier up to the gang timeout. */}}
{{- define "troupe.httpTimeout" -}}
{{- printf "%ds" (add .Values.troupe.gangTimeoutSeconds .Values.extender.httpTimeoutMarginSeconds | int) }}
{{- end }}

{{/* Troupe's own ServiceAccount (troupe.serviceAccount.separate). */}}
{{- define "troupe.troupeServiceAccountName" -}}
{{- default (printf "%s-troupe" (include "troupe.fullname" .) | trunc 63 | trimSuffix "-") .Values.troupe.serviceAccount.name }}
{{- end }}

{{/* Whether Troupe uses a ServiceAccount of its own: only when it talks to the API. */}}
{{- define "troupe.separateAccount" -}}
{{- if and .Values.troupe.kubernetesApi .Values.troupe.serviceAccount.separate }}true{{ end }}
{{- end }}

{{/* The Secret with the extender's TLS files: the user's, or the one the chart generates. */}}
{{- define "troupe.tlsSecret" -}}
{{- default (printf "%s-tls" (include "troupe.fullname" .)) .Values.troupe.tls.existingSecret }}
{{- end }}

{{/* --leader-lease NAMESPACE/NAME: with standbys (replicaCount > 1) in Kubernetes mode, Troupe reads
     its kube-scheduler's Lease so that only the leader's Troupe writes Queue status and reclaims.
     Empty with one replica: that Troupe is always the active one. */}}
{{- define "troupe.leaderLease" -}}
{{- if and .Values.troupe.kubernetesApi .Values.kubeScheduler.leaderElection.enabled (gt (int .Values.replicaCount) 1) }}
{{- printf "%s/%s" (include "troupe.namespace" .) .Values.kubeScheduler.leaderElection.leaseName }}
{{- end }}
{{- end }}
