# shellcheck shell=bash
# Process helpers for hack/cluster: start by pid file, stop by pid file, wait, report failures.

# proc_pid NAME -> pid from the pid file if that process is alive AND is the binary we started
proc_pid() {
  local f="$PIDS/$1.pid" pid
  [[ -f $f ]] || return 1
  pid=$(<"$f")
  [[ $pid =~ ^[0-9]+$ ]] && [[ -r /proc/$pid/cmdline ]] || return 1
  # Guard against pid reuse: the recorded command line must be the one we launched (or, for the
  # instant before setsid execs it, setsid about to launch it: under load a readiness poll sees that).
  local cmd actual
  [[ -f $PIDS/$1.cmd ]] || return 1
  cmd=$(<"$PIDS/$1.cmd"); actual=$(tr '\0' ' ' </proc/"$pid"/cmdline)
  [[ $actual == "$cmd" || $actual == "setsid $cmd" ]] || return 1
  echo "$pid"
}
proc_alive() { proc_pid "$1" >/dev/null; }

# start_proc NAME BINARY ARGS... : start detached (own session), log to $LOGS/NAME.log
start_proc() { start_proc_via "$1" 0 "${@:2}"; }

# start_proc_via NAME N WRAPPER(N words)... BINARY ARGS... : the same, launched through a wrapper command
# that ends by exec'ing BINARY ARGS in its own process (e.g. `unshare ... sh -c '...; exec "$@"'`): the
# pid file and the recorded command line are BINARY's.
start_proc_via() {
  local name=$1 n=$2; shift 2
  local wrap=("${@:1:n}"); shift "$n"
  [[ -x $1 ]] || fail_component "$name" "binary $1 is missing"
  log "starting $name (log: ${LOGS#"$REPO"/}/$name.log)"
  [[ -f $LOGS/$name.log ]] && mv -f "$LOGS/$name.log" "$LOGS/$name.log.prev"   # keep one previous run
  printf '==== %s start %s\n%s\n' "$name" "$(date -u +%FT%TZ)" "$*" >"$LOGS/$name.log"
  # 9>&-: never hand the `up` lock (fd 9) to a long-lived process, or every later `up` waits forever
  setsid "${wrap[@]}" "$@" >>"$LOGS/$name.log" 2>&1 </dev/null 9>&- &
  local pid=$! cmd i actual
  echo "$pid" >"$PIDS/$name.pid"
  cmd=$(printf '%s ' "$@"); printf '%s' "$cmd" >"$PIDS/$name.cmd"
  # Until the forked child has exec'd setsid and setsid has exec'd the binary, its command line passes
  # through states proc_pid would not recognise: a copy of this shell, then (inside each exec) an empty
  # one. Wait for the binary's own (or the child's end), so the first readiness poll sees a settled one.
  for ((i = 0; i < 200; i++)); do
    actual=$(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null) || break
    [[ $actual == "$cmd" ]] && break
    sleep 0.05
  done
}

# fail_component NAME REASON : name the component, show its log tail, stop what we started, exit
fail_component() {
  echo "!! $1 failed to start: $2" >&2
  if [[ -f $LOGS/$1.log ]]; then
    echo "---- last 30 lines of ${LOGS#"$REPO"/}/$1.log ----" >&2
    tail -n 30 "$LOGS/$1.log" >&2
    echo "----" >&2
  fi
  stop_all
  exit 1
}

# wait_for NAME TIMEOUT_S CMD... : poll CMD until it succeeds; fail if NAME dies or time runs out
wait_for() {
  local name=$1 timeout=$2 t0=$SECONDS; shift 2
  until "$@" >/dev/null 2>&1; do
    # a second look before calling it dead: a failed look can only be a transient (see start_proc)
    proc_alive "$name" || { sleep 0.2; proc_alive "$name"; } || fail_component "$name" "process exited"
    (( SECONDS - t0 < timeout )) || fail_component "$name" "not ready after ${timeout}s"
    sleep 0.5
  done
  log "  $name ready ($((SECONDS - t0))s)"
}

# stop_group NAME... : TERM the named components together, KILL whatever is left after 15s
stop_group() {
  local name pid running=() n=0
  for name in "$@"; do
    if pid=$(proc_pid "$name"); then
      log "stopping $name (pid $pid)"
      kill -TERM "$pid" 2>/dev/null || true
      running+=("$pid")
    fi
  done
  _alive() { local p; for p in "${running[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
  while (( ${#running[@]} )) && _alive && ((n++ < 150)); do sleep 0.1; done
  if (( ${#running[@]} )) && _alive; then
    log "  $* did not exit within 15s of TERM; killing"
    kill -KILL "${running[@]}" 2>/dev/null || true
    while _alive; do sleep 0.1; done
  fi
  for name in "$@"; do rm -f "$PIDS/$name.pid" "$PIDS/$name.cmd"; done
}

# stop_all : stop every component we started: clients first, then the apiserver, then etcd
stop_all() {
  stop_group kserve kueue gang-scheduler podgroup-controller kwok kube-scheduler kube-controller-manager
  stop_group kube-apiserver
  stop_group etcd
}

port_in_use() { ss -Htln "sport = :$1" 2>/dev/null | grep -q .; }

check_ports_free() {
  local p
  for p in "$@"; do
    if port_in_use "$p"; then
      die "port $p is already in use (not by a process this checkout started): $(ss -Htlnp "sport = :$p" | head -1)"
    fi
  done
}
