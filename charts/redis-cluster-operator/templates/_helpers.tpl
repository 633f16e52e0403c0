{{/* The chart's name, or nameOverride. */}}
{{- define "rco.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: a prefix for every object, unique per release. */}}
{{- define "rco.fullname" -}}
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

{{/* Labels on every object. */}}
{{- define "rco.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "rco.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The operator's pods: the Deployment's selector and the metrics Service's. */}}
{{- define "rco.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rco.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller-manager
{{- end }}

{{- define "rco.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "rco.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The manager's RBAC rules, exactly as `make manifests` generates them into
config/rbac/role.yaml from the controller's markers (the Makefile copies that file to
files/manager-role.yaml; a test checks the rendered rules equal it).
*/}}
{{- define "rco.managerRules" -}}
{{- $role := .Files.Get "files/manager-role.yaml" | fromYaml }}
{{- if not $role.rules }}
{{- fail "files/manager-role.yaml has no rules: run 'make manifests'" }}
{{- end }}
{{- toYaml $role.rules }}
{{- end }}

{{/*
The rules of a Role or ClusterRole file copied from config/rbac by `make manifests`:
(dict "ctx" . "file" "files/NAME.yaml").
*/}}
{{- define "rco.fileRules" -}}
{{- $role := .ctx.Files.Get .file | fromYaml }}
{{- if not $role.rules }}
{{- fail (printf "%s has no rules: run 'make manifests'" .file) }}
{{- end }}
{{- toYaml $role.rules }}
{{- end }}

{{/* Leader election's rules, from config/rbac/leader_election_role.yaml (copied likewise). */}}
{{- define "rco.leaderElectionRules" -}}
{{- $role := .Files.Get "files/leader-election-role.yaml" | fromYaml }}
{{- if not $role.rules }}
{{- fail "files/leader-election-role.yaml has no rules: run 'make manifests'" }}
{{- end }}
{{- toYaml $role.rules }}
{{- end }}
