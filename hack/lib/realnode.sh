# shellcheck shell=bash
# Real-node builds: kubelet (same k8s.io/kubernetes pin as the control plane, its own cache dir so the
# control-plane build is untouched) and CoreDNS. Sourced by hack/realnode/node after versions.sh and
# build.sh (reuses go_mod_file, staging_replaces, run_build, build_simple).

COREDNS_VERSION="${TFPS_COREDNS_VERSION:-v1.14.7}"   # github.com/coredns/coredns

# build_kubelet: k8s.io/kubernetes/cmd/kubelet through the same wrapper-module trick as build_k8s.
build_kubelet() {
  local dir="$TFPS_CACHE/kubelet/$K8S_VERSION" mod logf kgomod minor t0=$SECONDS
  [[ -f $dir/bin/.complete ]] && return 0
  lock_build "$dir"; [[ -f $dir/bin/.complete ]] && return 0
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

# CoreDNS with ONLY the plugins our Corefile uses (start_coredns in hack/realnode/node): a wrapper main
# that imports coremain + these plugin packages instead of core/plugin (all ~60 plugins and their cloud
# SDKs). Upstream's directive order (core/dnsserver) is kept; a Corefile naming a plugin not linked here
# fails at start with "unknown directive". Cached in $TFPS_CACHE/coredns/<version>/bin, keyed by the list.
COREDNS_PLUGINS=(bind errors log kubernetes)

coredns_key() { printf '%s %s\n' "$COREDNS_VERSION" "${COREDNS_PLUGINS[*]}"; }

build_coredns() {
  local dir="$TFPS_CACHE/coredns/$COREDNS_VERSION" mod logf t0=$SECONDS p
  [[ -f $dir/bin/.complete && $(<"$dir/bin/.complete") == "$(coredns_key)" ]] && return 0
  lock_build "$dir"; [[ -f $dir/bin/.complete && $(<"$dir/bin/.complete") == "$(coredns_key)" ]] && return 0
  log "building CoreDNS $COREDNS_VERSION with plugins: ${COREDNS_PLUGINS[*]} into $dir/bin"
  mkdir -p "$dir" && rm -rf "$dir"/wrapper.* && mod=$(mktemp -d "$dir/wrapper.XXXXXX"); logf="$dir/build.log"; : >"$logf"
  printf 'module tfps.local/corednsbuild\n\ngo 1.26\n\nrequire github.com/coredns/coredns %s\n' "$COREDNS_VERSION" >"$mod/go.mod"
  {
    printf '// CoreDNS %s with only the plugins hack/realnode needs.\npackage main\n\nimport (\n' "$COREDNS_VERSION"
    printf '\t"github.com/coredns/coredns/coremain"\n'
    for p in "${COREDNS_PLUGINS[@]}"; do printf '\t_ "github.com/coredns/coredns/plugin/%s"\n' "$p"; done
    printf ')\n\nfunc main() { coremain.Run() }\n'
  } >"$mod/main.go"
  ( cd "$mod" && run_build "coredns (go mod tidy)" "$logf" go mod tidy ) || return 1
  ( cd "$mod" && run_build "coredns (go build)" "$logf" go build -trimpath \
      -ldflags="-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" -o "$mod/out/coredns" . ) || return 1
  rm -rf "${dir:?}/bin" && mv "$mod/out" "$dir/bin"
  echo "github.com/coredns/coredns $COREDNS_VERSION; plugins ${COREDNS_PLUGINS[*]}; $(go version)" >"$dir/bin/VERSIONS"
  rm -rf "$mod"
  coredns_key >"$dir/bin/.complete"
  log "  built CoreDNS $COREDNS_VERSION (${COREDNS_PLUGINS[*]}) in $((SECONDS - t0))s"
}

kubelet_cached() { [[ -f $TFPS_CACHE/kubelet/$K8S_VERSION/bin/.complete ]]; }
coredns_cached() { local f=$TFPS_CACHE/coredns/$COREDNS_VERSION/bin/.complete; [[ -f $f && $(<"$f") == "$(coredns_key)" ]]; }

# kube-network-policies (the NetworkPolicy engine of the real node): its networkpolicy package with our
# main (hack/realnode/netpol/main.go: a kubeconfig instead of the in-cluster config) and one fix to the
# package (knp_patch). Cached in $TFPS_CACHE/kube-network-policies/<version>/bin, keyed by the version and
# the content of that main and of this file's fix.
KNP_VERSION="${TFPS_KNP_VERSION:-v0.8.0}"   # sigs.k8s.io/kube-network-policies
KNP_MAIN="$HACK_DIR/realnode/netpol/main.go"
KNP_NRI_FIX='	if p == nil { // NRI disabled (tfps: a host process without NRI): no runtime-side pod index\n		return ""\n	}'

knp_key() { printf '%s %s\n' "$KNP_VERSION" "$(printf '%s\n%s' "$(<"$KNP_MAIN")" "$KNP_NRI_FIX" | sha256sum | cut -c1-16)"; }

# knp_patch SRC: with NRI off (our main) the package keeps a nil nriPlugin, and a packet from an address
# its pod index no longer has (a pod just deleted) makes it call GetPodFromIP on that nil plugin: a panic
# that stops the engine, and with it every new pod-to-pod connection of the node. The fix makes that
# lookup answer "no pod" when there is no plugin.
knp_patch() {
  local f=$1/pkg/networkpolicy/nri.go sig='^func (p \*nriPlugin) GetPodFromIP(ip string) string {$'
  grep -q "$sig" "$f" || { echo "!! kube-network-policies $KNP_VERSION: GetPodFromIP not found in $f" >&2; return 1; }
  sed -i "/$sig/a\\
$KNP_NRI_FIX" "$f"
}
knp_cached() { local f=$TFPS_CACHE/kube-network-policies/$KNP_VERSION/bin/.complete; [[ -f $f && $(<"$f") == "$(knp_key)" ]]; }

build_knp() {
  local dir="$TFPS_CACHE/kube-network-policies/$KNP_VERSION" mod src logf t0=$SECONDS
  knp_cached && return 0
  lock_build "$dir"; knp_cached && return 0
  log "building kube-network-policies $KNP_VERSION into $dir/bin"
  mkdir -p "$dir" && rm -rf "$dir"/wrapper.* && mod=$(mktemp -d "$dir/wrapper.XXXXXX"); logf="$dir/build.log"; : >"$logf"
  printf 'module tfps.local/knpbuild\n\ngo 1.26\n\nrequire sigs.k8s.io/kube-network-policies %s\n' "$KNP_VERSION" >"$mod/go.mod"
  cp "$KNP_MAIN" "$mod/main.go"
  src=$(go mod download -json "sigs.k8s.io/kube-network-policies@$KNP_VERSION" \
    | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error","no Dir")))') || return 1
  cp -r "$src" "$mod/knp" && chmod -R u+w "$mod/knp" && knp_patch "$mod/knp" || return 1
  ( cd "$mod" && go mod edit -replace "sigs.k8s.io/kube-network-policies=./knp" ) || return 1
  ( cd "$mod" && run_build "kube-network-policies (go mod tidy)" "$logf" go mod tidy ) || return 1
  ( cd "$mod" && run_build "kube-network-policies (go build)" "$logf" go build -trimpath -ldflags="-s -w" \
      -o "$mod/out/kube-network-policies" . ) || return 1
  rm -rf "${dir:?}/bin" && mv "$mod/out" "$dir/bin"
  echo "sigs.k8s.io/kube-network-policies $KNP_VERSION; main $(knp_key | cut -d' ' -f2); $(go version)" >"$dir/bin/VERSIONS"
  rm -rf "$mod"
  knp_key >"$dir/bin/.complete"
  log "  built kube-network-policies $KNP_VERSION in $((SECONDS - t0))s"
}
