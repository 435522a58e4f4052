# shellcheck shell=bash
# require_network TOOL FIX: succeed unless this runs inside hack/netns-run, whose only interface is
# loopback (no package mirror, no Go module proxy). There it prints why TOOL cannot be installed and the
# command FIX that installs it beforehand, and fails. Every step that downloads calls this first, so a
# test that finds its tool missing fails with this reason rather than a resolver or apt error.
require_network() {
  local tool=$1 fix=$2
  [[ ${TFPS_IN_NETNS:-} == 1 ]] || return 0
  echo "$tool is not installed, and this runs inside hack/netns-run (loopback only: no package mirror," \
       "no module proxy): run \`$fix\` before entering the namespace" >&2
  return 1
}
