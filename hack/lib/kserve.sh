# shellcheck shell=bash
# KServe's controller manager in hack/cluster (hack/kserve up|down|status): the binary hack/kserve builds, run
# as a local process against hack/cluster's API server, with what it needs from KServe's own module source at
# the pinned version (hack/lib/kserve_manifests.py renders it into $STATE/kserve):
#   - every KServe CRD (the manager watches InferenceGraphs, TrainedModels and the rest besides
#     InferenceServices, and fails to start without them), namespace kserve, its ClusterRole bound to the
#     client-cert user system:kserve;
#   - the inferenceservice-config ConfigMap (read once at start, it exits without it): RawDeployment by
#     default (no Knative here), no Ingress or Istio VirtualService (no ingress controller here);
#   - its webhooks (InferenceService defaulter and validator, the pod mutator that adds the storage
#     initializer or the model mount, the runtime validators) on 127.0.0.1:$KSERVE_WEBHOOK_PORT with a serving
#     cert from the cluster CA, registered by `clientConfig.url` after the manager is ready; controller-runtime
#     reads the cert from $TMPDIR/k8s-webhook-server/serving-certs (KServe sets no CertDir);
#   - the ClusterServingRuntimes kserve-tensorflow-serving and kserve-tritonserver (created through its
#     runtime validator webhook, so that it answers is proven);
#   - health probes (http) and metrics on loopback ports; no leader election.
# Expects hack/kserve's variables (STATE, PKI, LOGS, PIDS, SERVER, KSERVE_DIR) and the cluster helpers.

KSERVE_WEBHOOK_PORT=${TFPS_KSERVE_WEBHOOK_PORT:-16269}
KSERVE_METRICS_PORT=${TFPS_KSERVE_METRICS_PORT:-16270}
KSERVE_HEALTH_PORT=${TFPS_KSERVE_HEALTH_PORT:-16271}

kserve_pki() {
  local made=0
  [[ -s $PKI/kserve.crt && -s $PKI/kserve.key ]] || { issue kserve kserve-webhook "" server && made=1; } ||
    die "openssl failed to issue KServe's webhook certificate (see $PKI/openssl.log)"
  [[ -s $PKI/kserve-client.crt && -s $PKI/kserve-client.key ]] ||
    { issue kserve-client system:kserve "" client && made=1; } ||
    die "openssl failed to issue KServe's client certificate (see $PKI/openssl.log)"
  if ((made)) || [[ ! -s $PKI/kserve.kubeconfig ]] || ! grep -q "server: $SERVER\$" "$PKI/kserve.kubeconfig"; then
    write_kubeconfig "$PKI/kserve.kubeconfig" kserve-client system:kserve
  fi
  local certs=$STATE/kserve/tmp/k8s-webhook-server/serving-certs
  mkdir -p "$certs"
  ln -sfn "$PKI/kserve.crt" "$certs/tls.crt"
  ln -sfn "$PKI/kserve.key" "$certs/tls.key"
}

kserve_crds_established() {
  kubectl_ get crd -l app.kubernetes.io/part-of=tfps-hack-kserve --request-timeout=5s \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Established")].status}{"\n"}{end}' 2>/dev/null |
    grep -c '^True$' || true
}

kserve_ready() { curl -fsS --max-time 2 "http://127.0.0.1:$KSERVE_HEALTH_PORT/readyz" >/dev/null 2>&1; }

# kserve_up: everything above; nothing to do when the manager runs and its CRDs are there.
kserve_up() {
  local t0=$SECONDS setup=$LOGS/kserve.setup.log
  [[ -f $STATE/kubeconfig ]] && kubectl_ get --raw /readyz >/dev/null 2>&1 || die "hack/cluster is not up (hack/cluster up)"
  [[ -x $KSERVE_DIR/bin/manager && -f $KSERVE_DIR/bin/.complete ]] || die "KServe's manager is not built (hack/kserve build)"
  if proc_alive kserve && kserve_ready && (($(kserve_crds_established) > 0)); then
    log "KServe's manager already running (pid $(cat "$PIDS/kserve.pid")); nothing to do"
    return 0
  fi
  stop_group kserve
  mkdir -p "$STATE/kserve" "$LOGS" "$PIDS"
  kserve_pki
  local src
  src=$(module_dir)
  python3 "$HACK_DIR/lib/kserve_manifests.py" "$src" "$KSERVE_WEBHOOK_PORT" "$PKI/ca.crt" "$STATE/kserve" \
    >>"$setup" 2>&1 || die "rendering KServe's manifests failed (see $setup)"
  log "installing KServe $KSERVE_VERSION's CRDs, config and RBAC"
  kubectl_ apply --server-side --force-conflicts --field-manager=tfps-hack-kserve -f "$STATE/kserve/api.json" \
    >>"$setup" 2>&1 || die "installing KServe's CRDs/config/RBAC failed (see $setup)"
  local want t1=$SECONDS
  want=$(wc -l <"$STATE/kserve/crds.txt")
  until (($(kserve_crds_established) == want)); do
    ((SECONDS - t1 < 60)) || die "KServe's CRDs were not established after 60s"
    sleep 0.2
  done
  start_proc_via kserve 3 env TMPDIR="$STATE/kserve/tmp" POD_NAMESPACE=kserve "$KSERVE_DIR/bin/manager" \
    --kubeconfig="$PKI/kserve.kubeconfig" \
    --metrics-addr="127.0.0.1:$KSERVE_METRICS_PORT" --health-probe-addr="127.0.0.1:$KSERVE_HEALTH_PORT" \
    --webhook-port="$KSERVE_WEBHOOK_PORT" --leader-elect=false
  wait_for kserve 120 kserve_ready
  kubectl_ apply --server-side --force-conflicts --field-manager=tfps-hack-kserve -f "$STATE/kserve/webhooks.json" \
    >>"$setup" 2>&1 || fail_kserve "registering KServe's webhooks failed (see $setup)"
  # The runtimes pass KServe's validating webhook: they are created once it answers.
  local t2=$SECONDS
  until kubectl_ apply --server-side --force-conflicts --field-manager=tfps-hack-kserve \
    -f "$STATE/kserve/runtimes.json" >>"$setup" 2>&1; do
    ((SECONDS - t2 < 60)) || fail_kserve "creating the ClusterServingRuntimes failed (see $setup)"
    sleep 0.5
  done
  # what clients' discovery reads (it answers 404 for some seconds after the CRDs are Established)
  local t3=$SECONDS
  until kubectl_ get --raw /apis/serving.kserve.io/v1beta1 >/dev/null 2>&1; do
    ((SECONDS - t3 < 60)) || fail_kserve "/apis/serving.kserve.io/v1beta1 not served 60s after its CRDs"
    sleep 0.5
  done
  log "KServe $KSERVE_VERSION up in $((SECONDS - t0))s: webhooks on 127.0.0.1:$KSERVE_WEBHOOK_PORT, log ${LOGS#"$REPO"/}/kserve.log"
}

# procs.sh's wait_for and start_proc call this on failure: here it undoes KServe alone (procs.sh's own stops
# the whole cluster, which other sessions share).
fail_component() { fail_kserve "$1 failed to start: $2"; }

fail_kserve() {
  echo "!! kserve: $1" >&2
  tail -n 30 "$LOGS/kserve.log" >&2 || true
  kserve_down
  exit 1
}

# kserve_down: the InferenceServices first (KServe's finalizer needs the manager), then the webhooks (so no
# pod creation waits on a stopped server), the manager, and the API.
kserve_down() {
  local setup=$LOGS/kserve.setup.log
  mkdir -p "$LOGS"
  if [[ -f $STATE/kserve/crds.txt ]] && kubectl_ get crd inferenceservices.serving.kserve.io >/dev/null 2>&1; then
    kubectl_ delete inferenceservices.serving.kserve.io --all -A --timeout=60s >>"$setup" 2>&1 || true
  fi
  [[ -f $STATE/kserve/webhooks.json ]] &&
    kubectl_ delete --ignore-not-found -f "$STATE/kserve/webhooks.json" >>"$setup" 2>&1
  stop_group kserve
  if [[ -f $STATE/kserve/api.json ]]; then
    # what is left of a manager that died: nothing can clear KServe's finalizer any more
    local isvc
    for isvc in $(kubectl_ get inferenceservices.serving.kserve.io -A \
      -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}' 2>/dev/null); do
      kubectl_ -n "${isvc%/*}" patch inferenceservices.serving.kserve.io "${isvc#*/}" --type=merge \
        -p '{"metadata":{"finalizers":null}}' >>"$setup" 2>&1 || true
    done
    kubectl_ delete --ignore-not-found --wait=true --timeout=120s -f "$STATE/kserve/api.json" >>"$setup" 2>&1 ||
      die "removing KServe's API failed (see $setup)"
  fi
  log "KServe down"
}

kserve_status() {
  if proc_alive kserve && kserve_ready; then
    log "KServe's manager running (pid $(cat "$PIDS/kserve.pid")), ready; $(kserve_crds_established) CRDs established"
  else
    log "KServe's manager is not running (hack/kserve up)"
    return 1
  fi
}
