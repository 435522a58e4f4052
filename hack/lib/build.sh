# shellcheck shell=bash
# Build the control-plane binaries from the Go module proxy, once per version, into $TFPS_CACHE.
# Sourced by hack/cluster; expects log/die helpers and versions.sh.

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
# shellcheck source-path=SCRIPTDIR
BUILD_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$BUILD_LIB/offline.sh"
# The command that builds these ahead of a tier's namespace (named when a build is refused there).
BUILD_FIX=${BUILD_FIX:-hack/tools cluster}

# go_mod_file MODULE@VERSION -> path of that module's go.mod in the module cache
go_mod_file() {
  go mod download -json "$1" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("GoMod") or sys.exit(d.get("Error","no GoMod")))'
}

# staging_replaces GOMOD MINOR -> "k8s.io/x => k8s.io/x v0.MINOR" for each "k8s.io/x => ./staging/..." line
staging_replaces() {
  awk -v v="$2" '$1 ~ /^k8s\.io\// && $2 == "=>" && $3 ~ /^\.\/staging\// { print $1 " => " $1 " " v }' "$1"
}

# required_version GOMOD MODULE -> version that GOMOD requires
required_version() {
  awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$1"
}

# lock_build DIR: hold an exclusive lock on DIR/.lock until this process exits, so that two `hack/cluster`
# runs on one machine never build the same version at once (each would delete the other's wrapper module).
# Callers check DIR's .complete marker again once they hold it: the process they waited for may have built it.
lock_build() {
  local dir=$1 fd
  mkdir -p "$dir"
  exec {fd}>"$dir/.lock"
  if ! flock -n "$fd"; then
    log "  another process is building $dir; waiting for it"
    flock "$fd"
  fi
}

# run_build COMPONENT LOGFILE CMD... : run a build step, on failure name the component and show the log tail.
run_build() {
  local comp=$1 logf=$2; shift 2
  if ! "$@" >>"$logf" 2>&1; then
    echo "!! build of $comp failed: $*" >&2
    echo "---- last 40 lines of $logf ----" >&2
    tail -n 40 "$logf" >&2
    return 1
  fi
}

# k8s_wrapper MOD: the Kubernetes-only wrapper module in MOD: it requires k8s.io/kubernetes and the etcd server
# Kubernetes pins, replaces each staging module (k8s.io/x => ./staging/...) by its v0.MINOR release, holds
# cmd/etcd and a tools.go naming the Kubernetes commands, and is tidied. Prints the etcd version.
k8s_wrapper() {
  local mod=$1 logf=$2 kgomod minor etcdv
  kgomod=$(go_mod_file "k8s.io/kubernetes@$K8S_VERSION") || { echo "!! cannot fetch k8s.io/kubernetes@$K8S_VERSION" >&2; return 1; }
  minor=${K8S_VERSION#v1.}; minor="v0.$minor"
  etcdv=$(required_version "$kgomod" go.etcd.io/etcd/server/v3)
  [[ -n $etcdv ]] || { echo "!! k8s.io/kubernetes go.mod does not name go.etcd.io/etcd/server/v3" >&2; return 1; }
  {
    echo "module tfps.local/k8sbuild"
    echo; echo "go 1.26"
    echo; echo "require ("
    echo "	k8s.io/kubernetes $K8S_VERSION"
    echo "	go.etcd.io/etcd/server/v3 $etcdv"
    echo ")"
    echo; echo "replace ("
    staging_replaces "$kgomod" "$minor" | sed 's/^/	/'
    echo ")"
  } >"$mod/go.mod"
  mkdir -p "$mod/cmd/etcd"
  cat >"$mod/cmd/etcd/main.go" <<'GO'
// etcd, built from go.etcd.io/etcd/server/v3 at the version k8s.io/kubernetes pins.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  cat >"$mod/tools.go" <<'GO'
//go:build tools

// Keeps the command packages in go.mod for `go mod tidy`; never compiled.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  ( cd "$mod" && run_build "k8s (go mod tidy)" "$logf" go mod tidy ) || return 1
  echo "$etcdv"
}

# module_pins MOD: MODULE=MODULE@VERSION for every module MOD's build resolves (a replaced one at its
# replacement), one a line: what `go mod edit -replace` takes.
module_pins() {
  ( cd "$1" && go list -m -f '{{if not .Main}}{{.Path}}={{with .Replace}}{{.Path}}@{{.Version}}{{else}}{{.Path}}@{{.Version}}{{end}}{{end}}' all )
}

# k8s_pins: the path of $TFPS_CACHE/k8s/$K8S_VERSION/pins, every module the Kubernetes build resolves
# (module_pins), written by build_k8s or, for a cache built without it, from a wrapper module of its own.
k8s_pins() {
  local dir="$TFPS_CACHE/k8s/$K8S_VERSION" mod
  if [[ ! -s $dir/pins ]]; then
    mod=$(mktemp -d "$dir/pins.XXXXXX") || return 1
    k8s_wrapper "$mod" "$dir/pins.log" >/dev/null && module_pins "$mod" >"$mod/pins" && mv "$mod/pins" "$dir/pins" || { rm -rf "$mod"; return 1; }
    rm -rf "$mod"
  fi
  echo "$dir/pins"
}

# build_k8s: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and etcd (the version
# k8s.io/kubernetes itself pins), helm and kwok (patched: hack/lib/kwok-uid-delete.patch) in ONE module and
# ONE go build, so that the packages they share (client-go, apimachinery, apiserver, cli-runtime, kubectl's)
# compile once (11,327 Go files; built apart, the three compiled 19,367, helm and kwok each their own copy of
# the client libraries). Every module Kubernetes uses stays at the version Kubernetes pins (a replace per
# module, kept in k8s/<version>/pins): the control plane is built as released, and helm and kwok build against
# those versions (both already use k8s.io v0.36-v0.37). Kueue builds with the same pins afterwards
# (build_all), so the go build cache gives it these packages compiled. Each binary goes to its own cache
# directory (k8s/, helm/, kwok/), keyed by its own version.
build_k8s() {
  local dir="$TFPS_CACHE/k8s/$K8S_VERSION" helm_dir="$TFPS_CACHE/helm/$HELM_VERSION" kwok_dir="$TFPS_CACHE/kwok/$KWOK_BUILD" mod
  k8s_helm_kwok_built() { [[ -f $dir/bin/.complete && -f $helm_dir/bin/.complete && -f $kwok_dir/bin/.complete ]]; }
  k8s_helm_kwok_built && return 0
  require_network "Kubernetes $K8S_VERSION, helm and kwok (built from the Go module proxy)" "$BUILD_FIX" || return 1
  lock_build "$dir"; k8s_helm_kwok_built && return 0
  log "building Kubernetes $K8S_VERSION + etcd, helm $HELM_VERSION and kwok $KWOK_BUILD (once per version; this takes a while)"
  mkdir -p "$dir" && rm -rf "$dir"/wrapper.* && mod=$(mktemp -d "$dir/wrapper.XXXXXX")
  local logf="$dir/build.log" etcdv kwok_src t0=$SECONDS
  : >"$logf"
  etcdv=$(k8s_wrapper "$mod" "$logf") || return 1
  log "  wrapper module $mod: $(grep -c '=> k8s.io/' "$mod/go.mod") staging replaces read from k8s.io/kubernetes go.mod; etcd $etcdv"
  # Pin every module Kubernetes resolved to, then add helm and the patched kwok (a copy in the wrapper).
  kwok_src=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error","no Dir")))') \
    || { echo "!! cannot fetch sigs.k8s.io/kwok@$KWOK_VERSION from the module proxy" >&2; return 1; }
  cp -r "$kwok_src" "$mod/kwok" && chmod -R u+w "$mod/kwok"
  ( cd "$mod/kwok" && run_build "kwok (patch kwok-uid-delete.patch)" "$logf" patch -p1 -i "$BUILD_LIB/kwok-uid-delete.patch" ) || return 1
  module_pins "$mod" >"$mod/pins" || return 1
  ( cd "$mod" && xargs -a pins -I{} go mod edit -replace={} && go mod edit -replace=sigs.k8s.io/kwok=./kwok \
      -require="helm.sh/helm/v4@$HELM_VERSION" -require="sigs.k8s.io/kwok@$KWOK_VERSION" ) || return 1
  printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "helm.sh/helm/v4/cmd/helm"\n\t_ "sigs.k8s.io/kwok/cmd/kwok"\n)\n' >"$mod/tools_more.go"
  log "  $(wc -l <"$mod/pins") modules pinned to Kubernetes' versions; helm $HELM_VERSION and kwok $KWOK_BUILD added"
  # -e: a test of a dependency (never built here) may import a package the pinned versions lack
  ( cd "$mod" && run_build "helm and kwok (go mod tidy)" "$logf" go mod tidy -e ) || return 1
  local vpkg ld maj=1 min=${K8S_VERSION#v1.}; min=${min%%.*}
  ld="-s -w"
  for vpkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $vpkg.gitVersion=$K8S_VERSION -X $vpkg.gitMajor=$maj -X $vpkg.gitMinor=$min -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=1970-01-01T00:00:00Z"
  done
  ld+=" -X go.etcd.io/etcd/api/v3/version.GitSHA=tfps"
  ld+=" -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION"
  log "  go build kube-apiserver kube-controller-manager kube-scheduler kubectl etcd helm kwok (log: $logf)"
  ( cd "$mod" && run_build "k8s, helm and kwok (go build)" "$logf" go build -trimpath -ldflags="$ld" -o "$mod/out/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl ./cmd/etcd \
      helm.sh/helm/v4/cmd/helm sigs.k8s.io/kwok/cmd/kwok ) || return 1
  local go_version; go_version=$(go version)
  place_bins "$helm_dir" "helm.sh/helm/v4 $HELM_VERSION (with Kubernetes $K8S_VERSION's pins); $go_version" "$mod/out/helm" || return 1
  place_bins "$kwok_dir" "sigs.k8s.io/kwok $KWOK_BUILD (with Kubernetes $K8S_VERSION's pins); $go_version" "$mod/out/kwok" || return 1
  mv "$mod/pins" "$dir/pins" || return 1
  place_bins "$dir" "k8s.io/kubernetes $K8S_VERSION; go.etcd.io/etcd/server/v3 $etcdv; $go_version" "$mod"/out/* || return 1
  rm -rf "$mod"
  log "  built Kubernetes $K8S_VERSION + etcd $etcdv, helm $HELM_VERSION and kwok $KWOK_BUILD in $((SECONDS - t0))s"
}

# place_bins DIR VERSIONS BINARY...: DIR/bin holds exactly these binaries, VERSIONS and a .complete marker.
place_bins() {
  local dir=$1 versions=$2; shift 2
  rm -rf "${dir:?}/bin.new" && mkdir -p "$dir/bin.new" && mv "$@" "$dir/bin.new/" || return 1
  echo "$versions" >"$dir/bin.new/VERSIONS"
  touch "$dir/bin.new/.complete"
  rm -rf "${dir:?}/bin" && mv "$dir/bin.new" "$dir/bin"
}

# build_simple COMPONENT MODULE VERSION PKG LDFLAGS: one Go command from its own module, own pins.
build_simple() {
  local comp=$1 module=$2 ver=$3 pkg=$4 extra_ld=$5
  local dir="$TFPS_CACHE/$comp/$ver" mod logf t0=$SECONDS
  [[ -f $dir/bin/.complete ]] && return 0
  require_network "$comp $ver (built from the Go module proxy)" "$BUILD_FIX" || return 1
  lock_build "$dir"; [[ -f $dir/bin/.complete ]] && return 0
  log "building $comp $ver ($pkg) into $dir/bin"
  mkdir -p "$dir" && rm -rf "$dir"/wrapper.* && mod=$(mktemp -d "$dir/wrapper.XXXXXX"); logf="$dir/build.log"; : >"$logf"
  printf 'module tfps.local/%sbuild\n\ngo 1.26\n\nrequire %s %s\n' "$comp" "$module" "$ver" >"$mod/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$pkg" >"$mod/tools.go"
  ( cd "$mod" && run_build "$comp (go mod tidy)" "$logf" go mod tidy ) || return 1
  ( cd "$mod" && run_build "$comp (go build)" "$logf" go build -trimpath -ldflags="-s -w $extra_ld" -o "$mod/out/" "$pkg" ) || return 1
  rm -rf "${dir:?}/bin" && mv "$mod/out" "$dir/bin"
  echo "$module $ver; $(go version)" >"$dir/bin/VERSIONS"
  rm -rf "$mod"
  touch "$dir/bin/.complete"
  log "  built $comp $ver in $((SECONDS - t0))s"
}

# build_module_main COMPONENT MODULE VERSION KEY PATCH LDFLAGS REPLACES KEEP PKG... : Go commands built INSIDE
# their own module (a copy of its source from the module cache), so its go.mod replace directives and go.sum
# apply as upstream builds it. For modules whose go.mod pins k8s.io staging repos by replace
# (scheduler-plugins) or whose commands are not `go install`-able from outside (kueue).
# KEY: the cache directory's name under COMPONENT/ (VERSION, or VERSION with what the build changes).
# PATCH: a file `patch -p1` applies to the copy first, or "".
# REPLACES: whitespace-separated MODULE=MODULE@VERSION added to that go.mod (a pin the proxy does not serve;
# the Kubernetes build's pins).
# KEEP: space-separated SRC=DEST: directories of that module's source (CRDs, RBAC, webhook manifests of that
# very version) kept under the cache directory next to bin/.
build_module_main() {
  local comp=$1 module=$2 ver=$3 key=$4 patchf=$5 extra_ld=$6 replaces=$7 keep=$8 r k; shift 8
  local dir="$TFPS_CACHE/$comp/$key" src mod logf t0=$SECONDS edits=()
  [[ -f $dir/bin/.complete ]] && return 0
  require_network "$comp $key (built from the Go module proxy)" "$BUILD_FIX" || return 1
  lock_build "$dir"; [[ -f $dir/bin/.complete ]] && return 0
  log "building $comp $key ($*) into $dir/bin (once per version)"
  mkdir -p "$dir" && rm -rf "$dir"/wrapper.* && mod=$(mktemp -d "$dir/wrapper.XXXXXX"); logf="$dir/build.log"; : >"$logf"
  src=$(go mod download -json "$module@$ver" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error","no Dir")))') \
    || { echo "!! cannot fetch $module@$ver from the module proxy" >&2; return 1; }
  cp -r "$src/." "$mod/" && chmod -R u+w "$mod"
  if [[ -n $patchf ]]; then
    ( cd "$mod" && run_build "$comp (patch $(basename "$patchf"))" "$logf" patch -p1 -i "$patchf" ) || return 1
  fi
  for r in $replaces; do edits+=("-replace=$r"); done
  if (( ${#edits[@]} )); then ( cd "$mod" && go mod edit "${edits[@]}" ) || return 1; fi
  ( cd "$mod" && run_build "$comp (go build)" "$logf" go build -mod=mod -trimpath -ldflags="-s -w $extra_ld" -o "$mod/out/" "$@" ) || return 1
  rm -rf "${dir:?}/bin" && mv "$mod/out" "$dir/bin"
  for k in $keep; do
    [[ -d $mod/${k%%=*} ]] || { echo "!! $module@$ver has no ${k%%=*}/" >&2; return 1; }
    rm -rf "${dir:?}/${k#*=}" && mkdir -p "$(dirname "$dir/${k#*=}")" && mv "$mod/${k%%=*}" "$dir/${k#*=}"
  done
  echo "$module $key; $(go version)" >"$dir/bin/VERSIONS"
  rm -rf "$mod"
  touch "$dir/bin/.complete"
  log "  built $comp $key in $((SECONDS - t0))s"
}

# kwok_stages: kwok's own default Stage objects (what `kwokctl` loads: node-initialize,
# node-heartbeat-with-lease, pod-ready, pod-complete, pod-delete), copied from the kwok module.
kwok_stages() {
  local out="$TFPS_CACHE/kwok/$KWOK_BUILD/stages.yaml" src f
  [[ -s $out ]] && return 0
  require_network "kwok $KWOK_VERSION's stages (from the Go module proxy)" "$BUILD_FIX" || return 1
  src=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])') || return 1
  : >"$out.tmp"
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    [[ -f $src/kustomize/stage/$f ]] || { echo "!! kwok $KWOK_VERSION has no kustomize/stage/$f" >&2; return 1; }
    { echo "---"; cat "$src/kustomize/stage/$f"; } >>"$out.tmp"
  done
  mv "$out.tmp" "$out"
}

# kueue_manifests_json: Kueue's CRDs and webhook configurations as JSON (kubectl reads the YAML once per
# version), for hack/lib/kueue_manifests.py to point at 127.0.0.1 at every `up` without a YAML parser.
kueue_manifests_json() {
  local m="$TFPS_CACHE/kueue/$KUEUE_BUILD/manifests" kubectl="$TFPS_CACHE/k8s/$K8S_VERSION/bin/kubectl" f
  for f in crds webhooks; do
    [[ -s $m/$f.json ]] && continue
    local src=$m/crd/bases; [[ $f == webhooks ]] && src=$m/webhook/manifests.yaml
    "$kubectl" label --local -o json -f "$src" app.kubernetes.io/part-of=tfps-hack-cluster >"$m/$f.json.tmp" \
      && mv "$m/$f.json.tmp" "$m/$f.json" || return 1
  done
}

build_all() {
  command -v go >/dev/null || die "go is not installed (need a Go toolchain >= 1.26 to build the control plane)"
  build_k8s || die "build of Kubernetes $K8S_VERSION, helm $HELM_VERSION and kwok $KWOK_BUILD failed (see above)"
  kwok_stages || die "could not assemble kwok's default stages for $KWOK_VERSION"
  # The gang scheduler: scheduler-plugins' kube-scheduler with the Coscheduling plugin, and its
  # controller (PodGroup status: phase, scheduled/running counts).
  build_module_main scheduler-plugins sigs.k8s.io/scheduler-plugins "$SCHED_PLUGINS_VERSION" "$SCHED_PLUGINS_VERSION" "" \
    "-X k8s.io/component-base/version.gitVersion=$SCHED_PLUGINS_K8S_VERSION" "$SCHED_PLUGINS_REPLACES" \
    "manifests=manifests" ./cmd/scheduler ./cmd/controller \
    || die "build of scheduler-plugins $SCHED_PLUGINS_VERSION failed (see above)"
  # Kueue's controller manager, with the CRDs, RBAC and webhook manifests of the same version, built on
  # Kubernetes' own pins (hack/README.md, "Builds") so that it compiles only what the build above did not.
  local pins
  pins=$(k8s_pins) || die "could not list the modules Kubernetes $K8S_VERSION resolves (for Kueue's build)"
  build_module_main kueue sigs.k8s.io/kueue "$KUEUE_VERSION" "$KUEUE_BUILD" "$BUILD_LIB/kueue-without-trainjob.patch" \
    "-X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" \
    "$(cat "$pins") sigs.k8s.io/controller-runtime=sigs.k8s.io/controller-runtime@$KUEUE_CONTROLLER_RUNTIME" \
    "config/components/crd=manifests/crd config/components/rbac=manifests/rbac config/components/webhook=manifests/webhook" \
    ./cmd/kueue \
    || die "build of kueue $KUEUE_BUILD failed (see above)"
  kueue_manifests_json || die "could not convert Kueue $KUEUE_VERSION's manifests to JSON"
}
