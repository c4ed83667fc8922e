{{/*
The chart's name, or nameOverride.
*/}}
{{- define "fence.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The objects' name: fullnameOverride, else RELEASE (when it holds the chart's
name) or RELEASE-NAME. At most 52 characters, so that the headless Service's
name ("-headless") and a pod's ("-N") stay DNS labels.
*/}}
{{- define "fence.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The headless Service that gives each server its stable DNS name.
*/}}
{{- define "fence.headless" -}}
{{- printf "%s-headless" (include "fence.fullname" .) }}
{{- end }}

{{- define "fence.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "fence.labels" -}}
helm.sh/chart: {{ include "fence.chart" . }}
{{ include "fence.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "fence.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fence.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "fence.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "fence.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "fence.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "fence.scheme" -}}
{{- if .Values.tls.enabled }}https{{ else }}http{{ end }}
{{- end }}

{{/*
The URL of server N (a pod of the StatefulSet) through the headless Service;
called with (list $ N).
*/}}
{{- define "fence.serverURL" -}}
{{- $ := index . 0 }}
{{- printf "%s://%s-%d.%s.%s.svc.%s:7700" (include "fence.scheme" $) (include "fence.fullname" $) (index . 1) (include "fence.headless" $) $.Release.Namespace $.Values.clusterDomain }}
{{- end }}

{{/*
Every server's URL, comma-separated: FENCE_ADDR of a client, which fails over
between them.
*/}}
{{- define "fence.serverURLs" -}}
{{- $urls := list }}
{{- range $i := until (int .Values.replicaCount) }}
{{- $urls = append $urls (include "fence.serverURL" (list $ $i)) }}
{{- end }}
{{- join "," $urls }}
{{- end }}

{{/*
The --store URL built from store.etcd: etcd://HOST:PORT,.../PREFIX, with the
TLS files of store.etcd.tls as parameters.
*/}}
{{- define "fence.etcdURL" -}}
{{- $etcd := .Values.store.etcd }}
{{- $scheme := ternary "etcds" "etcd" $etcd.tls.enabled }}
{{- $params := list }}
{{- if and $etcd.tls.enabled $etcd.tls.secretName }}
{{- $params = append $params "cacert=/etc/fence/etcd/ca.crt" }}
{{- if $etcd.tls.clientCert }}
{{- $params = concat $params (list "cert=/etc/fence/etcd/tls.crt" "key=/etc/fence/etcd/tls.key") }}
{{- end }}
{{- end }}
{{- printf "%s://%s/%s" $scheme (join "," $etcd.endpoints) (trimAll "/" $etcd.prefix) }}
{{- if $params }}?{{ join "&" $params }}{{ end }}
{{- end }}

{{/*
The Secret and key that hold the --store URL, or nothing when the URL is
built from the values (etcd endpoints).
*/}}
{{- define "fence.storeSecretName" -}}
{{- $s := get .Values.store .Values.store.type }}
{{- if $s.existingSecret }}{{ $s.existingSecret }}
{{- else if eq .Values.store.type "postgres" }}{{ printf "%s-store" (include "fence.fullname" .) }}
{{- end }}
{{- end }}

{{- define "fence.storeSecretKey" -}}
{{- $s := get .Values.store .Values.store.type }}
{{- if $s.existingSecret }}{{ $s.existingSecretKey }}{{ else }}store-url{{ end }}
{{- end }}

{{- define "fence.authSecretName" -}}
{{- default (printf "%s-auth" (include "fence.fullname" .)) .Values.auth.existingSecret }}
{{- end }}

{{- define "fence.authSecretKey" -}}
{{- if .Values.auth.existingSecret }}{{ .Values.auth.existingSecretKey }}{{ else }}auth{{ end }}
{{- end }}

{{- define "fence.signingSecretName" -}}
{{- default (printf "%s-signing-key" (include "fence.fullname" .)) .Values.signingKey.existingSecret }}
{{- end }}

{{- define "fence.signingSecretKey" -}}
{{- if .Values.signingKey.existingSecret }}{{ .Values.signingKey.existingSecretKey }}{{ else }}signing.key{{ end }}
{{- end }}

{{- define "fence.hasAuth" -}}
{{- if or .Values.auth.existingSecret .Values.auth.file }}true{{ end }}
{{- end }}

{{- define "fence.hasSigningKey" -}}
{{- if or .Values.signingKey.existingSecret .Values.signingKey.key }}true{{ end }}
{{- end }}

{{/*
Checks of the values that values.schema.json cannot express, each failing
with what to set. Included by every template, so that any rendering fails.
*/}}
{{- define "fence.validate" -}}
{{- $store := .Values.store }}
{{- if eq $store.type "etcd" }}
{{- if and (not $store.etcd.endpoints) (not $store.etcd.existingSecret) }}
{{- fail "store.type is etcd: set store.etcd.endpoints (host:port of each etcd member), or store.etcd.existingSecret (a Secret holding the whole --store URL)" }}
{{- end }}
{{- if and $store.etcd.tls.clientCert (not $store.etcd.tls.secretName) }}
{{- fail "store.etcd.tls.clientCert needs store.etcd.tls.secretName (a Secret with tls.crt and tls.key)" }}
{{- end }}
{{- else if eq $store.type "postgres" }}
{{- if and (not $store.postgres.url) (not $store.postgres.existingSecret) }}
{{- fail "store.type is postgres: set store.postgres.existingSecret (a Secret holding the DSN), or store.postgres.url" }}
{{- end }}
{{- else }}
{{- fail (printf "store.type is %q: want etcd or postgres" $store.type) }}
{{- end }}
{{- if and .Values.auth.existingSecret .Values.auth.file }}
{{- fail "auth: set auth.existingSecret or auth.file, not both" }}
{{- end }}
{{- if and (not (include "fence.hasAuth" .)) (not .Values.auth.insecure) }}
{{- fail "auth: the servers listen beyond loopback and need an auth file: set auth.existingSecret (a Secret holding it) or auth.file, or auth.insecure=true to serve without authentication" }}
{{- end }}
{{- if and (include "fence.hasAuth" .) .Values.auth.insecure }}
{{- fail "auth: auth.insecure=true serves without authentication: unset it, or the auth file" }}
{{- end }}
{{- if and .Values.server.protectMetrics (not (include "fence.hasAuth" .)) }}
{{- fail "server.protectMetrics needs an auth file (auth.existingSecret or auth.file)" }}
{{- end }}
{{- if and .Values.signingKey.existingSecret .Values.signingKey.key }}
{{- fail "signingKey: set signingKey.existingSecret or signingKey.key, not both" }}
{{- end }}
{{- if and .Values.tls.enabled (not .Values.tls.secretName) }}
{{- fail "tls.enabled needs tls.secretName (a kubernetes.io/tls Secret with tls.crt, tls.key and ca.crt)" }}
{{- end }}
{{- if and .Values.serviceMonitor.enabled .Values.server.protectMetrics (not .Values.serviceMonitor.bearerTokenSecret.name) }}
{{- fail "server.protectMetrics: the ServiceMonitor needs serviceMonitor.bearerTokenSecret.name (a Secret's key holding a token with admin:*)" }}
{{- end }}
{{- if and .Values.cronJob.enabled (not .Values.auth.insecure) (not .Values.cronJob.authTokenSecret.name) }}
{{- fail "cronJob.enabled: the job needs cronJob.authTokenSecret.name (a Secret's key holding a token with lock on cronJob.resource)" }}
{{- end }}
{{- end }}
