# shellcheck shell=bash
# Real-node builds: kubelet (same k8s.io/kubernetes pin as the control plane, its own cache dir so the
# control-plane build is untouched) and CoreDNS. Sourced by hack/realnode/node after versions.sh and
# build.sh (reuses go_mod_file, staging_replaces, run_build, build_simple).

COREDNS_VERSION="${TFPS_COREDNS_VERSION:-v1.14.7}"   # github.com/coredns/coredns

# build_kubelet: k8s.io/kubernetes/cmd/kubelet through the same wrapper-module trick as build_k8s.
build_kubelet() {
  local dir="$TFPS_CACHE/kubelet/$K8S_VERSION" mod logf kgomod minor t0=$SECONDS
  [[ -f $dir/bin/.complete ]] && return 0
  log "building kubelet $K8S_VERSION into $dir/bin (once per version)"
  mkdir -p "$dir" && rm -rf "$dir"/wrapper.* && mod=$(mktemp -d "$dir/wrapper.XXXXXX"); logf="$dir/build.log"; : >"$logf"
  kgomod=$(go_mod_file "k8s.io/kubernetes@$K8S_VERSION") || { echo "!! cannot fetch k8s.io/kubernetes@$K8S_VERSION" >&2; return 1; }
  minor=${K8S_VERSION#v1.}; minor="v0.${minor}"
  {
    printf 'module tfps.local/kubeletbuild\n\ngo 1.26\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$K8S_VERSION"
    staging_replaces "$kgomod" "$minor" | sed 's/^/	/'
    echo ")"
  } >"$mod/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "k8s.io/kubernetes/cmd/kubelet"\n' >"$mod/tools.go"
  local vpkg ld="-s -w" min=${K8S_VERSION#v1.}; min=${min%%.*}
  for vpkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $vpkg.gitVersion=$K8S_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$min -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=1970-01-01T00:00:00Z"
  done
  ( cd "$mod" && run_build "kubelet (go mod tidy)" "$logf" go mod tidy ) || return 1
  ( cd "$mod" && run_build "kubelet (go build)" "$logf" go build -trimpath -ldflags="$ld" -o "$mod/out/" k8s.io/kubernetes/cmd/kubelet ) || return 1
  rm -rf "${dir:?}/bin" && mv "$mod/out" "$dir/bin"
  echo "k8s.io/kubernetes $K8S_VERSION (kubelet); $(go version)" >"$dir/bin/VERSIONS"
  rm -rf "$mod"; touch "$dir/bin/.complete"
  log "  built kubelet $K8S_VERSION in $((SECONDS - t0))s"
}

build_coredns() {
  build_simple coredns github.com/coredns/coredns "$COREDNS_VERSION" github.com/coredns/coredns \
    "-X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION"
}
