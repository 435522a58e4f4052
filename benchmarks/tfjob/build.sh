#!/usr/bin/env bash
# Build Kubeflow training-operator v1 (cmd/training-operator.v1) from the Go module proxy, once per
# version, into $TFPS_CACHE/training-operator/<version>/bin/training-operator.
#
# The module has no replace directives, but its main binds the webhook server on every interface
# (controller-runtime's webhook.Options{Port} with an empty Host; no flag moves it). This project
# only listens on 127.0.0.0/8, so a throwaway wrapper module builds upstream's main.go with ONE
# change: `Host: "127.0.0.1"` in those options. Controllers, client, flags and defaults are
# upstream's, untouched. The metrics and health listeners are moved to loopback with their flags.
set -euo pipefail

VERSION=${TFJOB_OPERATOR_VERSION:-v1.9.3}
MODULE=github.com/kubeflow/training-operator
TFPS_CACHE="${TFPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfps}"
DIR="$TFPS_CACHE/training-operator/$VERSION"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false

if [[ -f $DIR/bin/.complete ]]; then echo "$DIR/bin/training-operator"; exit 0; fi
mkdir -p "$DIR"
LOG="$DIR/build.log"; : >"$LOG"
MOD=$(mktemp -d "$DIR/wrapper.XXXXXX")
trap 'rm -rf "$MOD"' EXIT
t0=$SECONDS
echo ">> building $MODULE $VERSION (cmd/training-operator.v1) into $DIR/bin (log: $LOG)" >&2
SRC=$(go mod download -json "$MODULE@$VERSION" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error","no Dir")))')
printf 'module tfps.local/tfjobbuild\n\ngo 1.26\n\nrequire %s %s\n' "$MODULE" "$VERSION" >"$MOD/go.mod"
mkdir -p "$MOD/cmd/training-operator"
main="$MOD/cmd/training-operator/main.go"
cp "$SRC/cmd/training-operator.v1/main.go" "$main"
chmod u+w "$main"
# the one change: the webhook server listens on loopback (upstream: all interfaces)
grep -q '^			Port: webhookServerPort,$' "$main" || { echo "!! upstream main.go changed: webhook options not found" >&2; exit 1; }
sed -i 's/^			Port: webhookServerPort,$/			Host: "127.0.0.1", Port: webhookServerPort, \/\/ tfps benchmark: loopback only/' "$main"
diff -u "$SRC/cmd/training-operator.v1/main.go" "$main" >"$DIR/main.go.diff" || true
( cd "$MOD" && go mod tidy ) >>"$LOG" 2>&1 || { echo "!! go mod tidy failed; tail of $LOG:" >&2; tail -30 "$LOG" >&2; exit 1; }
( cd "$MOD" && nice -n 5 go build -trimpath -ldflags='-s -w' -o "$MOD/out/training-operator" ./cmd/training-operator ) >>"$LOG" 2>&1 \
  || { echo "!! go build failed; tail of $LOG:" >&2; tail -30 "$LOG" >&2; exit 1; }
rm -rf "${DIR:?}/bin" && mv "$MOD/out" "$DIR/bin"
cp "$SRC/manifests/base/crds/kubeflow.org_tfjobs.yaml" "$DIR/bin/kubeflow.org_tfjobs.yaml"
echo "$MODULE $VERSION (main.go: webhook Host 127.0.0.1, see ../main.go.diff); $(go version)" >"$DIR/bin/VERSIONS"
touch "$DIR/bin/.complete"
echo ">> built training-operator $VERSION in $((SECONDS - t0))s" >&2
echo "$DIR/bin/training-operator"
