{{/* The release's full name: the release name when it names the chart already
("cronsource", the names of the kustomization), else RELEASE-cronsource. */}}
{{- define "cronsource.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "cronsource.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The pods of `run` (not those of the migrate Job): the Deployment's selector (immutable)
and the metrics Service's. */}}
{{- define "cronsource.runSelectorLabels" -}}
{{ include "cronsource.selectorLabels" . }}
app.kubernetes.io/component: run
{{- end -}}

{{- define "cronsource.labels" -}}
{{ include "cronsource.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "cronsource.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "cronsource.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "cronsource.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The store Secret's name; a chart that creates it needs its URL (one line, no render). */}}
{{- define "cronsource.storeSecret" -}}
{{- if and .Values.store.create (not .Values.store.url) -}}
{{- fail "store.url: empty; with store.create=true the chart needs the PostgreSQL URL (or set store.create=false and create the Secret store.secretName yourself)" -}}
{{- end -}}
{{- required "store.secretName: empty; name the Secret that holds the store URL" .Values.store.secretName -}}
{{- end -}}

{{/* Pod and container security of every cronsource container: the image's non-root user on
a read-only root filesystem, as deploy/deployment.yaml runs it. */}}
{{- define "cronsource.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{- define "cronsource.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end -}}
