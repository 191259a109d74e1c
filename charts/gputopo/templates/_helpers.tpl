{{/* Labels of every object: the manifests' part-of label plus Helm's. */}}
{{- define "gputopo.labels" -}}
app.kubernetes.io/part-of: gputopo
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* image renders repository:tag, the tag defaulting to appVersion. */}}
{{- define "gputopo.image" -}}
{{- $tag := .image.tag | default .root.Chart.AppVersion -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end }}

{{/* The scheduler's service account user name, which the partition policy matches. */}}
{{- define "gputopo.schedulerUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:gputopo-scheduler
{{- end }}

{{/* featureGates: the scheduler's --feature-gates value, sorted. */}}
{{- define "gputopo.featureGates" -}}
{{- $gates := deepCopy .Values.scheduler.featureGates -}}
{{- if .Values.podGroups.enabled -}}
{{- range $name := list "DRAWorkloadResourceClaims" "GenericWorkload" "TopologyAwareWorkloadScheduling" -}}
{{- if eq (toString (get $gates $name)) "false" -}}
{{- fail (printf "scheduler.featureGates.%s: false, but podGroups.enabled needs it on" $name) -}}
{{- end -}}
{{- $_ := set $gates $name true -}}
{{- end -}}
{{- end -}}
{{- $out := list -}}
{{- range $name := keys $gates | sortAlpha -}}
{{- $out = append $out (printf "%s=%v" $name (get $gates $name)) -}}
{{- end -}}
{{- join "," $out -}}
{{- end }}

{{/* The scheduler's leader-election lease: kube-scheduler's own where
gputopo replaces it, so that the two are never active at once. */}}
{{- define "gputopo.leaseNamespace" -}}
{{- if eq .Values.mode "scheduler" }}kube-system{{ else }}{{ .Release.Namespace }}{{ end }}
{{- end }}

{{- define "gputopo.leaseName" -}}
{{- if eq .Values.mode "scheduler" }}kube-scheduler{{ else }}gputopo-scheduler{{ end }}
{{- end }}

{{/* "true" when the node agent's config puts any GPU in MIG mode: only
then does the agent get SYS_ADMIN and the MIG configuration devices. */}}
{{/*
gputopo.nodeAgentCliqueLabel: "true" when the agent labels its node
with the clique, asked for by nodeAgent.cliqueLabel or in the agent's
own configuration (nodeAgent.config.cliqueLabel): either way it needs
the node-patch role and its admission policy.
*/}}
{{- define "gputopo.nodeAgentCliqueLabel" -}}
{{- if or .Values.nodeAgent.cliqueLabel .Values.nodeAgent.config.cliqueLabel }}true{{ end -}}
{{- end -}}

{{- define "gputopo.nodeAgentMIG" -}}
{{- $mig := eq (toString .Values.nodeAgent.config.defaultMode) "mig" -}}
{{- range .Values.nodeAgent.config.gpus -}}
{{- if eq (toString .mode) "mig" }}{{ $mig = true }}{{ end -}}
{{- end -}}
{{- if $mig }}true{{ end -}}
{{- end -}}
