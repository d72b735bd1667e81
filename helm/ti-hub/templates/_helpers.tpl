{{- /*
  Names, labels and checks of the ti-hub chart.

  The chart's namespaced objects have fixed names (ti-hub-config, ti-hub-secret, ...) because the
  subchart's values refer to them (jupyterhub.hub.extraVolumes) and subchart values are not
  templated. z2jh makes the same choice (hub, proxy-public, ...): one release per namespace.
*/}}

{{- define "ti-hub.labels" -}}
app.kubernetes.io/name: ti-hub
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: ti-hub
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | quote }}
{{- end }}

{{- /* The namespace of user pods: userNamespace, or the release namespace. */}}
{{- define "ti-hub.userNamespace" -}}
{{- .Values.userNamespace | default .Release.Namespace -}}
{{- end }}

{{- /* Objects in the user namespace and cluster-wide ones carry the hub's namespace: several
  hubs (each in its own namespace) may share a user namespace, and the cluster. */}}
{{- define "ti-hub.scopedName" -}}
{{- printf "ti-hub-%s" .Release.Namespace | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{- define "ti-hub.serviceAccountName" -}}
{{- .Values.jupyterhub.hub.serviceAccount.name | required "jupyterhub.hub.serviceAccount.name must name the hub's ServiceAccount" -}}
{{- end }}

{{- /*
  The name z2jh gives one of its objects ("hub", "proxy-public", ...), from its own named
  templates (jupyterhub.<name>.fullname): they honour jupyterhub.fullnameOverride and
  nameOverride. Without the subchart (tests/k8s/test_helm_chart.py renders TiHub's objects
  alone when it cannot fetch z2jh) z2jh's default, fullnameOverride "", which is the bare name.
*/}}
{{- define "ti-hub.z2jhName" -}}
{{- if .root.Subcharts.jupyterhub -}}
{{- include (printf "jupyterhub.%s.fullname" .name) .root -}}
{{- else -}}
{{- .name -}}
{{- end -}}
{{- end }}

{{- /* Pods of z2jh's hub and proxy, by the labels z2jh has kept on them since 1.0. */}}
{{- define "ti-hub.hubPodLabels" -}}
component: hub
release: {{ .Release.Name | quote }}
{{- end }}

{{- define "ti-hub.proxyPodLabels" -}}
component: proxy
release: {{ .Release.Name | quote }}
{{- end }}

{{- /*
  Pod Security admission: the API server refuses any pod that is not restricted in a namespace
  with these labels. The same as POD_SECURITY_LABELS in ti_hub/backends/k8s/objects.py
  (tests/k8s/test_isolation.py compares them).
*/}}
{{- define "ti-hub.podSecurityLabels" -}}
pod-security.kubernetes.io/enforce: restricted
pod-security.kubernetes.io/enforce-version: latest
pod-security.kubernetes.io/audit: restricted
pod-security.kubernetes.io/audit-version: latest
pod-security.kubernetes.io/warn: restricted
pod-security.kubernetes.io/warn-version: latest
{{- end }}

{{- /* User pods (workspaces and job pods) carry this label, set by TiKubeSpawner and KubernetesBackend. */}}
{{- define "ti-hub.userPodLabels" -}}
app.kubernetes.io/managed-by: ti-hub
{{- end }}

{{- define "ti-hub.userPodPorts" -}}
{{- range .Values.networkPolicy.userPodPorts }}
- protocol: TCP
  port: {{ .port }}
  {{- with .endPort }}
  endPort: {{ . }}
  {{- end }}
{{- end }}
{{- end }}

{{- /* What the hub and the ti service read (settings.json in the ConfigMap). */}}
{{- define "ti-hub.settings" -}}
releaseName: {{ .Release.Name | quote }}
releaseNamespace: {{ .Release.Namespace | quote }}
userNamespace: {{ include "ti-hub.userNamespace" . | quote }}
hubService: {{ include "ti-hub.z2jhName" (dict "root" . "name" "hub") | quote }}
proxyPublicService: {{ include "ti-hub.z2jhName" (dict "root" . "name" "proxy-public") | quote }}
baseUrl: {{ .Values.jupyterhub.hub.baseUrl | default "/" | quote }}
servicePort: {{ .Values.tiService.port }}
dataDir: {{ .Values.tiService.dataDir | quote }}
devices: {{ .Values.devices | toJson }}
storageClasses: {{ .Values.storageClasses | toJson }}
imagePullSecrets: {{ .Values.imagePullSecrets | toJson }}
extraConfig: {{ .Values.tiService.extraConfig | quote }}
tensorBoardImage: {{ .Values.tiService.tensorBoardImage | quote }}
networkPolicyPerJob: {{ and .Values.networkPolicy.enabled .Values.networkPolicy.perJob }}
kubeletStats: {{ .Values.tiService.kubeletStats }}
sshGateway:
  enabled: {{ .Values.sshGateway.enabled }}
  port: {{ .Values.sshGateway.port }}
  publicHost: {{ .Values.sshGateway.publicHost | quote }}
  publicPort: {{ .Values.sshGateway.publicPort | default .Values.sshGateway.service.port }}
{{- end }}

{{- /*
  Checks of what the schema cannot see: the wiring between this chart's objects and the
  subchart's static values. Included by configmap.yaml; renders nothing.
*/}}
{{- define "ti-hub.checks" -}}
{{- $hub := .Values.jupyterhub.hub -}}
{{- if and .Values.serviceAccount.create $hub.serviceAccount.create -}}
{{- fail "serviceAccount.create and jupyterhub.hub.serviceAccount.create are both true: two charts would create the same ServiceAccount; set one of them to false" -}}
{{- end -}}
{{- if and .Values.sshGateway.enabled (has (int .Values.sshGateway.port) (list 8081 (int .Values.tiService.port))) -}}
{{- fail "sshGateway.port must differ from the hub's port 8081 and from tiService.port: they share the hub's pod" -}}
{{- end -}}
{{- if eq (int .Values.tiService.port) 8081 -}}
{{- fail "tiService.port must not be 8081, the hub's own port" -}}
{{- end -}}
{{- $volume := dict -}}
{{- range $hub.extraVolumes -}}
{{- if eq .name "ti-hub" }}{{ $volume = . }}{{ end -}}
{{- end -}}
{{- $sources := list -}}
{{- if and $volume $volume.projected -}}
{{- range $volume.projected.sources -}}
{{- if .configMap }}{{ $sources = append $sources (printf "configMap/%s" .configMap.name) }}{{ end -}}
{{- if .secret }}{{ $sources = append $sources (printf "secret/%s" .secret.name) }}{{ end -}}
{{- end -}}
{{- end -}}
{{- if not (and (has "configMap/ti-hub-config" $sources) (has "secret/ti-hub-secret" $sources)) -}}
{{- fail "jupyterhub.hub.extraVolumes lost the volume `ti-hub` (a projected volume of the ConfigMap ti-hub-config and the Secret ti-hub-secret): lists in values replace each other, so copy the chart's entry from its values.yaml next to your own" -}}
{{- end -}}
{{- $mounted := false -}}
{{- range $hub.extraVolumeMounts -}}
{{- if and (eq .name "ti-hub") (eq (.mountPath | trimSuffix "/") "/usr/local/etc/ti-hub") }}{{ $mounted = true }}{{ end -}}
{{- end -}}
{{- if not $mounted -}}
{{- fail "jupyterhub.hub.extraVolumeMounts lost the mount of volume `ti-hub` at /usr/local/etc/ti-hub: copy the chart's entry from its values.yaml next to your own" -}}
{{- end -}}
{{- $loaded := false -}}
{{- range $key, $code := $hub.extraConfig -}}
{{- if contains "/usr/local/etc/ti-hub/ti_hub_config.py" (toString $code) }}{{ $loaded = true }}{{ end -}}
{{- end -}}
{{- if not $loaded -}}
{{- fail "no jupyterhub.hub.extraConfig entry loads /usr/local/etc/ti-hub/ti_hub_config.py: keep the chart's entry 00-ti-hub" -}}
{{- end -}}
{{- $podIP := false -}}
{{- if kindIs "map" $hub.extraEnv -}}
{{- $podIP = hasKey $hub.extraEnv "TI_HUB_POD_IP" -}}
{{- else -}}
{{- range $hub.extraEnv }}{{ if eq .name "TI_HUB_POD_IP" }}{{ $podIP = true }}{{ end }}{{ end -}}
{{- end -}}
{{- if not $podIP -}}
{{- fail "jupyterhub.hub.extraEnv lost TI_HUB_POD_IP (the pod's address, where the ti service listens): keep the chart's entry" -}}
{{- end -}}
{{- $exposed := false -}}
{{- range (dig "service" "extraPorts" list $hub) -}}
{{- if and (eq (int .port) (int $.Values.tiService.port)) (eq (int (.targetPort | default .port)) (int $.Values.tiService.port)) }}{{ $exposed = true }}{{ end -}}
{{- end -}}
{{- if not $exposed -}}
{{- fail (printf "jupyterhub.hub.service.extraPorts needs the ti service's port (port and targetPort %v, tiService.port): workspaces reach the ti API through the hub's Service" .Values.tiService.port) -}}
{{- end -}}
{{- range .Values.networkPolicy.userPodPorts -}}
{{- if and .endPort (lt (int .endPort) (int .port)) -}}
{{- fail (printf "networkPolicy.userPodPorts: endPort %v is below port %v" .endPort .port) -}}
{{- end -}}
{{- end -}}
{{- end }}
