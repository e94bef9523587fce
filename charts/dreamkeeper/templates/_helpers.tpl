{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "dreamkeeper.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: the release name, prefixed with the chart name unless it already contains it. */}}
{{- define "dreamkeeper.fullname" -}}
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

{{- define "dreamkeeper.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dreamkeeper.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dreamkeeper.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "dreamkeeper.labels" -}}
helm.sh/chart: {{ include "dreamkeeper.chart" . }}
{{ include "dreamkeeper.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: dreamkeeper
{{- end }}

{{- define "dreamkeeper.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dreamkeeper.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "dreamkeeper.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The namespaces served in namespace scope, as a JSON list: the configured ones, else the release namespace. */}}
{{- define "dreamkeeper.watchNamespaces" -}}
{{- if .Values.operator.namespaces }}
{{- .Values.operator.namespaces | uniq | toJson }}
{{- else }}
{{- list .Release.Namespace | toJson }}
{{- end }}
{{- end }}

{{/* True (non-empty) when the monitoring custom resources should be rendered for this flag. */}}
{{- define "dreamkeeper.monitoringApi" -}}
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" }}true{{ end }}
{{- end }}
