# shellcheck shell=bash
# Pinned versions of everything hack/cluster builds. Change a pin here; the cache is keyed by it.
# shellcheck disable=SC2034  # read by hack/cluster and build.sh
K8S_VERSION="${TFPS_K8S_VERSION:-v1.37.2}"   # k8s.io/kubernetes; etcd version is read from its go.mod
KWOK_VERSION="${TFPS_KWOK_VERSION:-v0.8.0}"  # sigs.k8s.io/kwok
HELM_VERSION="${TFPS_HELM_VERSION:-v4.3.2}"  # helm.sh/helm/v4
TFPS_CACHE="${TFPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfps}"
