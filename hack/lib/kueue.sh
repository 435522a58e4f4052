# shellcheck shell=bash
# Kueue in hack/cluster: its controller manager (quota, queues, admission, preemption) as a local process,
# with the CRDs, ClusterRoles and webhooks of the same version taken from its module source
# (~/.cache/tfps/kueue/<version>/manifests). Everything on 127.0.0.1:
#   - webhook server 127.0.0.1:$KUEUE_WEBHOOK_PORT with a serving cert from the cluster CA (pki.sh); the
#     Mutating/ValidatingWebhookConfigurations and the CRDs' conversion webhooks use
#     `clientConfig.url: https://127.0.0.1:<port>/<path>` and the CA bundle (kueue_manifests.py rewrites
#     Kueue's service-based ones); Kueue's internal cert management is off;
#   - health probes (plain http) and metrics (https, authn/authz by the API server) on loopback ports;
#   - kubeconfig of the client-cert user system:kueue, bound to Kueue's own ClusterRoles (kueue-rbac.yaml).
# Only the webhooks on kueue.x-k8s.io are installed: pods, batch Jobs and other kinds never wait on Kueue.
# Sourced by hack/cluster (expects its variables and helpers).

KUEUE_DIR="$TFPS_CACHE/kueue/$KUEUE_BUILD"
# Kueue reads its metrics serving cert from this fixed path when its internal cert management is off
# (cmd/kueue/main.go); the process gets a private mount namespace with the state's cert dir bound there.
KUEUE_METRICS_CERT_PATH=/etc/kueue/metrics/certs
# Batch Jobs are managed by Kueue only in namespaces carrying this label (none by default), so the
# operator's export Jobs are never suspended as "children" of a queued PSTrainingJob.
KUEUE_BATCH_JOBS_LABEL=kueue.tfps.dev/manage-batch-jobs

write_kueue_config() {
  local out=$STATE/kueue/config.yaml
  cat >"$out" <<YAML
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: 127.0.0.1:$KUEUE_HEALTH_PORT
metrics:
  bindAddress: 127.0.0.1:$KUEUE_METRICS_PORT
webhook:
  host: 127.0.0.1
  port: $KUEUE_WEBHOOK_PORT
  certDir: $STATE/kueue/certs
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
# Only what is queued: a batch Job without the queue-name label is never touched, and Kueue manages batch
# Jobs at all only in namespaces labelled $KUEUE_BATCH_JOBS_LABEL=true. No pod integration.
manageJobsWithoutQueueName: false
managedJobsNamespaceSelector:
  matchLabels:
    $KUEUE_BATCH_JOBS_LABEL: "true"
integrations:
  frameworks: ["batch/job"]   # Kueue's default; the list cannot be empty
  externalFrameworks: ["PSTrainingJob.v1beta1.tfps.dev", "PSTrainingJob.v1alpha1.tfps.dev"]
featureGates:
  VisibilityOnDemand: false   # an aggregated API server on every interface (port 8082)
  MultiKueue: false           # dispatching to other clusters
YAML
  echo "$out"
}

# kueue_render: api.json (the CRDs, conversion webhooks on 127.0.0.1) and webhooks.json (the webhook
# configurations, rewritten) in $STATE/kueue, from the JSON the build kept; and Kueue's ClusterRoles renamed.
kueue_render() {
  local m=$KUEUE_DIR/manifests c conv=()
  # The CRDs Kueue's kustomization gives a conversion webhook (several served versions).
  for c in $(sed -n 's|^- path: patches/webhook_in_\(.*\)\.yaml$|\1|p' "$m/crd/kustomization.yaml"); do
    conv+=("$c.kueue.x-k8s.io")
  done
  (( ${#conv[@]} )) || fail_component kueue "no conversion-webhook CRDs named in $m/crd/kustomization.yaml"
  python3 "$HACK_DIR/lib/kueue_manifests.py" "$KUEUE_WEBHOOK_PORT" "$PKI/ca.crt" "$m/crds.json" "$m/webhooks.json" \
    "$STATE/kueue" "${conv[@]}" >"$STATE/kueue/crds.txt" 2>>"$LOGS/kueue.setup.log" \
    || fail_component kueue "rewriting Kueue's manifests failed (see $LOGS/kueue.setup.log)"
  sed 's/^  name: manager-role$/  name: kueue-manager-role/' "$m/rbac/role.yaml" >"$STATE/kueue/rbac.yaml"
  { echo "---"; sed 's/^  name: metrics-auth-role$/  name: kueue-metrics-auth-role/' "$m/rbac/metrics_auth_role.yaml"; } \
    >>"$STATE/kueue/rbac.yaml"
}

# kueue_apply_api: the CRDs, Kueue's ClusterRoles and their bindings (`create`: etcd is new at every `up`).
kueue_apply_api() {
  local setup=$LOGS/kueue.setup.log
  kubectl_ create -f "$STATE/kueue/api.json" -f "$STATE/kueue/rbac.yaml" -f "$HACK_DIR/lib/kueue-rbac.yaml" \
    >>"$setup" 2>&1 || fail_component kueue "creating Kueue's CRDs/RBAC failed (see $setup)"
  local want t0=$SECONDS
  want=$(wc -w <"$STATE/kueue/crds.txt")
  until (( $(kueue_crds_established) == want )); do
    (( SECONDS - t0 < 60 )) || fail_component kueue "Kueue's CRDs were not established after 60s"
    sleep 0.2
  done
}

# kueue_crds_established: how many of Kueue's CRDs are Established (one list call; `kubectl wait` on
# eleven CRDs takes over a second even when all are)
kueue_crds_established() {
  kubectl_ get crd -l app.kubernetes.io/part-of=tfps-hack-cluster --request-timeout=5s \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Established")].status}{"\n"}{end}' 2>/dev/null |
    grep -c '^True$' || true
}

# kueue_apply_webhooks: the webhook configurations, after Kueue is ready (so no request ever meets a
# registered webhook that is not listening yet).
kueue_apply_webhooks() {
  kubectl_ create -f "$STATE/kueue/webhooks.json" >>"$LOGS/kueue.setup.log" 2>&1 \
    || fail_component kueue "creating the webhook configurations failed (see $LOGS/kueue.setup.log)"
}

# kueue_webhook_answers: the API server reaches Kueue's webhook (a server-side dry run of a ResourceFlavor
# passes both the mutating and the validating webhook; nothing is stored).
kueue_webhook_answers() {
  kubectl_ create --dry-run=server -o name -f - <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: tfps-webhook-probe}
YAML
}

start_kueue() {
  log "installing Kueue $KUEUE_VERSION's CRDs and RBAC"
  mkdir -p "$STATE/kueue/certs"
  ln -sfn "$PKI/kueue.crt" "$STATE/kueue/certs/tls.crt"
  ln -sfn "$PKI/kueue.key" "$STATE/kueue/certs/tls.key"
  kueue_render
  kueue_apply_api
  local cfg wrap
  cfg=$(write_kueue_config)
  [[ -d $KUEUE_METRICS_CERT_PATH ]] || mkdir -p "$KUEUE_METRICS_CERT_PATH" \
    || fail_component kueue "cannot create the mount point $KUEUE_METRICS_CERT_PATH (run as root)"
  # unshare execs sh, sh execs kueue: one pid throughout, and the pid file names kueue's command line.
  wrap=(unshare --mount --propagation private sh -c 'mount --bind "$0" '"$KUEUE_METRICS_CERT_PATH"' && exec "$@"'
    "$STATE/kueue/certs")
  start_proc_via kueue "${#wrap[@]}" "${wrap[@]}" "$KUEUE_DIR/bin/kueue" \
    --config="$cfg" --kubeconfig="$PKI/kueue.kubeconfig" --zap-log-level=2
  wait_for kueue 120 curl -fsS --max-time 2 "http://127.0.0.1:$KUEUE_HEALTH_PORT/readyz"
  kueue_apply_webhooks
  wait_for kueue 30 kueue_webhook_answers
  log "  kueue webhooks answer on 127.0.0.1:$KUEUE_WEBHOOK_PORT"
}
