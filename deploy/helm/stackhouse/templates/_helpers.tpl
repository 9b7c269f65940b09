{{/* The release's base name, DNS-1123, at most 63 characters with a component suffix. */}}
{{- define "stackhouse.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "stackhouse.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component; takes (dict "ctx" $ "component" name). */}}
{{- define "stackhouse.selectorLabels" -}}
app.kubernetes.io/name: {{ .ctx.Chart.Name }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The components this mode runs. */}}
{{- define "stackhouse.components" -}}
{{- if eq .Values.mode "microservices" -}}
ingest,query,compactor
{{- else -}}
all
{{- end -}}
{{- end -}}

{{- define "stackhouse.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "stackhouse.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "stackhouse.catalogSecret" -}}
{{- default (printf "%s-catalog" (include "stackhouse.fullname" .)) .Values.catalog.existingSecret -}}
{{- end -}}

{{- define "stackhouse.storageSecret" -}}
{{- default (printf "%s-storage" (include "stackhouse.fullname" .)) .Values.storage.credentials.existingSecret -}}
{{- end -}}

{{- define "stackhouse.workerSecret" -}}
{{- default (printf "%s-query-workers" (include "stackhouse.fullname" .)) .Values.query.workers.secret.existingSecret -}}
{{- end -}}

{{/* Whether query pods serve and use query workers. */}}
{{- define "stackhouse.workers" -}}
{{- if and (eq .Values.mode "microservices") .Values.query.workers.enabled -}}true{{- end -}}
{{- end -}}

{{/* Whether S3 credentials come from a Secret (else: workload identity). */}}
{{- define "stackhouse.staticCredentials" -}}
{{- if or .Values.storage.credentials.existingSecret .Values.storage.credentials.accessKeyId -}}true{{- end -}}
{{- end -}}

{{/* Microservices share one catalog and one bucket: both are required there. */}}
{{- define "stackhouse.validate" -}}
{{- if eq .Values.mode "microservices" -}}
{{- if not (or .Values.catalog.existingSecret .Values.catalog.url) -}}
{{- fail "mode microservices needs a Postgres catalog: set catalog.existingSecret or catalog.url" -}}
{{- end -}}
{{- if not .Values.storage.bucket -}}
{{- fail "mode microservices needs object storage: set storage.bucket" -}}
{{- end -}}
{{- end -}}
{{- if and (include "stackhouse.workers" .) (not (or .Values.query.workers.secret.existingSecret .Values.query.workers.secret.value)) -}}
{{- fail "query.workers needs a shared secret: set query.workers.secret.existingSecret or query.workers.secret.value" -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.secretName) -}}
{{- fail "tls.enabled needs tls.secretName: a Secret of type kubernetes.io/tls" -}}
{{- end -}}
{{- if and .Values.storage.credentials.accessKeyId (not .Values.storage.credentials.secretAccessKey) -}}
{{- fail "storage.credentials.accessKeyId needs storage.credentials.secretAccessKey" -}}
{{- end -}}
{{- end -}}
