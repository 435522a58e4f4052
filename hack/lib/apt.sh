# shellcheck shell=bash
# apt_install FIX PACKAGE...: install Debian packages (as root) for the project's scripts. FIX names the
# command that installs them ahead of time (see require_network). One install at a time on the machine
# (apt's own lock would fail a second caller at once). On a fresh machine the package lists are absent or
# stale: a failed install runs `apt-get update` once and retries.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/offline.sh"

apt_install() {
  local fix=$1; shift
  require_network "Debian package(s) $*" "$fix" || return 1
  (( EUID == 0 )) || { echo "Debian package(s) $* missing: run \`$fix\` as root (apt-get install)" >&2; return 1; }
  command -v apt-get >/dev/null || { echo "Debian package(s) $* missing and apt-get is not available" >&2; return 1; }
  local fd rc=0
  exec {fd}>/tmp/tfps-apt.lock
  flock "$fd"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "$@" >&2 \
    || { apt-get update >&2 && apt-get install -y --no-install-recommends "$@" >&2; } \
    || { echo "apt-get install $* failed (output above)" >&2; rc=1; }
  exec {fd}>&-
  return $rc
}
