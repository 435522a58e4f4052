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
for t in umoci skopeo gcc debootstrap sha256sum; do command -v $t >/dev/null || die "$t is required (apt-get install umoci skopeo gcc debootstrap)"; done

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

# in_root ROOTFS CMD...: run CMD chrooted with a clean environment (the build host's PIP_*/SSL_* settings
# name host paths) and the host's CA bundle at /src/build-ca.crt (an egress proxy may re-sign PyPI).
in_root() {
  local root=$1; shift
  mkdir -p "$root/src"; cp "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" "$root/src/build-ca.crt"
  chroot "$root" env -i PATH=/opt/tfps/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_DEFAULT_TIMEOUT=180 PIP_CERT=/src/build-ca.crt \
    ${PIP_INDEX_URL:+PIP_INDEX_URL=$PIP_INDEX_URL} "$@"
}

# trainer base: Debian + /opt/tfps venv with the trainer's pinned dependencies (slow, rarely changes).
build_trainer_base() {
  local deb k dir; deb=$(build_debian)
  k=$(key "$REPO/pyproject.toml" "$REPO/constraints.txt" <(declare -f build_trainer_base in_root) <(echo "$deb")); dir=$IMG/trainer-base-$k
  if [[ ! -f $dir/.complete ]]; then
    log "building the trainer base rootfs ($dir): venv + pinned deps on $deb"
    rm -rf "$dir"; mkdir -p "$dir"; cp -a "$deb/rootfs" "$dir/rootfs"
    mkdir -p "$dir/rootfs/src"; cp "$REPO/pyproject.toml" "$REPO/constraints.txt" "$dir/rootfs/src/"
    # Only the dependencies here (the package itself goes in build_trainer, keyed by the sources).
    python3 - "$REPO/pyproject.toml" >"$dir/rootfs/src/requirements.txt" <<'PY'
import sys, tomllib
p = tomllib.load(open(sys.argv[1], "rb"))["project"]
print("\n".join(p.get("dependencies", []) + p["optional-dependencies"]["trainer"]))
PY
    in_root "$dir/rootfs" python3 -m venv /opt/tfps
    in_root "$dir/rootfs" pip install -q -c /src/constraints.txt -r /src/requirements.txt >"$dir/pip.log" 2>&1 \
      || { tail -20 "$dir/pip.log" >&2; die "pip install of the trainer deps failed"; }
    in_root "$dir/rootfs" sh -c 'groupadd --system --gid 1000 tfps && useradd --system --uid 1000 --gid tfps --create-home --home-dir /home/tfps --shell /usr/sbin/nologin tfps'
    rm -rf "$dir/rootfs/src"
    touch "$dir/.complete"
  fi
  echo "$dir"
}

build_trainer() {
  local base k dir; base=$(build_trainer_base)
  k=$(cd "$REPO" && key <(declare -f build_trainer pack) <(echo "$base") <(git ls-files -s pyproject.toml README.md operator trainer_image) \
      <(git diff HEAD -- pyproject.toml README.md operator trainer_image) <(echo "$TRAINER_REF"))
  dir=$IMG/trainer-$k
  if [[ ! -f $dir/image.tar ]]; then
    log "building $TRAINER_REF ($dir) on $base"
    rm -rf "$dir"; mkdir -p "$dir"
    cp -a "$base/rootfs" "$dir/rootfs"
    mkdir -p "$dir/rootfs/src"
    (cd "$REPO" && tar cf - --exclude=__pycache__ pyproject.toml constraints.txt README.md operator trainer_image) | tar xf - -C "$dir/rootfs/src"
    in_root "$dir/rootfs" pip install -q --no-deps -c /src/constraints.txt /src >"$dir/pip.log" 2>&1 \
      || { tail -20 "$dir/pip.log" >&2; die "pip install of the trainer failed"; }
    in_root "$dir/rootfs" python -c 'import tfps_trainer, tensorflow' >>"$dir/pip.log" 2>&1 || die "the trainer image cannot import tfps_trainer/tensorflow"
    rm -rf "$dir/rootfs/src" && find "$dir/rootfs/opt/tfps" -name __pycache__ -prune -exec rm -rf {} +
    pack "$TRAINER_REF" "$dir/rootfs" "$dir/image.tar" \
      --config.entrypoint=python --config.entrypoint=-m --config.entrypoint=tfps_trainer \
      --config.env=PATH=/opt/tfps/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --config.env=PYTHONDONTWRITEBYTECODE=1 --config.env=PYTHONUNBUFFERED=1 --config.env=HOME=/tmp \
      --config.env=KERAS_HOME=/tmp/.keras --config.env=TF_CPP_MIN_LOG_LEVEL=1 \
      --config.user=1000:1000 --config.workingdir=/home/tfps
    rm -rf "$dir/rootfs"
  fi
  echo "$dir/image.tar"
}

mkdir -p "$IMG"
case "${1:-all}" in
  pause) build_pause ;;
  busybox) build_busybox ;;
  debian) build_debian ;;
  trainer-base) build_trainer_base ;;
  trainer) build_trainer ;;
  all) build_pause; build_busybox; build_trainer ;;
  *) die "usage: $0 pause|busybox|trainer-base|trainer|all" ;;
esac
