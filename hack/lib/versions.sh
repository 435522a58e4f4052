# shellcheck shell=bash
# Pinned versions of everything hack/cluster builds. Change a pin here; the cache is keyed by it.
# shellcheck disable=SC2034  # read by hack/cluster and build.sh
K8S_VERSION="${TFPS_K8S_VERSION:-v1.37.2}"   # k8s.io/kubernetes; etcd version is read from its go.mod
KWOK_VERSION="${TFPS_KWOK_VERSION:-v0.8.0}"  # sigs.k8s.io/kwok
KWOK_BUILD="$KWOK_VERSION-uid-delete"  # its cache key: built with hack/lib/kwok-uid-delete.patch
HELM_VERSION="${TFPS_HELM_VERSION:-v4.3.2}"  # helm.sh/helm/v4
SCHED_PLUGINS_VERSION="${TFPS_SCHED_PLUGINS_VERSION:-v0.34.7}"  # sigs.k8s.io/scheduler-plugins (gang: Coscheduling)
# The proxy does not serve k8s.io/csi-translation-lib v0.34.7 (scheduler-plugins v0.34.7 pins it), nor v0.34.6: an
# earlier patch release instead (v0.34.5), a small library of in-tree volume-plugin name translation.
# The Kubernetes version scheduler-plugins $SCHED_PLUGINS_VERSION builds on (its go.mod's k8s.io/kubernetes): the
# binary's version as component-base sees it (a v0.x there fails its emulation-version check at start).
SCHED_PLUGINS_K8S_VERSION="${TFPS_SCHED_PLUGINS_K8S_VERSION:-v1.34.7}"
SCHED_PLUGINS_REPLACES="k8s.io/csi-translation-lib=k8s.io/csi-translation-lib@v0.34.5"
KUEUE_VERSION="${TFPS_KUEUE_VERSION:-v0.17.0}"  # sigs.k8s.io/kueue (quota, queues, admission; hack/lib/kueue.sh)
# Kueue builds on Kubernetes $K8S_VERSION's pins (hack/README.md, "Builds"): without its TrainJob integration
# (hack/lib/kueue-without-trainjob.patch) and on the controller-runtime release for that Kubernetes minor
# (Kueue v0.17.0's own, v0.23.3, does not compile against client-go v0.37). Its cache key says both.
KUEUE_CONTROLLER_RUNTIME="${TFPS_KUEUE_CONTROLLER_RUNTIME:-v0.25.3}"
KUEUE_BUILD="$KUEUE_VERSION-k8s$K8S_VERSION-cr$KUEUE_CONTROLLER_RUNTIME"
KSERVE_VERSION="${TFPS_KSERVE_VERSION:-v0.15.2}"  # github.com/kserve/kserve (InferenceService CRDs; hack/kserve)
TFPS_CACHE="${TFPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfps}"
FAKE_GCS_VERSION="${TFPS_FAKE_GCS_VERSION:-v1.56.1}"  # github.com/fsouza/fake-gcs-server (hack/gcs-emulator)
