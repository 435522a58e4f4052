{{/*
The namespaced permissions of the operator: what it does to PSTrainingJobs and their children.
Used by the ClusterRole (cluster-wide mode) and by each Role (namespaced mode).
*/}}
{{- define "tfps.namespacedRules" -}}
# The custom resource: watched by Kopf, patched for its finalizer and annotations (handler progress).
- apiGroups: [tfps.dev]
  resources: [pstrainingjobs]
  verbs: [get, list, watch, patch]
- apiGroups: [tfps.dev]
  resources: [pstrainingjobs/status]
  verbs: [patch]
# Children: trainer pods and their headless Service, the isolating NetworkPolicy, the job's PVC.
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [get, create, delete]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, create, delete]
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [get, create]
# The export Job.
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create, delete]
# Events on PSTrainingJobs (the operator's and Kopf's own).
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- end -}}
