{{/* The chart's name, or nameOverride. */}}
{{- define "payd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's resource name: fullnameOverride, else release-chart (once). */}}
{{- define "payd.fullname" -}}
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

{{- define "payd.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The labels of every resource. */}}
{{- define "payd.labels" -}}
helm.sh/chart: {{ include "payd.chart" . }}
app.kubernetes.io/name: {{ include "payd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The labels that pick payd's serving pods (Deployment, Service, PDB,
ServiceMonitor). The component keeps the migrations Job's pod out.
*/}}
{{- define "payd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "payd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end }}

{{- define "payd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "payd.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image: by digest when image.digest pins one, else by tag. */}}
{{- define "payd.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The Secret holding payd's secret settings (the chart's or yours). */}}
{{- define "payd.secretName" -}}
{{- default (include "payd.fullname" .) .Values.secrets.existingSecret }}
{{- end }}

{{/* "true" when the database URL in the values is SQLite. */}}
{{- define "payd.sqlite" -}}
{{- if hasPrefix "sqlite:" (lower (.Values.secrets.databaseURL | toString)) }}true{{ end }}
{{- end }}

{{/*
The grace period: preStop sleep + payd's shutdown delay + its drain +
a margin. Computed here, never set apart, so it cannot fall short of them.
*/}}
{{- define "payd.terminationGracePeriodSeconds" -}}
{{- $s := .Values.shutdown }}
{{- add (int $s.preStopSleepSeconds) (int $s.shutdownDelaySeconds) (int $s.drainSeconds) (int $s.marginSeconds) }}
{{- end }}

{{/*
The names of payd's secret settings, and of the OpenTelemetry exporter's
headers (a collector's token goes there): never in env or extraEnv values.
*/}}
{{- define "payd.secretEnvNames" -}}
PAYD_DATABASE_URL PAYD_ADMIN_TOKEN PAYD_ADMIN_TOKENS PAYD_WEBHOOK_SECRET PAYD_SECRET_KEY PAYD_MERCHANT_KEY PAYD_MERCHANT_KEYS STRIPE_SECRET_KEY STRIPE_WEBHOOK_SECRET PAYD_REDIS_URL PAYD_NOTIFY_SECRET PAYD_SANDBOX_DATABASE_URL OTEL_EXPORTER_OTLP_HEADERS OTEL_EXPORTER_OTLP_TRACES_HEADERS
{{- end }}

{{/* Refuse values payd cannot run with; called by every template that needs them. */}}
{{- /*
payd.validate refuses values payd cannot run with, at helm template and
install. helm lint reports a template's fail as [INFO] and passes: the
secrets a release cannot start without are also required by
values.schema.json, whose errors fail lint too.
*/}}
{{- define "payd.validate" -}}
{{- $secretNames := splitList " " (include "payd.secretEnvNames" .) }}
{{- range $k, $v := .Values.env }}
{{- if has $k $secretNames }}
{{- fail (printf "env.%s is a secret: set it under secrets: (or in secrets.existingSecret), not in env" $k) }}
{{- end }}
{{- end }}
{{- range .Values.extraEnv }}
{{- if and (has .name $secretNames) (hasKey . "value") }}
{{- fail (printf "extraEnv %s is a secret: set it under secrets: (or valueFrom a Secret), not as a plain value" .name) }}
{{- end }}
{{- end }}
{{- range $k, $v := .Values.secrets.extra }}
{{- if not (regexMatch "^[A-Z_][A-Z0-9_]*$" $k) }}
{{- fail (printf "secrets.extra.%s: a variable name is upper case letters, digits and _" $k) }}
{{- end }}
{{- end }}
{{- if not (has .Values.provider.name (list "sandbox" "stripe")) }}
{{- fail (printf "provider.name must be sandbox or stripe, not %q" .Values.provider.name) }}
{{- end }}
{{- if not .Values.secrets.existingSecret }}
{{- if not .Values.secrets.databaseURL }}{{ fail "secrets.databaseURL is required (mysql://USER:PASS@HOST:PORT/DB), or set secrets.existingSecret" }}{{ end }}
{{- if not .Values.secrets.adminToken }}{{ fail "secrets.adminToken is required (payd refuses to start in production without it), or set secrets.existingSecret" }}{{ end }}
{{- if not .Values.secrets.webhookSecret }}{{ fail "secrets.webhookSecret is required (whsec_...), or set secrets.existingSecret" }}{{ end }}
{{- if not .Values.secrets.secretKey }}{{ fail "secrets.secretKey is required, or set secrets.existingSecret" }}{{ end }}
{{- if not .Values.secrets.merchantKey }}{{ fail "secrets.merchantKey is required (sk_...; payd refuses to start in production without it), or set secrets.existingSecret" }}{{ end }}
{{- if eq .Values.provider.name "stripe" }}
{{- if not .Values.secrets.stripeSecretKey }}{{ fail "secrets.stripeSecretKey is required with provider.name=stripe" }}{{ end }}
{{- if not .Values.secrets.stripeWebhookSecret }}{{ fail "secrets.stripeWebhookSecret is required with provider.name=stripe" }}{{ end }}
{{- end }}
{{- end }}
{{- if include "payd.sqlite" . }}
{{- if or (gt (int .Values.replicaCount) 1) .Values.autoscaling.enabled }}
{{- fail "a sqlite:// database serves one payd process: set replicaCount=1 and autoscaling.enabled=false, or use MariaDB/MySQL" }}
{{- end }}
{{- end }}
{{- range $k := list "preStopSleepSeconds" "shutdownDelaySeconds" "drainSeconds" "marginSeconds" }}
{{- if lt (int (index $.Values.shutdown $k)) 0 }}
{{- fail (printf "shutdown.%s must not be negative" $k) }}
{{- end }}
{{- end }}
{{- end }}
