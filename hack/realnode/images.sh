#!/usr/bin/env bash
# hack/realnode/images.sh pause|busybox|trainer|all — build the real node's images WITHOUT Docker and
# cache them as docker-archive tars under $TFPS_CACHE/images/<name>-<key>/image.tar:
#   tfps.local/pause:1        static C pause (hack/realnode/pause.c), containerd's sandbox_image
#   tfps.local/busybox:1      Debian's busybox-static (smoke-test pods)
#   tfps-trainer:0.1.0        debootstrap bookworm minbase + python3.11 + venv /opt/tfps with
#                             `pip install -c constraints.txt '.[trainer]'` — what trainer_image/Dockerfile does
# Layers are packed with umoci (OCI layout), converted with skopeo (oci: -> docker-archive: keeps the name).
# Prints the tar path of each image it builds or finds cached. Keys: sha256 of every input.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
TFPS_CACHE="${TFPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfps}"
IMG=$TFPS_CACHE/images
DEBIAN_MIRROR=${TFPS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
TRAINER_REF=${TFPS_TRAINER_IMAGE:-tfps-trainer:0.1.0}
log() { printf '>> %s\n' "$*" >&2; }
die() { printf '!! %s\n' "$*" >&2; exit 1; }
# The build tools are Debian packages: `hack/realnode/node deps` installs the missing ones (as root). `cached`
# only computes keys and needs none of them.
if [[ ${1:-all} != cached ]]; then
  for t in umoci skopeo gcc debootstrap; do
    command -v $t >/dev/null || { "$HERE/node" deps >&2 || die "$t is required (hack/realnode/node deps installs it)"; break; }
  done
fi

key() { cat "$@" | sha256sum | cut -c1-16; }

# pack REF ROOTFS_DIR OUT_TAR [umoci config args...]: one-layer image from a directory.
pack() {
  local ref=$1 rootfs=$2 out=$3; shift 3
  local lay; lay=$(mktemp -d "$IMG/oci.XXXXXX")
  umoci init --layout "$lay/oci"
  umoci new --image "$lay/oci:img"
  umoci insert --image "$lay/oci:img" "$rootfs" /
  umoci config --image "$lay/oci:img" --no-history --created=1970-01-01T00:00:00Z "$@"
  rm -f "$out.tmp"
  skopeo copy --quiet "oci:$lay/oci:img" "docker-archive:$out.tmp:$ref" >&2
  mv "$out.tmp" "$out"; rm -rf "$lay"
}

build_pause() {
  local k dir; k=$(key "$HERE/pause.c" <(declare -f build_pause pack)); dir=$IMG/pause-$k
  if [[ ! -f $dir/image.tar ]]; then
    log "building tfps.local/pause:1 ($dir)"
    mkdir -p "$dir/rootfs"; gcc -static -Os -s -o "$dir/rootfs/pause" "$HERE/pause.c"
    pack tfps.local/pause:1 "$dir/rootfs" "$dir/image.tar" --config.entrypoint=/pause --config.user=65535:65535
    rm -rf "$dir/rootfs"
  fi
  echo "$dir/image.tar"
}

build_busybox() {
  local dir=$IMG/busybox-deb12 deb
  if [[ ! -f $dir/image.tar ]]; then
    log "building tfps.local/busybox:1 from Debian's busybox-static ($dir)"
    mkdir -p "$dir/rootfs/bin" "$dir/deb"
    (cd "$dir/deb" && apt-get download busybox-static >&2) && deb=$(ls "$dir"/deb/busybox-static_*.deb | head -1)
    dpkg-deb -x "$deb" "$dir/x" && cp "$dir/x/bin/busybox" "$dir/rootfs/bin/busybox"
    for a in sh sleep cat ls nslookup wget echo id hostname ip env; do ln -sf busybox "$dir/rootfs/bin/$a"; done
    mkdir -p "$dir/rootfs/tmp" "$dir/rootfs/etc"
    pack tfps.local/busybox:1 "$dir/rootfs" "$dir/image.tar" --config.cmd=/bin/sh --config.env=PATH=/bin
    rm -rf "$dir/rootfs" "$dir/x" "$dir/deb"
  fi
  echo "$dir/image.tar"
}

# Debian bookworm minbase with python3.11 (what python:3.11-slim-bookworm is, from Debian's own packages).
build_debian() {
  local k dir; k=$(key <(declare -f build_debian) <(echo "$DEBIAN_MIRROR")); dir=$IMG/debian-bookworm-py-$k
  if [[ ! -f $dir/.complete ]]; then
    log "debootstrap bookworm minbase + python3 ($dir)"
    rm -rf "$dir"; mkdir -p "$dir"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$dir/rootfs" "$DEBIAN_MIRROR" >"$dir/debootstrap.log" 2>&1 \
      || { tail -20 "$dir/debootstrap.log" >&2; die "debootstrap failed"; }
    rm -rf "$dir/rootfs/var/cache/apt/archives"/*.deb "$dir/rootfs/var/lib/apt/lists"/*
    touch "$dir/.complete"
  fi
  echo "$dir"
}

# Where each image is cached for the current inputs (the same keys the build functions compute): what
# `images.sh cached` checks without building anything.
pause_dir() { echo "$IMG/pause-$(key "$HERE/pause.c" <(declare -f build_pause pack))"; }
busybox_dir() { echo "$IMG/busybox-deb12"; }
debian_dir() { echo "$IMG/debian-bookworm-py-$(key <(declare -f build_debian) <(echo "$DEBIAN_MIRROR"))"; }
trainer_base_dir() {
  echo "$IMG/trainer-base-$(key <(trainer_requirements) "$REPO/constraints.txt" \
    <(declare -f build_trainer_base trainer_requirements in_root pack_layout) <(debian_dir))"
}
# trainer_dir SRC: SRC holds the staged sources (trainer_sources)
trainer_dir() {
  echo "$IMG/trainer-$(key <(declare -f build_trainer trainer_sources install_sources) <(trainer_base_dir) <(echo "$TRAINER_REF") \
        <(cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum))"
}

# in_root ROOTFS CMD...: run CMD chrooted with a clean environment (the build host's PIP_*/SSL_* settings
# name host paths) and the host's CA bundle at /src/build-ca.crt (an egress proxy may re-sign PyPI).
in_root() {
  local root=$1; shift
  mkdir -p "$root/src"; cp "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" "$root/src/build-ca.crt"
  chroot "$root" env -i PATH=/opt/tfps/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_DEFAULT_TIMEOUT=180 PIP_CERT=/src/build-ca.crt \
    ${PIP_INDEX_URL:+PIP_INDEX_URL=$PIP_INDEX_URL} "$@"
}

# trainer base: Debian + /opt/tfps venv with the trainer's pinned dependencies + user tfps (slow, rarely
# changes), kept twice: rootfs/ (the lower layer the sources are installed over) and oci/ (an OCI layout
# whose image `img` is that rootfs as ONE gzip layer, packed once per base key).
build_trainer_base() {
  local deb dir; deb=$(build_debian); dir=$(trainer_base_dir)
  if [[ ! -f $dir/.complete ]]; then
    log "building the trainer base ($dir): venv + pinned deps on $deb"
    rm -rf "$dir"; mkdir -p "$dir"; cp -a "$deb/rootfs" "$dir/rootfs"
    mkdir -p "$dir/rootfs/src"; cp "$REPO/constraints.txt" "$dir/rootfs/src/"
    # Only the dependencies here (the package itself goes in build_trainer, keyed by the sources).
    trainer_requirements >"$dir/rootfs/src/requirements.txt"
    in_root "$dir/rootfs" python3 -m venv /opt/tfps
    in_root "$dir/rootfs" pip install -q -c /src/constraints.txt -r /src/requirements.txt >"$dir/pip.log" 2>&1 \
      || { tail -20 "$dir/pip.log" >&2; die "pip install of the trainer deps failed"; }
    in_root "$dir/rootfs" sh -c 'groupadd --system --gid 1000 tfps && useradd --system --uid 1000 --gid tfps --create-home --home-dir /home/tfps --shell /usr/sbin/nologin tfps'
    rm -rf "$dir/rootfs/src" "$dir/rootfs/root/.cache"
    log "packing the trainer base layer ($(du -sh "$dir/rootfs" | cut -f1)) into $dir/oci (once per base key)"
    pack_layout "$dir/rootfs" "$dir/oci"
    touch "$dir/.complete"
  fi
  echo "$dir"
}

# trainer_requirements: the trainer's dependencies (the project's + the `trainer` extra) from pyproject.toml,
# one per line. The base is keyed by these and constraints.txt, not by the rest of pyproject.toml.
trainer_requirements() {
  python3 - "$REPO/pyproject.toml" <<'PY'
import sys, tomllib
p = tomllib.load(open(sys.argv[1], "rb"))["project"]
print("\n".join(p.get("dependencies", []) + p["optional-dependencies"]["trainer"]))
PY
}

# pack_layout ROOTFS LAYOUT: an OCI layout whose image `img` has ROOTFS as its only layer (no config yet).
pack_layout() {
  rm -rf "$2"
  umoci init --layout "$2" && umoci new --image "$2:img" && umoci insert --image "$2:img" "$1" /
}

# trainer_sources DIR: the files `pip install .` reads (tracked + untracked-but-not-ignored, as they are in
# the working tree), copied to DIR. The trainer image's key is the hash of exactly these.
trainer_sources() {
  (cd "$REPO" && git ls-files -co --exclude-standard -z -- pyproject.toml README.md operator trainer_image wire \
     | xargs -0 -r sh -c 'for f; do [ -f "$f" ] && printf "%s\0" "$f"; done' sh \
     | tar --null -T - -cf -) | tar -xf - -C "$1"
}

# The trainer image = the cached base layer + ONE small layer with the project's package: the wheel of the
# sources (built on the host, pure Python) installed with `pip install --no-deps` into the base's venv on an
# overlay mount, whose upper directory (only what pip added) becomes the second layer. A source change costs
# a wheel build, a pip install and a layer of a few hundred KB, not a re-pack of the 2.5 GB base.
build_trainer() {
  local base dir src; base=$(build_trainer_base)
  src=$(mktemp -d "$IMG/src.XXXXXX"); trainer_sources "$src"
  dir=$(trainer_dir "$src")
  if [[ ! -f $dir/image.tar ]]; then
    log "building $TRAINER_REF ($dir): sources layer on $base"
    rm -rf "$dir"; mkdir -p "$dir"
    install_sources "$base/rootfs" "$src" "$dir" || { rm -rf "$src"; die "installing the trainer sources failed (see $dir/pip.log)"; }
    local lay="$dir/oci"; mkdir -p "$lay"
    # the base layout's blobs are content-addressed and never rewritten: hard links, not a 1 GB copy
    cp -al "$base/oci/blobs" "$lay/blobs" && cp "$base/oci/index.json" "$base/oci/oci-layout" "$lay/"
    umoci insert --image "$lay:img" "$dir/upper" /
    umoci config --image "$lay:img" --no-history --created=1970-01-01T00:00:00Z \
      --config.entrypoint=python --config.entrypoint=-m --config.entrypoint=tfps_trainer \
      --config.env=PATH=/opt/tfps/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --config.env=PYTHONDONTWRITEBYTECODE=1 --config.env=PYTHONUNBUFFERED=1 --config.env=HOME=/tmp \
      --config.env=KERAS_HOME=/tmp/.keras --config.env=TF_CPP_MIN_LOG_LEVEL=1 \
      --config.user=1000:1000 --config.workingdir=/home/tfps
    rm -f "$dir/image.tar.tmp"
    skopeo copy --quiet "oci:$lay:img" "docker-archive:$dir/image.tar.tmp:$TRAINER_REF" >&2
    mv "$dir/image.tar.tmp" "$dir/image.tar"
    rm -rf "$lay" "$dir/upper" "$dir/work"
    prune trainer- 3 "$dir"; prune trainer-base- 2 "$base"
  fi
  rm -rf "$src"
  echo "$dir/image.tar"
}

# cached NAME...: which images are built for the current inputs (builds nothing); exit 1 if any is not.
cached() {
  local n p src rc=0
  for n in "$@"; do
    case $n in
      pause) p=$(pause_dir)/image.tar ;;
      busybox) p=$(busybox_dir)/image.tar ;;
      debian) p=$(debian_dir)/.complete ;;
      trainer-base) p=$(trainer_base_dir)/.complete ;;
      trainer) src=$(mktemp -d "$IMG/src.XXXXXX"); trainer_sources "$src"; p=$(trainer_dir "$src")/image.tar; rm -rf "$src" ;;
      *) die "cached: unknown image $n" ;;
    esac
    if [[ -f $p ]]; then printf 'cached   %-13s %s\n' "$n" "${p%/*}"; else printf 'missing  %-13s %s\n' "$n" "${p%/*}"; rc=1; fi
  done
  return $rc
}

# install_sources BASE_ROOTFS SRC DIR: build the wheel of SRC on the host, `pip install --no-deps` it into an
# overlay of BASE_ROOTFS; DIR/upper is then exactly what the install added (fails on deletions/whiteouts).
install_sources() {
  local lower=$1 src=$2 dir=$3 m=$3/merged whl
  mkdir -p "$dir"/{upper,work,merged,wheel}
  python3 -m pip wheel -q --no-deps -w "$dir/wheel" "$src" >"$dir/pip.log" 2>&1 || { tail -20 "$dir/pip.log" >&2; return 1; }
  whl=$(cd "$dir/wheel" && ls ./*.whl) && whl=${whl#./}
  mount -t overlay overlay -o "lowerdir=$lower,upperdir=$dir/upper,workdir=$dir/work" "$m" || return 1
  local rc=0
  mkdir -p "$m/src" && cp "$dir/wheel/$whl" "$m/src/"
  in_root "$m" pip install -q --no-deps "/src/$whl" >>"$dir/pip.log" 2>&1 || rc=1
  (( rc )) || in_root "$m" PYTHONDONTWRITEBYTECODE=1 python -c 'import tfps_trainer, tfps_operator, tensorflow' >>"$dir/pip.log" 2>&1 \
    || { rc=1; echo "!! the trainer image cannot import tfps_trainer/tfps_operator/tensorflow" >>"$dir/pip.log"; }
  rm -rf "$m/src" "$m/root/.cache" && find "$m/tmp" -mindepth 1 -delete
  umount "$m" || rc=1
  rm -rf "$dir/wheel" "$dir/merged"
  (( rc == 0 )) || { tail -20 "$dir/pip.log" >&2; return 1; }
  # A deletion from the base would be an overlay whiteout (char device 0/0) or an opaque directory, which
  # umoci would copy as such: refuse. overlayfs' own xattrs (trusted.overlay.*: uuid, origin, impure) must not
  # reach the layer either (containerd's snapshots are overlay lower dirs themselves): strip them.
  if [[ -n $(find "$dir/upper" -type c -print -quit) ]]; then
    echo "!! installing the sources deleted files of the base: $(find "$dir/upper" -type c | head -5)" >&2; return 1
  fi
  python3 - "$dir/upper" <<'PY' || return 1
import os, sys
opaque = []
for root, dirs, files in os.walk(sys.argv[1]):
    for p in [root, *(os.path.join(root, n) for n in dirs + files)]:
        for a in os.listxattr(p, follow_symlinks=False):
            if a.startswith("trusted.overlay."):
                if a == "trusted.overlay.opaque":
                    opaque.append(p)
                os.removexattr(p, a, follow_symlinks=False)
if opaque:
    sys.exit(f"!! installing the sources replaced directories of the base (opaque): {opaque[:5]}")
PY
  log "  sources layer: $(du -sh "$dir/upper" | cut -f1) ($(find "$dir/upper" -type f | wc -l) files)"
}

# prune PREFIX N KEEP: delete all but the N newest $IMG/PREFIX<16 hex digits> image directories (never KEEP;
# never another prefix: trainer-base-* does not match trainer-).
prune() {
  local d n=0
  while read -r d; do
    [[ $d =~ /$1[0-9a-f]{16}$ ]] || continue
    [[ $d == "$3" ]] && continue
    (( ++n < $2 )) && continue
    log "pruning old image cache $d"; rm -rf "$d"
  done < <(ls -1dt "$IMG/$1"* 2>/dev/null)
}

mkdir -p "$IMG"
case "${1:-all}" in
  pause) build_pause ;;
  busybox) build_busybox ;;
  debian) build_debian ;;
  trainer-base) build_trainer_base ;;
  trainer) build_trainer ;;
  all) build_pause; build_busybox; build_trainer ;;
  cached) shift; (( $# )) || set -- pause busybox trainer-base trainer; cached "$@" ;;
  *) die "usage: $0 pause|busybox|debian|trainer-base|trainer|all | cached [NAME...]" ;;
esac
