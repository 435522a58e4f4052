{{/*
The namespaced permissions of the operator: what it (operator/tfps_operator/kube/client.py and the
Kopf handlers) does to PSTrainingJobs and their children. Used by the ClusterRole (cluster-wide
mode) and by each Role (namespaced mode). Keep docs/install.md's RBAC table in step.
*/}}
{{- define "tfps.namespacedRules" -}}
# The custom resource: Kopf lists/watches it and patches its finalizer and progress annotations;
# the reconcile loop reads it, and deletes it after spec.runPolicy.ttlSecondsAfterFinished.
- apiGroups: [tfps.dev]
  resources: [pstrainingjobs]
  verbs: [get, list, watch, patch, delete]
- apiGroups: [tfps.dev]
  resources: [pstrainingjobs/status]
  verbs: [patch]
# Children carry a controller ownerReference with blockOwnerDeletion; where the
# OwnerReferencesPermissionEnforcement admission plugin is on, that needs update on finalizers.
- apiGroups: [tfps.dev]
  resources: [pstrainingjobs/finalizers]
  verbs: [update]
# Trainer pods: watched (server-side label selector), created (or adopted: get on 409), deleted on
# restart; a finished job's pods go in one delete-collection by label (cleanPodPolicy).
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, delete, deletecollection]
# The job's headless Service, isolating NetworkPolicy and PVC: watched (the reconcile loop reads
# its index, never the API), created (or adopted: get on 409); they go with the job by garbage
# collection, never deleted by the operator.
- apiGroups: [""]
  resources: [services, persistentvolumeclaims]
  verbs: [get, list, watch, create]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch, create]
# The export Job: watched, created (or adopted), read, deleted when a retrain supersedes it.
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create, delete]
# Events on PSTrainingJobs (the operator's and Kopf's own).
- apiGroups: [""]
  resources: [events]
  verbs: [create]
# KServe (spec.serving): a Succeeded job's InferenceService, read in its passes, created, or merge-patched
# to a newer export; never listed, watched or deleted (it is not the job's child and outlives it). Granted
# whether or not KServe is installed: a job says KServeNotInstalled until it is.
- apiGroups: [serving.kserve.io]
  resources: [inferenceservices]
  verbs: [get, create, patch]
{{- if .Values.gangScheduling.enabled }}
# Gang scheduling: each job's PodGroup, watched and created (or adopted); it goes with the job by
# garbage collection.
- apiGroups: [scheduling.x-k8s.io]
  resources: [podgroups]
  verbs: [get, list, watch, create]
{{- end }}
{{- if .Values.kueue.enabled }}
# Kueue: each queued job's Workload, watched, created (or adopted) and deleted while the user suspends
# the job; its status patched to mark it Finished, or to give an evicted job's admission back.
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads]
  verbs: [get, list, watch, create, delete]
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads/status]
  verbs: [patch]
{{- end }}
{{- end -}}

{{/*
Cluster-scoped reads of the Kueue integration: the ResourceFlavors an admission names (node labels and
tolerations for the pods) and the PriorityClass a job names (the Workload's priority).
*/}}
{{- define "tfps.kueueClusterRules" -}}
{{- if .Values.kueue.enabled }}
# Kueue: the admitted flavors' node labels and tolerations, and the priority of a job's PriorityClass.
- apiGroups: [kueue.x-k8s.io]
  resources: [resourceflavors]
  verbs: [get]
- apiGroups: [scheduling.k8s.io]
  resources: [priorityclasses]
  verbs: [get]
{{- end }}
{{- end -}}
