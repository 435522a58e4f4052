# shellcheck shell=bash
# The gang scheduler of hack/cluster: scheduler-plugins' kube-scheduler build with the Coscheduling
# plugin as a second scheduler (profile scheduler-plugins-scheduler; the default scheduler keeps
# default-scheduler), and its controller, which keeps PodGroup status (phase, scheduled/running
# counts). Both run as the user system:scheduler-plugins with the RBAC of gang-rbac.yaml, listen
# on 127.0.0.1 only, and read the PodGroup/ElasticQuota CRDs of the same version.
# Sourced by hack/cluster (expects its variables and helpers).

GANG_SCHEDULER_NAME=scheduler-plugins-scheduler
SCHED_PLUGINS_DIR="$TFPS_CACHE/scheduler-plugins/$SCHED_PLUGINS_VERSION"

write_gang_config() {
  local out=$STATE/gang-scheduler.yaml
  cat >"$out" <<YAML
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: $PKI/scheduler-plugins.kubeconfig
profiles:
- schedulerName: $GANG_SCHEDULER_NAME
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
    queueSort:
      enabled:
      - name: Coscheduling
      disabled:
      - name: "*"
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: 10
YAML
  echo "$out"
}

start_gang() {
  log "installing the PodGroup and ElasticQuota CRDs (scheduler-plugins $SCHED_PLUGINS_VERSION) and the gang RBAC"
  kubectl_ apply --server-side -f "$SCHED_PLUGINS_DIR/manifests/coscheduling/crd.yaml" \
    -f "$SCHED_PLUGINS_DIR/manifests/capacityscheduling/crd.yaml" -f "$HACK_DIR/lib/gang-rbac.yaml" \
    >>"$LOGS/gang-scheduler.setup.log" 2>&1 || fail_component gang-scheduler "applying CRDs/RBAC failed (see $LOGS/gang-scheduler.setup.log)"
  kubectl_ wait --for=condition=Established --timeout=60s crd/podgroups.scheduling.x-k8s.io crd/elasticquotas.scheduling.x-k8s.io \
    >>"$LOGS/gang-scheduler.setup.log" 2>&1 || fail_component gang-scheduler "the CRDs were not established"
  local cfg; cfg=$(write_gang_config)
  start_proc gang-scheduler "$SCHED_PLUGINS_DIR/bin/scheduler" \
    --config="$cfg" \
    --authentication-kubeconfig="$PKI/scheduler-plugins.kubeconfig" \
    --authorization-kubeconfig="$PKI/scheduler-plugins.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$GANG_SCHED_PORT" \
    --tls-cert-file="$PKI/kube-scheduler.crt" --tls-private-key-file="$PKI/kube-scheduler.key" \
    --profiling=false --v=1
  start_proc podgroup-controller "$SCHED_PLUGINS_DIR/bin/controller" \
    --kubeconfig="$PKI/scheduler-plugins.kubeconfig" \
    --metricsAddr=0 --probeAddr="127.0.0.1:$PODGROUP_CTRL_PORT" --enableLeaderElection=false
  wait_for gang-scheduler 90 curl -fsS --max-time 2 --cacert "$PKI/ca.crt" "https://127.0.0.1:$GANG_SCHED_PORT/healthz"
  wait_for podgroup-controller 90 curl -fsS --max-time 2 "http://127.0.0.1:$PODGROUP_CTRL_PORT/readyz"
}
