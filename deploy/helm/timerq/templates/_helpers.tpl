{{/* Names and labels shared by the chart's templates. */}}

{{- define "timerq.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "timerq.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "timerq.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "timerq.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: call with (dict "ctx" $ "component" "worker"). */}}
{{- define "timerq.selectorLabels" -}}
app.kubernetes.io/name: {{ include "timerq.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "timerq.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "timerq.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "timerq.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the Redis URL: the user's, or the one the chart creates. */}}
{{- define "timerq.redisSecretName" -}}
{{- default (printf "%s-redis" (include "timerq.fullname" .)) .Values.redis.existingSecret -}}
{{- end -}}

{{/* Fails the render when Redis is not given, or given inconsistently. */}}
{{- define "timerq.validate" -}}
{{- if and (not .Values.redis.existingSecret) (not .Values.redis.url) -}}
{{- fail "timerq: set redis.existingSecret (a Secret holding the Redis URL) or redis.url (the chart then creates that Secret)" -}}
{{- end -}}
{{- if and .Values.redis.existingSecret .Values.redis.url -}}
{{- fail "timerq: both redis.existingSecret and redis.url are set; keep one (the URL belongs in the Secret)" -}}
{{- end -}}
{{- if and .Values.redis.url .Values.redis.tls.enabled (not (hasPrefix "rediss://" .Values.redis.url)) -}}
{{- fail "timerq: redis.tls.enabled needs a rediss:// URL in redis.url; the TLS flags are refused with redis://" -}}
{{- end -}}
{{- if and .Values.redis.tls.enabled (not .Values.redis.tls.existingSecret) -}}
{{- fail "timerq: redis.tls.enabled needs redis.tls.existingSecret, the Secret holding the CA and client certificate files" -}}
{{- end -}}
{{- if ne (empty .Values.redis.tls.certKey) (empty .Values.redis.tls.keyKey) -}}
{{- fail "timerq: redis.tls.certKey and redis.tls.keyKey go together (mutual TLS); set both or neither" -}}
{{- end -}}
{{- if and .Values.worker.podDisruptionBudget.maxUnavailable (not (kindIs "invalid" .Values.worker.podDisruptionBudget.minAvailable)) -}}
{{- fail "timerq: worker.podDisruptionBudget takes maxUnavailable or minAvailable, not both" -}}
{{- end -}}
{{- if .Values.api.enabled -}}
{{- if not .Values.api.tokens.existingSecret -}}
{{- fail "timerq: api.enabled needs api.tokens.existingSecret, a Secret holding the tokens file (lines of `timerctl api-token create`); timerworker refuses to serve the API beyond loopback without tokens" -}}
{{- end -}}
{{- if eq (int .Values.api.port) (int .Values.worker.metricsPort) -}}
{{- fail "timerq: api.port and worker.metricsPort are the same port; give the API another one" -}}
{{- end -}}
{{- if and .Values.api.tls.clientCAKey (not .Values.api.tls.existingSecret) -}}
{{- fail "timerq: api.tls.clientCAKey needs api.tls.existingSecret, the Secret holding the API's certificate, key and client CA" -}}
{{- end -}}
{{- if and (not .Values.api.claim) .Values.api.podDisruptionBudget.maxUnavailable (not (kindIs "invalid" .Values.api.podDisruptionBudget.minAvailable)) -}}
{{- fail "timerq: api.podDisruptionBudget takes maxUnavailable or minAvailable, not both" -}}
{{- end -}}
{{- end -}}
{{- if .Values.dashboard.enabled -}}
{{- if and (not .Values.dashboard.auth.existingSecret) (not .Values.dashboard.auth.token) -}}
{{- fail "timerq: the dashboard needs auth off loopback: set dashboard.auth.existingSecret (a Secret holding the token) or dashboard.auth.token (at least 16 characters, e.g. from `openssl rand -hex 16`)" -}}
{{- end -}}
{{- if and .Values.dashboard.auth.token (lt (len .Values.dashboard.auth.token) 16) -}}
{{- fail "timerq: dashboard.auth.token is shorter than 16 characters; timerctl ui would refuse it (use e.g. `openssl rand -hex 16`)" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The Redis environment of a container: the URL from a Secret, and the TLS
file paths. Call with (dict "ctx" $ "secret" NAME "key" KEY).
*/}}
{{- define "timerq.redisEnv" -}}
- name: TIMERQ_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ .secret }}
      key: {{ .key }}
{{- with .ctx.Values.redis.tls }}
{{- if .enabled }}
{{- if .caKey }}
- name: TIMERQ_TLS_CA_FILE
  value: /etc/timerq/redis-tls/{{ .caKey }}
{{- end }}
{{- if .certKey }}
- name: TIMERQ_TLS_CERT_FILE
  value: /etc/timerq/redis-tls/{{ .certKey }}
- name: TIMERQ_TLS_KEY_FILE
  value: /etc/timerq/redis-tls/{{ .keyKey }}
{{- end }}
{{- if .serverName }}
- name: TIMERQ_TLS_SERVER_NAME
  value: {{ .serverName | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "timerq.redisTLSVolumeMount" -}}
{{- if .Values.redis.tls.enabled -}}
- name: redis-tls
  mountPath: /etc/timerq/redis-tls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "timerq.redisTLSVolume" -}}
{{- if .Values.redis.tls.enabled -}}
- name: redis-tls
  secret:
    secretName: {{ .Values.redis.tls.existingSecret }}
    defaultMode: 0440
{{- end }}
{{- end -}}


{{/* The component that serves the HTTP API: the workers, or the API-only replicas. */}}
{{- define "timerq.apiComponent" -}}
{{- if .Values.api.claim }}worker{{ else }}api{{ end -}}
{{- end -}}

{{/*
The HTTP API's environment (docs/worker.md, "The HTTP API"): the listen
address, and files from the mounted Secrets, never their contents.
*/}}
{{- define "timerq.apiEnv" -}}
- name: TIMERQ_API_ADDR
  value: {{ printf ":%v" .Values.api.port | quote }}
- name: TIMERQ_API_TOKENS_FILE
  value: /etc/timerq/api-tokens/{{ .Values.api.tokens.existingSecretKey }}
{{- with .Values.api.tls }}
{{- if .existingSecret }}
- name: TIMERQ_API_TLS_CERT_FILE
  value: /etc/timerq/api-tls/{{ .certKey }}
- name: TIMERQ_API_TLS_KEY_FILE
  value: /etc/timerq/api-tls/{{ .keyKey }}
{{- if .clientCAKey }}
- name: TIMERQ_API_TLS_CLIENT_CA_FILE
  value: /etc/timerq/api-tls/{{ .clientCAKey }}
{{- end }}
{{- end }}
{{- end }}
{{- if .Values.api.rateLimit }}
- name: TIMERQ_API_RATE_LIMIT
  value: {{ .Values.api.rateLimit | quote }}
{{- end }}
{{- end -}}

{{- define "timerq.apiPort" -}}
- name: api
  containerPort: {{ .Values.api.port }}
  protocol: TCP
{{- end -}}

{{- define "timerq.apiVolumeMounts" -}}
- name: api-tokens
  mountPath: /etc/timerq/api-tokens
  readOnly: true
{{- if .Values.api.tls.existingSecret }}
- name: api-tls
  mountPath: /etc/timerq/api-tls
  readOnly: true
{{- end }}
{{- end -}}

{{/* 0440 with the pod's fsGroup: timerworker refuses a tokens file others may write. */}}
{{- define "timerq.apiVolumes" -}}
- name: api-tokens
  secret:
    secretName: {{ .Values.api.tokens.existingSecret }}
    defaultMode: 0440
{{- if .Values.api.tls.existingSecret }}
- name: api-tls
  secret:
    secretName: {{ .Values.api.tls.existingSecret }}
    defaultMode: 0440
{{- end }}
{{- end -}}
